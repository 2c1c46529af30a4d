"""A short-lived cache of topic snapshots, for validating requests without reading the Delta log each time.

A cached snapshot is at most ``max_age_ms`` old.  Only request *validation*
(partition count, configs) and lag reporting use it; appends are validated
again by the committer against the current state, so a stale entry can only
delay -- never corrupt -- a decision.  Thread-safe.
"""

from __future__ import annotations

import threading
import time

from lakelog import Log
from lakelog.storage.topic_snapshot import TopicSnapshot


class TopicMetadata:
    """``get(topic)`` → a recent :class:`TopicSnapshot` (raises ``UNKNOWN_TOPIC_OR_PARTITION``)."""

    def __init__(self, log: Log, max_age_ms: int = 1000) -> None:
        self.log = log
        self.max_age_s = max_age_ms / 1000.0
        self._lock = threading.Lock()
        self._entries: dict[str, tuple[float, TopicSnapshot]] = {}
        self._loading: dict[str, threading.Lock] = {}

    def get(self, topic: str, *, fresh: bool = False) -> TopicSnapshot:
        now = time.monotonic()
        with self._lock:
            entry = self._entries.get(topic)
            if entry is not None and not fresh and now - entry[0] < self.max_age_s:
                return entry[1]
            loading = self._loading.setdefault(topic, threading.Lock())
        with loading:  # one load per topic at a time; waiters reuse its result
            with self._lock:
                entry = self._entries.get(topic)
                if entry is not None and entry[0] >= now and (not fresh or entry[0] > now):
                    return entry[1]
            snap = self.log.snapshot(topic)
            with self._lock:
                self._entries[topic] = (time.monotonic(), snap)
            return snap

    def peek(self, topic: str) -> TopicSnapshot | None:
        """The cached snapshot if it is younger than ``max_age_ms``, else None: never reads storage, never waits
        for a load in progress (safe on the event loop)."""
        with self._lock:
            entry = self._entries.get(topic)
        return entry[1] if entry is not None and time.monotonic() - entry[0] < self.max_age_s else None

    def invalidate(self, topic: str) -> None:
        with self._lock:
            self._entries.pop(topic, None)
