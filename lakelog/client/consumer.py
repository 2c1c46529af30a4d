"""A Kafka-shaped consumer: group membership over HTTP, records straight from storage.

    consumer = Consumer("http://127.0.0.1:8080", group_id="billing")
    consumer.subscribe(["orders"])
    while True:
        for tp, records in consumer.poll(timeout_ms=1000).items():
            ...
        consumer.commit()                     # or enable_auto_commit (the default)

Only membership (join, heartbeat, leave) and offsets (commit, fetch) go
through the front; records are read directly from the object store through
the topic's Arrow index (:class:`lakelog.Log`), so data never flows through
the front.  The storage root is the front's (``GET /v1/health``) unless
``root=`` is given; credentials come from the standard AWS environment or
``storage_options``.

Keyword arguments use kafka-python's spelling.  Delivery is at-least-once by
default: with ``enable_auto_commit`` the positions of records returned by
earlier polls are committed every ``auto_commit_interval_ms``, before a
rebalance revokes partitions, and on :meth:`close`.

Rebalances: a background thread heartbeats every ``heartbeat_interval_ms``;
when the coordinator answers ``REBALANCE_IN_PROGRESS`` the next :meth:`poll`
rejoins.  Eager strategies revoke every partition first (``on_revoke`` with
all of them, after the auto-commit); ``cooperative-sticky`` revokes only the
partitions that move.  Callbacks run in the thread calling :meth:`poll`.

Not thread-safe, like Kafka's consumer: use one consumer per thread (the
heartbeat thread is internal).
"""

from __future__ import annotations

import re
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping, Sequence

import pyarrow as pa

from lakelog.assignors import ASSIGNORS, TopicPartition
from lakelog.client.transport import Transport
from lakelog.errors import (FencedInstanceId, IllegalGeneration, InvalidRequest, KafkaError, OffsetOutOfRange,
                            RebalanceInProgress, UnknownMemberId)

OFFSET_RESETS = ("earliest", "latest", "none")
METADATA_MAX_AGE_S = 5.0


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
class OffsetAndMetadata:
    offset: int
    metadata: str = ""


@dataclass(frozen=True)
class OffsetAndTimestamp:
    offset: int
    timestamp: int


def _strategies(value: str | Sequence[str]) -> tuple[str, ...]:
    names = (value,) if isinstance(value, str) else tuple(value)
    bad = [n for n in names if n not in ASSIGNORS]
    if not names or bad:
        raise InvalidRequest(f"partition_assignment_strategy {bad or names!r} is not one of {', '.join(ASSIGNORS)}")
    return names


