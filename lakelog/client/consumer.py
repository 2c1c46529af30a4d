"""A Kafka-shaped consumer: group membership over HTTP, records straight from storage.

    consumer = Consumer("http://127.0.0.1:8080", group_id="billing")
    consumer.subscribe(["orders"])
    while True:
        for tp, records in consumer.poll(timeout_ms=1000).items():
            ...
        consumer.commit()                     # or enable_auto_commit (the default)

Only membership (join, heartbeat, leave) and offsets (commit, fetch) go
through the front; records are read directly from the object store through
the topic's Arrow index and a read-ahead :class:`~lakelog.reader.fetcher.Fetcher`,
so data never flows through the front.  The storage root is the front's
(``GET /v1/health``) unless ``root=`` is given; credentials come from the
standard AWS environment or ``storage_options``.

Keyword arguments use kafka-python's spelling.  Delivery is at-least-once by
default: with ``enable_auto_commit`` the positions of records returned by
earlier polls are committed every ``auto_commit_interval_ms``, before a
rebalance takes partitions away, and on :meth:`close`.

Groups: the consumer is a member on Kafka's consumer protocol (KIP-848, as Kafka 4's ``group.protocol=consumer``):
joins, heartbeats and the assignments the front sends are the
:class:`~lakelog.client.consumer_coordinator.ConsumerCoordinator`'s; what is consumed and where, the
:class:`~lakelog.client.subscription_state.SubscriptionState`'s. A front that is unreachable (restarting) is
retried: :meth:`poll` keeps serving the current assignment. Callbacks run in the thread calling :meth:`poll`.
HTTP members and Kafka members (``group.protocol=consumer``, or classic ones as Kafka 4 admits them) share groups.

Isolation: ``isolation_level`` is ``"read_uncommitted"`` (the default, as
kafka-python) or ``"read_committed"``; both read the same records, because
lakelog never stores uncommitted data: a transaction's records reach their
topic tables only at its commit (an aborted one's never do), so every stored
record is committed and the last stable offset is the high watermark.

Static members (``group_instance_id``) leave only for now on :meth:`close`
(KIP-345, member epoch -2): a restart within ``session_timeout_ms`` gets the
same partitions back without a rebalance.

Not thread-safe, like Kafka's consumer: use one consumer per thread (the
heartbeat thread is internal).
"""

from __future__ import annotations

import logging
import re
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping

import pyarrow as pa

from lakelog.client.consumer_coordinator import ConsumerCoordinator, GroupSettings, OffsetAndMetadata
from lakelog.client.subscription_state import Callback, SubscriptionState
from lakelog.client.transport import Transport
from lakelog.errors import InvalidConfig, InvalidRequest, KafkaError, OffsetOutOfRange
from lakelog.group.assignors import TopicPartition
from lakelog.group.server_assignors import SERVER_ASSIGNORS
from lakelog.reader.fetcher import DEFAULT_MAX_PARTITION_FETCH_BYTES, Fetcher

__all__ = ["Consumer", "ConsumerGroupMetadata", "ConsumerRecord", "OffsetAndMetadata", "OffsetAndTimestamp"]

OFFSET_RESETS = ("earliest", "latest", "none")
ISOLATION_LEVELS = ("read_uncommitted", "read_committed")
_POLL_INTERVAL_S = 0.05  # how often an empty poll looks again (and retries an unreachable front)
log = logging.getLogger(__name__)

