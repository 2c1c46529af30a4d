"""A short-lived cache of topic snapshots, for validating requests without reading the Delta log each time.

A cached snapshot younger than ``max_age_ms`` is served as it is. An older one
(up to ``stale_ms``) is still served while one background thread refreshes it:
on object storage a refresh replays every commit since the cached version, a
round trip each, and a produce request must not wait for that. Only request
*validation* (partition count, configs) and lag reporting use it; appends are
validated again by the committer against the current state, and a partition
beyond a cached count is checked again with ``fresh=True``, so a stale entry
can only delay -- never corrupt -- a decision.  Thread-safe.
"""

from __future__ import annotations

import threading
import time

from lakelog import Log
from lakelog.storage.topic_snapshot import TopicSnapshot


class TopicMetadata:
    """``get(topic)`` → a recent :class:`TopicSnapshot` (raises ``UNKNOWN_TOPIC_OR_PARTITION``)."""

    def __init__(self, log: Log, max_age_ms: int = 1000, stale_ms: int = 10_000) -> None:
        self.log = log
        self.max_age_s = max_age_ms / 1000.0
        self.stale_s = stale_ms / 1000.0
        self._lock = threading.Lock()
        self._entries: dict[str, tuple[float, TopicSnapshot]] = {}
        self._loading: dict[str, threading.Lock] = {}
        self._refreshing: set[str] = set()

    def get(self, topic: str, *, fresh: bool = False) -> TopicSnapshot:
        now = time.monotonic()
        with self._lock:
            entry = self._entries.get(topic)
            if entry is not None and not fresh:
                age = now - entry[0]
                if age < self.max_age_s:
                    return entry[1]
                if age < self.stale_s:
                    if topic not in self._refreshing:
                        self._refreshing.add(topic)
                        threading.Thread(target=self._refresh, args=(topic,), daemon=True,
                                         name=f"lakelog-metadata-{topic}").start()
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

    def _refresh(self, topic: str) -> None:
        try:
            self.get(topic, fresh=True)
        except Exception:  # e.g. the topic was deleted: the next caller loads it and gets the error itself
            self.invalidate(topic)
        finally:
            with self._lock:
                self._refreshing.discard(topic)

    def peek(self, topic: str) -> TopicSnapshot | None:
        """The cached snapshot if it is younger than ``max_age_ms``, else None: never reads storage, never waits
        for a load in progress (safe on the event loop)."""
        with self._lock:
            entry = self._entries.get(topic)
        return entry[1] if entry is not None and time.monotonic() - entry[0] < self.max_age_s else None

    def invalidate(self, topic: str) -> None:
        with self._lock:
            self._entries.pop(topic, None)
