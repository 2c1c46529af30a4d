"""The Schema Registry's store: the internal topic ``_schemas`` (Confluent's ``kafkastore.topic``, in its record
format), replayed into a :class:`~lakelog.schema_registry.registry_state.RegistryState` and written by conditional
appends.

**Reads** answer from the replayed state, brought up to date first: at most :data:`READ_STALENESS_S` old
(:meth:`SchemaStore.read`), and always re-read before answering "not found" (:meth:`SchemaStore.missing`), so a
schema registered through one front is found through any other at once.

**Writes** are conditional appends: a write is planned on the state at log position P and appended with the
Delta ``txn`` app id :data:`FENCE_APP` set to P + 1; the committer refuses it (as a duplicate, nothing
written) when a write planned on P or later landed first. The loser re-reads and plans again, up to
:data:`WRITE_ATTEMPTS` times. So ids stay globally unique and versions dense however many fronts register at
once, with no leader: the log is the order.

Thread-safe: one lock serialises state changes and reads of the log tail.
"""

from __future__ import annotations

import threading
import time
from typing import Callable, Protocol

from lakelog.errors import KafkaError, TopicAlreadyExists, UnknownTopicOrPartition
from lakelog.reader.log_reader import fetch
from lakelog.schema.schema_errors import StoreError, StoreTimeout
from lakelog.schema_registry.registry_state import RegistryState
from lakelog.storage.storage_root import StorageRoot
from lakelog.storage.topic_snapshot import TopicSnapshot
from lakelog.writer.records import AppendResult, PartitionBatch

SCHEMAS_TOPIC = "_schemas"
SCHEMAS_TOPIC_CONFIGS = {"cleanup.policy": "compact"}
FENCE_APP = "lakelog.schemas"
READ_STALENESS_S = 0.5  # how old the state may be when a read answers from it (a miss always re-reads)
WRITE_ATTEMPTS = 50
_FETCH_RECORDS = 10_000

#: ``plan(state) -> (records, result)``: the (key, value) records a write appends, planned on ``state``, and what
#: it answers once they landed
WritePlan = Callable[[RegistryState], tuple[list[tuple[bytes, bytes | None]], object]]


class RegistryLog(Protocol):
    """What the registry needs of a :class:`~lakelog.log.Log`."""

    root: StorageRoot

    def snapshot(self, topic: str) -> TopicSnapshot: ...

    def create_topic(self, name: str, partitions: int = 1, configs=None): ...

    def append_batches(self, topic: str, batches: list[PartitionBatch]) -> list[AppendResult | KafkaError]: ...


class SchemaStore:
    """``_schemas`` under ``log``'s root; ``on_reset`` is called when the topic was created or recreated since the
    last read (the state starts over: what was derived from it is stale)."""

    def __init__(self, log: RegistryLog, on_reset: Callable[[], None] | None = None) -> None:
        self.log = log
        self._on_reset = on_reset
        self._lock = threading.RLock()
        self._state = RegistryState()
        self._read_at = -1.0  # monotonic time of the last read of the log tail
        self._topic_id: str | None = None

    @property
    def state(self) -> RegistryState:
        """The state as last read, without reading."""
        return self._state

    def refresh(self, *, max_age_s: float = 0.0) -> RegistryState:
        """Apply the records appended to ``_schemas`` since the last read (if that is older than ``max_age_s``)."""
        with self._lock:
            if max_age_s and time.monotonic() - self._read_at < max_age_s:
                return self._state
            try:
                snap = self.log.snapshot(SCHEMAS_TOPIC)
            except UnknownTopicOrPartition:
                self._state, self._topic_id, self._read_at = RegistryState(), None, time.monotonic()
                return self._state
            except KafkaError as e:
                raise StoreError(f"the schema store could not be read: {e.message}") from None
            if snap.topic_id != self._topic_id:  # created (or recreated) since: start over
                self._state, self._topic_id = RegistryState(), snap.topic_id
                if self._on_reset is not None:
                    self._on_reset()
            state = self._state
            hw = snap.high_watermark(0)
            pos = max(state.position, snap.log_start_offset(0))
            try:
                while pos < hw:
                    res = fetch(self.log.root, snap, 0, pos, max_records=_FETCH_RECORDS)
                    cols = res.records.select(["offset", "key", "value"]).to_pydict()
                    for off, key, value in zip(cols["offset"], cols["key"], cols["value"]):
                        state.apply(off, key, value)
                    if res.next_offset <= pos:
                        break
                    pos = res.next_offset
            except (KafkaError, OSError) as e:
                raise StoreError(f"the schema store could not be read: {e}") from None
            state.position = max(state.position, pos)
            self._read_at = time.monotonic()
            return state

    def read(self) -> RegistryState:
        """The state, at most :data:`READ_STALENESS_S` old."""
        return self.refresh(max_age_s=READ_STALENESS_S)

    def missing(self, check: Callable[[RegistryState], bool]) -> RegistryState:
        """The state after a re-read if ``check(state)`` fails on the cached one (a miss is never stale)."""
        state = self.read()
        if not check(state):
            state = self.refresh()
        return state

    def write(self, plan: WritePlan) -> object:
        """Run ``plan`` on the latest state and append its records conditionally (see the module doc); the result
        once they landed. ``plan`` runs under the store's lock."""
        for _ in range(WRITE_ATTEMPTS):
            with self._lock:
                state = self.refresh()
                records, result = plan(state)
                if not records:
                    return result
                position = state.position
            self._ensure_topic()
            batch = PartitionBatch(0, [{"key": k, "value": v} for k, v in records],
                                   transaction=(FENCE_APP, position + 1))
            try:
                outcome = self.log.append_batches(SCHEMAS_TOPIC, [batch])[0]
            except KafkaError as e:
                outcome = e
            if isinstance(outcome, KafkaError):
                if outcome.retriable:
                    continue
                raise StoreError(f"the schema store could not be written: {outcome.message}")
            if outcome.duplicate:  # another write landed after the state this one was planned on
                continue
            with self._lock:
                self.refresh()  # our records, and anything before them
            return result
        raise StoreTimeout(f"a write to the schema store lost to concurrent writes {WRITE_ATTEMPTS} times; retry")

    def _ensure_topic(self) -> None:
        try:
            self.log.snapshot(SCHEMAS_TOPIC)
        except UnknownTopicOrPartition:
            try:
                self.log.create_topic(SCHEMAS_TOPIC, 1, SCHEMAS_TOPIC_CONFIGS)
            except TopicAlreadyExists:
                pass