@dataclass(frozen=True)
class ConsumerRecord:
    """One record, as kafka-python's ConsumerRecord (timestamps in epoch ms)."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


@dataclass(frozen=True)
class ConsumerGroupMetadata:
    """Where this consumer stands in its group (Kafka's ``groupMetadata()``); generation -1 before a join."""

    group_id: str | None
    generation_id: int
    member_id: str | None
    group_instance_id: str | None


@dataclass(frozen=True)
class OffsetAndTimestamp:
    offset: int
    timestamp: int


def _tp(tp: TopicPartition | tuple[str, int]) -> TopicPartition:
    return tp if isinstance(tp, TopicPartition) else TopicPartition(*tp)


class Consumer:
    """Consumes topics as a member of a group (``subscribe``) or by manual assignment (``assign``)."""

    def __init__(self, bootstrap: str | None = None, *, group_id: str | None = None,
                 group_instance_id: str | None = None, client_id: str = "lakelog-consumer",
                 token: str | None = None, root: str | None = None, storage_options: Mapping[str, str] | None = None,
                 group_remote_assignor: str | None = None, enable_auto_commit: bool = True,
                 auto_commit_interval_ms: int = 5000, auto_offset_reset: str = "latest",
                 session_timeout_ms: int = 45_000, heartbeat_interval_ms: int = 3000,
                 max_poll_interval_ms: int = 300_000, max_poll_records: int = 500,
                 max_partition_fetch_bytes: int = DEFAULT_MAX_PARTITION_FETCH_BYTES,
                 metadata_max_age_ms: int = 5000, isolation_level: str = "read_uncommitted") -> None:
        from lakelog.log import Log

        if isolation_level not in ISOLATION_LEVELS:
            raise InvalidConfig(f"isolation_level must be one of {ISOLATION_LEVELS}, got {isolation_level!r}")

        if auto_offset_reset not in OFFSET_RESETS:
            raise InvalidRequest(f"auto_offset_reset must be one of {OFFSET_RESETS}, got {auto_offset_reset!r}")
        for name, value in (("session_timeout_ms", session_timeout_ms), ("heartbeat_interval_ms", heartbeat_interval_ms),
                            ("max_poll_interval_ms", max_poll_interval_ms), ("max_poll_records", max_poll_records),
                            ("max_partition_fetch_bytes", max_partition_fetch_bytes),
                            ("auto_commit_interval_ms", auto_commit_interval_ms)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidRequest(f"{name} must be a positive integer, got {value!r}")
        if heartbeat_interval_ms >= session_timeout_ms:
            raise InvalidRequest(f"heartbeat_interval_ms ({heartbeat_interval_ms}) must be lower than "
                                 f"session_timeout_ms ({session_timeout_ms})")
        if bootstrap is None and root is None:
            raise InvalidRequest("give bootstrap (the front's URL) or root (a storage root)")
        self.group_id = group_id
        self.isolation_level = isolation_level  # nothing to filter either way: see the module docstring
        self.group_instance_id = group_instance_id
        self.client_id = client_id
        if group_remote_assignor is not None and group_remote_assignor not in SERVER_ASSIGNORS:
            raise InvalidConfig(f"group_remote_assignor must be one of {', '.join(SERVER_ASSIGNORS)}, "
                                f"got {group_remote_assignor!r}")
        self.group_remote_assignor = group_remote_assignor
        self.enable_auto_commit = enable_auto_commit and group_id is not None and bootstrap is not None
        self.auto_offset_reset = auto_offset_reset
        self.max_poll_records = max_poll_records
        self._http = Transport(bootstrap, token=token, timeout=max_poll_interval_ms / 1000 + 30) if bootstrap else None
        if root is None:
            root = self._http.json("GET", "/v1/health")["root"]
        self._log = Log(root, storage_options=storage_options)
        self._fetcher = Fetcher(self._log, max_partition_fetch_bytes=max_partition_fetch_bytes)
        self._subs = SubscriptionState(on_drop=self._fetcher.drop)
        self._coordinator = ConsumerCoordinator(
            GroupSettings(group_id, group_instance_id, client_id, group_remote_assignor, self.enable_auto_commit,
                          auto_commit_interval_ms / 1000, session_timeout_ms, heartbeat_interval_ms / 1000,
                          max_poll_interval_ms, metadata_max_age_ms / 1000),
            self._http, self._subs, self._log.list_topics)
        self._closed = False
        self._rr = 0

    # -- subscription ----------------------------------------------------------------------
    def subscribe(self, topics: Iterable[str] | None = None, pattern: str | None = None, *,
                  on_assign: Callback | None = None, on_revoke: Callback | None = None) -> None:
        """Join the group for ``topics`` or every topic matching ``pattern`` (a regex, re-checked every
        ``metadata_max_age_ms``); the assignment arrives with the next :meth:`poll`."""
        if self.group_id is None or self._http is None:
            raise InvalidRequest("subscribe() needs group_id and bootstrap; use assign() otherwise")
        if (topics is None) == (pattern is None):
            raise InvalidRequest("give exactly one of topics and pattern")
        if isinstance(topics, str):
            topics = [topics]
        if topics is not None and not list(topics):
            raise InvalidRequest("subscribe() needs at least one topic; call unsubscribe() to stop consuming")
        subs = self._subs
        if subs.manual:
            raise InvalidRequest("subscribe() after assign() is not allowed; call unsubscribe() first")
        subs.pattern = re.compile(pattern) if pattern is not None else None
        subs.topics = tuple(sorted(set(topics))) if topics is not None else self._coordinator.match_pattern()
        subs.on_assign, subs.on_revoke = on_assign, on_revoke
        self._coordinator.subscription_changed()

    def subscription(self) -> set[str]:
        return set(self._subs.topics)

    def assign(self, partitions: Iterable[TopicPartition | tuple[str, int]]) -> None:
        """Manual assignment: no group membership, no rebalances (commits are simple commits)."""
        if self._subs.topics or self._subs.pattern is not None:
            raise InvalidRequest("assign() after subscribe() is not allowed; call unsubscribe() first")
        self._subs.assign({_tp(tp) for tp in partitions})
        self._fetcher.retain(self._subs.assignment)

    def unsubscribe(self) -> None:
        """Give up the subscription (committing first with auto-commit) or the manual assignment."""
        if self._coordinator.member_id is not None:
            self._coordinator.revoke(sorted(self._subs.assignment))
            self._coordinator.leave()
        self._subs.clear()
        self._coordinator.needs_join.clear()
        self._coordinator.drop(set(self._subs.assignment))

    def assignment(self) -> set[TopicPartition]:
        """The (topic, partition) pairs currently assigned to this consumer."""
        return set(self._subs.assignment)

    def group_metadata(self) -> ConsumerGroupMetadata:
        """The group, generation and member id the current assignment belongs to."""
        return ConsumerGroupMetadata(self.group_id, self._coordinator.epoch, self._coordinator.member_id,
                                     self.group_instance_id)

    # -- positions ---------------------------------------------------------------------------------
    def _check_assigned(self, tp: TopicPartition) -> TopicPartition:
        tp = _tp(tp)
        if tp not in self._subs.assignment:
            raise InvalidRequest(f"{tp} is not assigned to this consumer")
        return tp

    def _resets(self, tps: Iterable[TopicPartition], strategy: str | None = None) -> dict[TopicPartition, int]:
        """Reset offsets by ``strategy`` (default ``auto_offset_reset``), one offset lookup per topic."""
        tps = list(tps)
        strategy = strategy or self.auto_offset_reset
        if strategy == "none" and tps:
            raise OffsetOutOfRange(f"no valid position for {tps[0]} in group {self.group_id} and "
                                   f"auto_offset_reset is 'none'")
        by_topic = {t: self._log.list_offsets(t, strategy) for t in {tp.topic for tp in tps}}
        return {tp: by_topic[tp.topic][tp.partition] for tp in tps}

    def _initial_positions(self) -> None:
        positions = self._subs.positions
        missing = [tp for tp in self._subs.assignment if tp not in positions]
        if not missing:
            return
        committed = (self._coordinator.fetch_committed({tp.topic for tp in missing})
                     if self.group_id and self._http else {})
        resets = self._resets(tp for tp in sorted(missing) if committed.get(tp) is None)
        for tp in missing:
            off = committed.get(tp)
            positions[tp] = off.offset if off is not None else resets[tp]

    def position(self, tp: TopicPartition) -> int:
        """The offset of the next record this consumer will return for ``tp``."""
        tp = self._check_assigned(tp)
        self._initial_positions()
        return self._subs.positions[tp]

    def seek(self, tp: TopicPartition, offset: int) -> None:
        """The next poll returns ``tp``'s records from ``offset`` on."""
        tp = self._check_assigned(tp)
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise InvalidRequest(f"offset must be an integer >= 0, got {offset!r}")
        self._subs.positions[tp] = offset
        self._fetcher.drop(tp)

    def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        """Seek to the log start offset (every assigned partition if none is given)."""
        self._seek_by(partitions, "earliest")

    def _seek_by(self, partitions, strategy: str) -> None:
        tps = [self._check_assigned(tp) for tp in partitions or sorted(self._subs.assignment)]
        for tp, offset in self._resets(tps, strategy).items():
            self._subs.positions[tp] = offset
            self._fetcher.drop(tp)

    def seek_to_end(self, *partitions: TopicPartition) -> None:
        """Seek to the high watermark (every assigned partition if none is given)."""
        self._seek_by(partitions, "latest")

    def pause(self, *partitions: TopicPartition) -> None:
        """Stop returning records of these partitions (their buffers and positions are kept)."""
        self._subs.paused |= {self._check_assigned(tp) for tp in partitions}

    def resume(self, *partitions: TopicPartition) -> None:
        self._subs.paused -= {_tp(tp) for tp in partitions}

    def paused(self) -> set[TopicPartition]:
        return set(self._subs.paused)

    def beginning_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return self._resets(map(_tp, partitions), "earliest")

    def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """High watermarks: the offset the next record of each partition will get."""
        return self._resets(map(_tp, partitions), "latest")

    def offsets_for_times(self, timestamps: Mapping[TopicPartition, int]) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """First offset whose timestamp >= the given epoch ms, per partition (None if there is none)."""
        out: dict[TopicPartition, OffsetAndTimestamp | None] = {}
        for tp, ts in timestamps.items():
            tp = _tp(tp)
            if isinstance(ts, bool) or not isinstance(ts, int) or ts < 0:
                raise InvalidRequest(f"timestamp for {tp} must be epoch milliseconds >= 0, got {ts!r}")
            off = self._log.offsets_for_times(tp.topic, {tp.partition: ts})[tp.partition]
            if off is None:
                out[tp] = None
            else:
                rec = self._log.fetch(tp.topic, tp.partition, off, max_records=1).records
                stamp = rec.column("timestamp").cast(pa.int64())[0].as_py() // 1000
                out[tp] = OffsetAndTimestamp(off, stamp)
        return out

    # -- polling ----------------------------------------------------------------------------------
    def poll_arrow(self, timeout_ms: int = 0, max_records: int | None = None) -> dict[TopicPartition, pa.Table]:
        """Like :meth:`poll`, but each partition's records as one Arrow table (``FILE_SCHEMA``; the fast path)."""
        if self._closed:
            raise InvalidRequest("the consumer is closed")
        if not self._subs.subscribed:
            raise InvalidRequest("the consumer is not subscribed to any topics or assigned any partitions")
        deadline = time.monotonic() + timeout_ms / 1000
        limit = max_records or self.max_poll_records
        while True:
            try:
                self._coordinator.ensure_membership()
                self._coordinator.maybe_auto_commit()
                self._initial_positions()
            except KafkaError as e:
                if not e.retriable:
                    raise
                # e.g. the front restarts: keep serving the partitions that have a position, retry the rest
                log.debug("group %s: %s; retrying", self.group_id, e)
            out = self._fetch_round(limit)
            if out or time.monotonic() >= deadline:
                return out
            time.sleep(min(_POLL_INTERVAL_S, max(0.0, deadline - time.monotonic())))

    def _fetch_round(self, limit: int) -> dict[TopicPartition, pa.Table]:
        subs = self._subs
        active = sorted(tp for tp in subs.assignment if tp not in subs.paused and tp in subs.positions)
        if not active:
            return {}
        self._rr = (self._rr + 1) % len(active)
        order = active[self._rr:] + active[:self._rr]  # rotate so no partition starves
        out: dict[TopicPartition, pa.Table] = {}
        budget = limit
        for tp in order:
            if budget <= 0:
                break
            try:
                records, subs.positions[tp] = self._fetcher.take(tp, subs.positions[tp], budget)
            except OffsetOutOfRange:
                subs.positions[tp] = self._resets([tp])[tp]  # e.g. retention removed our position ('none' raises)
                continue
            if records is not None and records.num_rows:
                out[tp] = records
                budget -= records.num_rows
        return out

    def poll(self, timeout_ms: int = 0, max_records: int | None = None) -> dict[TopicPartition, list[ConsumerRecord]]:
        """Records from assigned, unpaused partitions, at most ``max_records`` (default ``max_poll_records``).

        Waits up to ``timeout_ms`` for records; joins, rejoins and heartbeats are handled here.
        """
        tables = self.poll_arrow(timeout_ms, max_records)
        out = {}
        for tp, t in tables.items():
            ts = t.column("timestamp").cast(pa.int64()).to_pylist()
            cols = t.select(["offset", "timestampType", "key", "value", "headers"]).to_pydict()
            out[tp] = [
                ConsumerRecord(tp.topic, tp.partition, o, s // 1000, tt, k, v,
                               [(h["key"], h["value"]) for h in hs] if hs else [])
                for o, s, tt, k, v, hs in zip(cols["offset"], ts, cols["timestampType"], cols["key"],
                                              cols["value"], cols["headers"])
            ]
        return out

    # -- offsets --------------------------------------------------------------------------------------
    def committed(self, tp: TopicPartition) -> int | None:
        """The group's committed offset for ``tp`` (None if there is none)."""
        if self.group_id is None or self._http is None:
            raise InvalidRequest("committed() needs group_id and bootstrap")
        tp = _tp(tp)
        got = self._coordinator.fetch_committed({tp.topic}).get(tp)
        return got.offset if got else None

    def commit(self, offsets: Mapping[TopicPartition, int | OffsetAndMetadata] | None = None) -> None:
        """commitSync: the given offsets, or the positions of every assigned partition.

        Raises ``ILLEGAL_GENERATION`` / ``UNKNOWN_MEMBER_ID`` when a rebalance took the
        partitions away (the next owner resumes from the last successful commit).
        """
        offsets = ({_tp(tp): o for tp, o in offsets.items()} if offsets is not None
                   else self._subs.assigned_positions())
        if offsets:
            self._coordinator.commit(offsets)

    def commit_async(self, offsets: Mapping[TopicPartition, int | OffsetAndMetadata] | None = None,
                     callback: Callable[[Mapping, KafkaError | None], None] | None = None) -> Future:
        """commitAsync: returns a future; ``callback(offsets, error)`` runs when it completes."""
        snapshot = ({_tp(tp): o for tp, o in offsets.items()} if offsets is not None
                    else self._subs.assigned_positions())
        fut: Future = Future()

        def run() -> None:
            err = None
            try:
                if snapshot:
                    self._coordinator.commit(snapshot)
            except KafkaError as e:
                err = e
            if callback is not None:
                callback(snapshot, err)
            fut.set_exception(err) if err is not None else fut.set_result(snapshot)

        threading.Thread(target=run, daemon=True, name=f"lakelog-commit-{self.client_id}").start()
        return fut

    def close(self, autocommit: bool = True) -> None:
        """Commit (if auto-commit is on), revoke the assignment (``on_revoke``), leave the group (a static member
        only for now) and release resources."""
        if self._closed:
            return
        self._closed = True
        coordinator, assigned = self._coordinator, self._subs.assignment
        try:
            if coordinator.member_id is not None and assigned and not coordinator.lost:
                coordinator.revoke(sorted(assigned), commit=autocommit)  # as Kafka's close: commit, revoke
            elif autocommit and self.enable_auto_commit and assigned and not coordinator.lost:
                try:
                    self.commit()
                except KafkaError as e:
                    log.warning("final auto-commit for group %s failed: %s", self.group_id, e)
        finally:
            self._coordinator.leave()
            if self._http is not None:
                self._http.close()

    def __enter__(self) -> "Consumer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