class Consumer:
    """Consumes topics as a member of a group (``subscribe``) or by manual assignment (``assign``)."""

    def __init__(self, bootstrap: str | None = None, *, group_id: str | None = None,
                 group_instance_id: str | None = None, client_id: str = "lakelog-consumer",
                 token: str | None = None, root: str | None = None, storage_options: Mapping[str, str] | None = None,
                 partition_assignment_strategy: str | Sequence[str] = "range", enable_auto_commit: bool = True,
                 auto_commit_interval_ms: int = 5000, auto_offset_reset: str = "latest",
                 session_timeout_ms: int = 45_000, heartbeat_interval_ms: int = 3000,
                 max_poll_interval_ms: int = 300_000, max_poll_records: int = 500,
                 fetch_max_bytes: int = 52_428_800) -> None:
        from lakelog.log import Log

        if auto_offset_reset not in OFFSET_RESETS:
            raise InvalidRequest(f"auto_offset_reset must be one of {OFFSET_RESETS}, got {auto_offset_reset!r}")
        if group_id is None and bootstrap is None and root is None:
            raise InvalidRequest("give bootstrap (the front's URL) or root (a storage root)")
        self.group_id = group_id
        self.group_instance_id = group_instance_id
        self.client_id = client_id
        self.strategies = _strategies(partition_assignment_strategy)
        self.cooperative = self.strategies[0] == "cooperative-sticky"
        self.enable_auto_commit = enable_auto_commit and group_id is not None
        self.auto_commit_interval_s = auto_commit_interval_ms / 1000
        self.auto_offset_reset = auto_offset_reset
        self.session_timeout_ms = session_timeout_ms
        self.heartbeat_interval_s = heartbeat_interval_ms / 1000
        self.rebalance_timeout_ms = max_poll_interval_ms
        self.max_poll_records = max_poll_records
        self.fetch_max_bytes = fetch_max_bytes
        self._http = Transport(bootstrap, token=token, timeout=max_poll_interval_ms / 1000 + 30) if bootstrap else None
        if root is None:
            if self._http is None:
                raise InvalidRequest("root is required without a bootstrap front")
            root = self._http.json("GET", "/v1/health")["root"]
        self._log = Log(root, storage_options=storage_options)
        self._topics: tuple[str, ...] = ()
        self._pattern: re.Pattern | None = None
        self._pattern_checked = 0.0
        self._on_assign: Callable[[list[TopicPartition]], None] | None = None
        self._on_revoke: Callable[[list[TopicPartition]], None] | None = None
        self._manual = False
        self._assignment: set[TopicPartition] = set()
        self._positions: dict[TopicPartition, int] = {}
        self._paused: set[TopicPartition] = set()
        self._member_id: str | None = None
        self._generation = -1
        self._needs_join = threading.Event()
        self._fatal: KafkaError | None = None
        self._hb_stop = threading.Event()
        self._hb_thread: threading.Thread | None = None
        self._last_commit = time.monotonic()
        self._closed = False
        self._rr = 0

    # -- subscription ----------------------------------------------------------------------
    def subscribe(self, topics: Iterable[str] | None = None, pattern: str | None = None, *,
                  on_assign: Callable[[list[TopicPartition]], None] | None = None,
                  on_revoke: Callable[[list[TopicPartition]], None] | None = None) -> None:
        """Join the group for ``topics`` or every topic matching ``pattern`` (a regex)."""
        if self.group_id is None or self._http is None:
            raise InvalidRequest("subscribe() needs group_id and bootstrap; use assign() otherwise")
        if (topics is None) == (pattern is None):
            raise InvalidRequest("give exactly one of topics and pattern")
        if self._manual:
            raise InvalidRequest("subscribe() after assign() is not allowed; call unsubscribe() first")
        self._pattern = re.compile(pattern) if pattern is not None else None
        self._topics = tuple(sorted(set(topics))) if topics is not None else self._match_pattern()
        self._on_assign, self._on_revoke = on_assign, on_revoke
        self._needs_join.set()

    def _match_pattern(self) -> tuple[str, ...]:
        self._pattern_checked = time.monotonic()
        return tuple(t for t in self._log.list_topics() if self._pattern and self._pattern.fullmatch(t))

    def subscription(self) -> set[str]:
        return set(self._topics)

    def assign(self, partitions: Iterable[TopicPartition | tuple[str, int]]) -> None:
        """Manual assignment: no group membership, no rebalances."""
        if self._topics:
            raise InvalidRequest("assign() after subscribe() is not allowed; call unsubscribe() first")
        self._manual = True
        self._assignment = {TopicPartition(*tp) if isinstance(tp, tuple) else tp for tp in partitions}
        self._positions = {tp: o for tp, o in self._positions.items() if tp in self._assignment}

    def unsubscribe(self) -> None:
        if self._member_id is not None:
            self._revoke(sorted(self._assignment))
            self._leave()
        self._topics, self._pattern, self._manual = (), None, False
        self._assignment.clear()
        self._positions.clear()

    def assignment(self) -> set[TopicPartition]:
        """The (topic, partition) pairs currently assigned to this consumer."""
        return set(self._assignment)

    # -- membership ---------------------------------------------------------------------------
    def _ensure_membership(self) -> None:
        if self._fatal is not None:
            raise self._fatal
        if self._manual or not self._topics and self._pattern is None:
            return
        if self._pattern is not None and time.monotonic() - self._pattern_checked > METADATA_MAX_AGE_S:
            topics = self._match_pattern()
            if topics != self._topics:
                self._topics = topics
                self._needs_join.set()
        if self._needs_join.is_set() and self._topics:
            self._rejoin()

    def _rejoin(self) -> None:
        old = set(self._assignment)
        if not self.cooperative and old:
            self._revoke(sorted(old))  # eager: give everything back before rejoining
            old = set()
        self._needs_join.clear()
        body = {"topics": list(self._topics), "protocols": list(self.strategies), "client_id": self.client_id,
                "session_timeout_ms": self.session_timeout_ms, "rebalance_timeout_ms": self.rebalance_timeout_ms,
                "member_id": self._member_id, "group_instance_id": self.group_instance_id}
        try:
            joined = self._http.json("POST", f"/v1/groups/{self.group_id}/members", json=body)
        except UnknownMemberId:
            self._member_id = None
            self._needs_join.set()
            return
        except RebalanceInProgress:
            self._needs_join.set()
            return
        self._member_id, self._generation = joined["member_id"], joined["generation"]
        new = {TopicPartition(a["topic"], a["partition"]) for a in joined["assignment"]}
        lost, added = sorted(old - new), sorted(new - old)
        if lost:
            self._revoke(lost)
        self._assignment = new
        self._paused &= new
        if added and self._on_assign is not None:
            self._on_assign(added)
        self._start_heartbeat()

    def _revoke(self, partitions: list[TopicPartition]) -> None:
        if self.enable_auto_commit:
            mine = {tp: o for tp, o in self._positions.items() if tp in set(partitions)}
            if mine:
                try:
                    self._commit(mine)
                except (IllegalGeneration, UnknownMemberId, RebalanceInProgress):
                    pass  # the generation moved on; whoever owns these next resumes from the last commit
        if self._on_revoke is not None:
            self._on_revoke(partitions)
        for tp in partitions:
            self._assignment.discard(tp)
            self._positions.pop(tp, None)

    def _start_heartbeat(self) -> None:
        if self._hb_thread is None:
            self._hb_thread = threading.Thread(target=self._heartbeat_loop, daemon=True,
                                               name=f"lakelog-heartbeat-{self.client_id}")
            self._hb_thread.start()

    def _heartbeat_loop(self) -> None:
        while not self._hb_stop.wait(self.heartbeat_interval_s):
            member, generation = self._member_id, self._generation
            if member is None or self._needs_join.is_set():
                continue
            try:
                self._http.request("POST", f"/v1/groups/{self.group_id}/members/{member}/heartbeat",
                                   json={"generation": generation, "group_instance_id": self.group_instance_id},
                                   timeout=max(self.heartbeat_interval_s * 3, 5))
            except (RebalanceInProgress, IllegalGeneration):
                self._needs_join.set()
            except UnknownMemberId:
                if self._member_id == member:
                    self._member_id = None
                self._needs_join.set()
            except FencedInstanceId as e:
                self._fatal = e
                return
            except KafkaError:
                continue  # the front may be restarting: keep trying within the session timeout

    def _leave(self) -> None:
        self._hb_stop.set()
        if self._member_id is not None and self._http is not None:
            try:
                self._http.request("DELETE", f"/v1/groups/{self.group_id}/members/{self._member_id}")
            except KafkaError:
                pass
        self._member_id = None

    # -- positions ---------------------------------------------------------------------------------
    def _reset(self, tp: TopicPartition, strategy: str | None = None) -> int:
        strategy = strategy or self.auto_offset_reset
        if strategy == "none":
            raise OffsetOutOfRange(f"no committed offset for {tp} in group {self.group_id} and "
                                   f"auto_offset_reset is 'none'")
        return self._log.list_offsets(tp.topic, strategy)[tp.partition]

    def _initial_positions(self) -> None:
        missing = [tp for tp in self._assignment if tp not in self._positions]
        if not missing:
            return
        committed = self._fetch_committed({tp.topic for tp in missing}) if self.group_id else {}
        for tp in missing:
            off = committed.get(tp)
            self._positions[tp] = off.offset if off is not None else self._reset(tp)

    def position(self, tp: TopicPartition) -> int:
        """The offset of the next record this consumer will return for ``tp``."""
        if tp not in self._assignment:
            raise InvalidRequest(f"{tp} is not assigned to this consumer")
        self._initial_positions()
        return self._positions[tp]

    def seek(self, tp: TopicPartition, offset: int) -> None:
        if tp not in self._assignment:
            raise InvalidRequest(f"{tp} is not assigned to this consumer")
        if offset < 0:
            raise InvalidRequest(f"offset must be >= 0, got {offset}")
        self._positions[tp] = offset

    def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        for tp in partitions or sorted(self._assignment):
            self._positions[tp] = self._reset(tp, "earliest")

    def seek_to_end(self, *partitions: TopicPartition) -> None:
        for tp in partitions or sorted(self._assignment):
            self._positions[tp] = self._reset(tp, "latest")

    def pause(self, *partitions: TopicPartition) -> None:
        self._paused |= set(partitions)

    def resume(self, *partitions: TopicPartition) -> None:
        self._paused -= set(partitions)

    def paused(self) -> set[TopicPartition]:
        return set(self._paused)

    def offsets_for_times(self, timestamps: Mapping[TopicPartition, int]) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """First offset whose timestamp >= the given epoch ms, per partition (None if there is none)."""
        out: dict[TopicPartition, OffsetAndTimestamp | None] = {}
        for tp, ts in timestamps.items():
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
        """Like :meth:`poll`, but each partition's records as one Arrow table (the fast path)."""
        deadline = time.monotonic() + timeout_ms / 1000
        limit = max_records or self.max_poll_records
        while True:
            self._ensure_membership()
            self._maybe_auto_commit()
            self._initial_positions()
            out = self._fetch_round(limit)
            if out or time.monotonic() >= deadline:
                return out
            time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))

    def _fetch_round(self, limit: int) -> dict[TopicPartition, pa.Table]:
        active = sorted(tp for tp in self._assignment if tp not in self._paused)
        if not active:
            return {}
        self._rr = (self._rr + 1) % len(active)
        order = active[self._rr:] + active[:self._rr]  # rotate so no partition starves
        out: dict[TopicPartition, pa.Table] = {}
        budget, bytes_left = limit, self.fetch_max_bytes
        for tp in order:
            if budget <= 0 or bytes_left <= 0:
                break
            pos = self._positions[tp]
            try:
                res = self._log.fetch(tp.topic, tp.partition, pos, max_records=budget, max_bytes=bytes_left)
            except OffsetOutOfRange:
                self._positions[tp] = self._reset(tp)  # e.g. retention removed our position
                continue
            if res.records.num_rows:
                out[tp] = res.records
                budget -= res.records.num_rows
                bytes_left -= res.records.nbytes
            self._positions[tp] = res.next_offset
        return out

    def poll(self, timeout_ms: int = 0, max_records: int | None = None) -> dict[TopicPartition, list[ConsumerRecord]]:
        """Records from assigned, unpaused partitions, at most ``max_records`` (default ``max_poll_records``)."""
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
    def _fetch_committed(self, topics: set[str]) -> dict[TopicPartition, OffsetAndMetadata]:
        out = {}
        for topic in sorted(topics):
            rows = self._http.json("GET", f"/v1/groups/{self.group_id}/offsets", params={"topic": topic})
            for r in rows["offsets"]:
                if r.get("offset") is not None and r["offset"] >= 0:
                    out[TopicPartition(r["topic"], r["partition"])] = OffsetAndMetadata(r["offset"],
                                                                                        r.get("metadata") or "")
        return out

    def committed(self, tp: TopicPartition) -> int | None:
        """The group's committed offset for ``tp`` (None if there is none)."""
        if self.group_id is None:
            raise InvalidRequest("committed() needs a group_id")
        got = self._fetch_committed({tp.topic}).get(tp)
        return got.offset if got else None

    def _commit(self, offsets: Mapping[TopicPartition, int | OffsetAndMetadata]) -> None:
        if self.group_id is None or self._http is None:
            raise InvalidRequest("commit needs group_id and bootstrap")
        body = {"offsets": [{"topic": tp.topic, "partition": tp.partition,
                             "offset": o.offset if isinstance(o, OffsetAndMetadata) else int(o),
                             "metadata": o.metadata if isinstance(o, OffsetAndMetadata) else None}
                            for tp, o in sorted(offsets.items())]}
        if self._member_id is not None:
            body.update(member_id=self._member_id, generation_id=self._generation)
        self._http.json("POST", f"/v1/groups/{self.group_id}/offsets", json=body)
        self._last_commit = time.monotonic()

    def commit(self, offsets: Mapping[TopicPartition, int | OffsetAndMetadata] | None = None) -> None:
        """commitSync: the given offsets, or the positions of every assigned partition."""
        offsets = offsets if offsets is not None else {tp: o for tp, o in self._positions.items()
                                                       if tp in self._assignment}
        if offsets:
            self._commit(offsets)

    def commit_async(self, offsets: Mapping[TopicPartition, int | OffsetAndMetadata] | None = None,
                     callback: Callable[[Mapping, KafkaError | None], None] | None = None) -> Future:
        """commitAsync: returns a future; ``callback(offsets, error)`` runs when it completes."""
        snapshot = dict(offsets) if offsets is not None else {tp: o for tp, o in self._positions.items()
                                                              if tp in self._assignment}
        fut: Future = Future()

        def run() -> None:
            try:
                if snapshot:
                    self._commit(snapshot)
                fut.set_result(snapshot)
                err = None
            except KafkaError as e:
                fut.set_exception(e)
                err = e
            if callback is not None:
                callback(snapshot, err)

        threading.Thread(target=run, daemon=True).start()
        return fut

    def _maybe_auto_commit(self) -> None:
        if self.enable_auto_commit and time.monotonic() - self._last_commit >= self.auto_commit_interval_s:
            try:
                self.commit()
            except (IllegalGeneration, UnknownMemberId, RebalanceInProgress):
                self._needs_join.set()

    def close(self, autocommit: bool = True) -> None:
        """Commit (if auto-commit is on), leave the group and release resources."""
        if self._closed:
            return
        self._closed = True
        try:
            if autocommit and self.enable_auto_commit and self._assignment:
                try:
                    self.commit()
                except KafkaError:
                    pass
        finally:
            self._leave()
            if self._hb_thread is not None:
                self._hb_thread.join(timeout=5)
            if self._http is not None:
                self._http.close()

    def __enter__(self) -> "Consumer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
