"""Waking Fetch long polls when a commit lands (Kafka's delayed fetch purgatory, keyed by topic).

The accumulator calls :meth:`CommitWaiter.notify` from its commit thread after
each commit; Fetch requests waiting on one of the committed topics wake at
once instead of at the end of ``max.wait.ms``.  Commits by other processes on
the same root are not seen here: waiters also wake every ``poll_s`` and look.
"""

from __future__ import annotations

import asyncio
import time
from contextvars import ContextVar

#: Seconds a request spent waiting for commits (its long poll), added up where the request's task set it to a
#: list: handling time charged to request quotas leaves the waits out (kafka_front/throttle.py).
WAITED: ContextVar["list[float] | None"] = ContextVar("lakelog_fetch_waited", default=None)


class CommitWaiter:
    """Topic -> asyncio events of the fetches waiting on it.  ``notify`` is thread-safe; ``wait`` runs on the
    loop the waiter was created for."""

    def __init__(self, loop: asyncio.AbstractEventLoop, *, poll_s: float = 0.25) -> None:
        self._loop = loop
        self._waiting: dict[str, set[asyncio.Event]] = {}
        self.poll_s = poll_s

    def notify(self, topic: str, *_ignored) -> None:
        """Called after a commit to ``topic`` (from any thread); signature fits the accumulator's ``on_commit``."""
        if topic in self._waiting:
            self._loop.call_soon_threadsafe(self._wake, topic)

    def _wake(self, topic: str) -> None:
        for event in self._waiting.get(topic, ()):
            event.set()

    async def wait(self, topics: set[str], timeout_s: float) -> None:
        """Return after a commit to one of ``topics``, or after ``min(timeout_s, poll_s)``."""
        event = asyncio.Event()
        for t in topics:
            self._waiting.setdefault(t, set()).add(event)
        started = time.monotonic()
        try:
            await asyncio.wait_for(event.wait(), timeout=max(0.0, min(timeout_s, self.poll_s)))
        except asyncio.TimeoutError:
            pass
        finally:
            waited = WAITED.get()
            if waited is not None:
                waited[0] += time.monotonic() - started
            for t in topics:
                waiters = self._waiting.get(t)
                if waiters is not None:
                    waiters.discard(event)
                    if not waiters:
                        del self._waiting[t]
