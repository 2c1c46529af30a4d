"""A Kafka-shaped consumer: group membership over HTTP, records straight from storage.

    consumer = Consumer("http://127.0.0.1:8080", group_id="billing")
    consumer.subscribe(["orders"])
    while True:
        for tp, records in consumer.poll(timeout_ms=1000).items():
            ...
        consumer.commit()                     # or enable_auto_commit (the default)

Only membership (join, heartbeat, leave) and offsets (commit, fetch) go
through the front; records are read directly from the object store through
the topic's Arrow index and a read-ahead :class:`~lakelog.client.fetcher.Fetcher`,
so data never flows through the front.  The storage root is the front's
(``GET /v1/health``) unless ``root=`` is given; credentials come from the
standard AWS environment or ``storage_options``.

Keyword arguments use kafka-python's spelling.  Delivery is at-least-once by
default: with ``enable_auto_commit`` the positions of records returned by
earlier polls are committed every ``auto_commit_interval_ms``, before a
rebalance takes partitions away, and on :meth:`close`.

Rebalances: a background thread heartbeats every ``heartbeat_interval_ms``
(also while a rebalance waits for this member, so its session stays alive);
when the coordinator answers ``REBALANCE_IN_PROGRESS`` the next :meth:`poll`
rejoins.  Eager strategies revoke every partition first (``on_revoke`` with
all of them, after the auto-commit); ``cooperative-sticky`` commits, rejoins
and then revokes only the partitions that moved, and rejoins at once when the
coordinator hands the moved partitions over in a follow-up round.  A member
the coordinator no longer knows (``UNKNOWN_MEMBER_ID``, ``ILLEGAL_GENERATION``:
its session expired) loses its partitions without committing (``on_revoke``,
as Kafka's default ``onPartitionsLost``) and joins again.  A front that is
unreachable (restarting) is retried: :meth:`poll` keeps serving the current
assignment and rejoins once the front answers.  Callbacks run in the thread
calling :meth:`poll`.

Isolation: ``isolation_level`` is ``"read_uncommitted"`` (the default, as
kafka-python) or ``"read_committed"``; both read the same records, because
lakelog never stores uncommitted data: a transaction's records reach their
topic tables only at its commit (an aborted one's never do), so every stored
record is committed and the last stable offset is the high watermark.

Static members (``group_instance_id``) do not leave the group on
:meth:`close` (KIP-345): a restart within ``session_timeout_ms`` gets the same
partitions back without a rebalance.

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
from typing import Callable, Iterable, Mapping, Sequence
from urllib.parse import quote

import pyarrow as pa

from lakelog.group.assignors import ASSIGNORS, TopicPartition
from lakelog.client.fetcher import DEFAULT_MAX_PARTITION_FETCH_BYTES, Fetcher
from lakelog.client.transport import Transport
from lakelog.errors import (FencedInstanceId, IllegalGeneration, InvalidConfig, InvalidRequest, KafkaError,
                            OffsetOutOfRange, RebalanceInProgress, UnknownMemberId)

OFFSET_RESETS = ("earliest", "latest", "none")
ISOLATION_LEVELS = ("read_uncommitted", "read_committed")
_REJOINS_PER_POLL = 4  # a cooperative rebalance takes two rounds; a few more absorb races
_POLL_INTERVAL_S = 0.05  # how often an empty poll looks again (and retries an unreachable front)
log = logging.getLogger(__name__)

Callback = Callable[[list[TopicPartition]], None]


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
    """A committed position: the offset of the next record to consume, and free-form metadata."""

    offset: int
    metadata: str = ""


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


def _strategies(value: str | Sequence[str]) -> tuple[str, ...]:
    names = (value,) if isinstance(value, str) else tuple(value)
    bad = [n for n in names if n not in ASSIGNORS]
    if not names or bad:
        raise InvalidRequest(f"partition_assignment_strategy {bad or names!r} is not one of {', '.join(ASSIGNORS)}")
    return names


def _tp(tp: TopicPartition | tuple[str, int]) -> TopicPartition:
    return tp if isinstance(tp, TopicPartition) else TopicPartition(*tp)


class Consumer:
    """Consumes topics as a member of a group (``subscribe``) or by manual assignment (``assign``)."""

    def __init__(self, bootstrap: str | None = None, *, group_id: str | None = None,
                 group_instance_id: str | None = None, client_id: str = "lakelog-consumer",
                 token: str | None = None, root: str | None = None, storage_options: Mapping[str, str] | None = None,
                 partition_assignment_strategy: str | Sequence[str] = "range", enable_auto_commit: bool = True,
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
        self.strategies = _strategies(partition_assignment_strategy)
        self.cooperative = self.strategies[0] == "cooperative-sticky"
        self.enable_auto_commit = enable_auto_commit and group_id is not None and bootstrap is not None
        self.auto_commit_interval_s = auto_commit_interval_ms / 1000
        self.auto_offset_reset = auto_offset_reset
        self.session_timeout_ms = session_timeout_ms
        self.heartbeat_interval_s = heartbeat_interval_ms / 1000
        self.rebalance_timeout_ms = max_poll_interval_ms
        self.max_poll_records = max_poll_records
        self.metadata_max_age_s = metadata_max_age_ms / 1000
        self._http = Transport(bootstrap, token=token, timeout=max_poll_interval_ms / 1000 + 30) if bootstrap else None
        if root is None:
            root = self._http.json("GET", "/v1/health")["root"]
        self._log = Log(root, storage_options=storage_options)
        self._fetcher = Fetcher(self._log, max_partition_fetch_bytes=max_partition_fetch_bytes)
        self._group_path = f"/v1/groups/{quote(group_id, safe='')}" if group_id else ""
        self._topics: tuple[str, ...] = ()
        self._pattern: re.Pattern | None = None
        self._pattern_checked = 0.0
        self._on_assign: Callback | None = None
        self._on_revoke: Callback | None = None
        self._manual = False
        self._assignment: set[TopicPartition] = set()
        self._positions: dict[TopicPartition, int] = {}
        self._paused: set[TopicPartition] = set()
        # shared with the heartbeat thread (single attribute reads/writes only)
        self._member_id: str | None = None
        self._generation = -1
        self._joining = False
        self._lost = False  # the coordinator no longer knows this member: its partitions are gone
        self._needs_join = threading.Event()
        self._fatal: KafkaError | None = None
        self._hb_stop = threading.Event()
        self._hb_thread: threading.Thread | None = None
        self._last_commit = time.monotonic()
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
        """Manual assignment: no group membership, no rebalances (commits are simple commits)."""
        if self._topics or self._pattern is not None:
            raise InvalidRequest("assign() after subscribe() is not allowed; call unsubscribe() first")
        self._manual = True
        self._assignment = {_tp(tp) for tp in partitions}
        self._positions = {tp: o for tp, o in self._positions.items() if tp in self._assignment}
        self._paused &= self._assignment
        self._fetcher.retain(self._assignment)

    def unsubscribe(self) -> None:
        """Give up the subscription (committing first with auto-commit) or the manual assignment."""
        if self._member_id is not None:
            self._revoke(sorted(self._assignment))
            self._leave()
        self._topics, self._pattern, self._manual = (), None, False
        self._needs_join.clear()
        self._drop(set(self._assignment))

    def assignment(self) -> set[TopicPartition]:
        """The (topic, partition) pairs currently assigned to this consumer."""
        return set(self._assignment)

    def group_metadata(self) -> ConsumerGroupMetadata:
        """The group, generation and member id the current assignment belongs to."""
        return ConsumerGroupMetadata(self.group_id, self._generation, self._member_id, self.group_instance_id)

    # -- membership ---------------------------------------------------------------------------
    def _ensure_membership(self) -> None:
        if self._fatal is not None:
            raise self._fatal
        if self._manual or not self._topics and self._pattern is None:
            return
        if self._lost:
            self._lose_all()
        if self._pattern is not None and time.monotonic() - self._pattern_checked > self.metadata_max_age_s:
            topics = self._match_pattern()
            if topics != self._topics:
                self._topics = topics
                self._needs_join.set()
        for _ in range(_REJOINS_PER_POLL):
            if not (self._needs_join.is_set() and self._topics):
                break
            self._rejoin()

    def _rejoin(self) -> None:
        old = set(self._assignment)
        if not self.cooperative and old:
            self._revoke(sorted(old))  # eager: give everything back before rejoining
            old = set()
        elif old and self.enable_auto_commit:
            self._commit_quietly(old)  # cooperative: still the owner in this generation
        self._needs_join.clear()
        body = {"topics": list(self._topics), "protocols": list(self.strategies), "client_id": self.client_id,
                "session_timeout_ms": self.session_timeout_ms, "rebalance_timeout_ms": self.rebalance_timeout_ms,
                "member_id": self._member_id, "group_instance_id": self.group_instance_id}
        self._joining = True  # until the new generation is recorded: a heartbeat in between would be stale
        try:
            joined = self._http.json("POST", f"{self._group_path}/members", json=body)
            self._member_id, self._generation = joined["member_id"], joined["generation"]
        except UnknownMemberId:
            self._member_id = None
            self._lose_all()
            self._needs_join.set()
            return
        except RebalanceInProgress:
            self._needs_join.set()
            return
        except KafkaError as e:
            if e.retriable:
                self._needs_join.set()
            raise
        finally:
            self._joining = False
        self._lost = False
        new = {TopicPartition(a["topic"], a["partition"]) for a in joined["assignment"]}
        lost, added = sorted(old - new), sorted(new - old)
        if lost:
            self._revoke(lost, commit=False)  # committed above; the new generation no longer lets us
        self._assignment = new
        self._paused &= new
        if added and self._on_assign is not None:
            self._on_assign(added)
        self._start_heartbeat()
        if self.cooperative:
            self._heartbeat_once()  # a follow-up round hands over what moved: join it now, not a heartbeat later

    def _revoke(self, partitions: list[TopicPartition], *, commit: bool = True) -> None:
        if commit and self.enable_auto_commit:
            self._commit_quietly(set(partitions))
        if self._on_revoke is not None and partitions:
            self._on_revoke(partitions)
        self._drop(set(partitions))

    def _lose_all(self) -> None:
        """The coordinator dropped this member: its partitions already belong to others; commit nothing."""
        self._lost = False
        lost = sorted(self._assignment)
        if lost and self._on_revoke is not None:
            self._on_revoke(lost)
        self._drop(set(lost))

    def _drop(self, partitions: set[TopicPartition]) -> None:
        for tp in partitions:
            self._assignment.discard(tp)
            self._positions.pop(tp, None)
            self._paused.discard(tp)
            self._fetcher.drop(tp)

    def _commit_quietly(self, partitions: set[TopicPartition]) -> None:
        mine = {tp: o for tp, o in self._positions.items() if tp in partitions}
        if not mine:
            return
        try:
            self._commit(mine)
        except KafkaError as e:  # the generation moved on or the front is away: the next owner re-reads
            log.warning("offset commit before a rebalance failed for group %s: %s", self.group_id, e)

    def _start_heartbeat(self) -> None:
        if self._hb_thread is None:
            self._hb_stop = threading.Event()
            self._hb_thread = threading.Thread(target=self._heartbeat_loop, args=(self._hb_stop,), daemon=True,
                                               name=f"lakelog-heartbeat-{self.client_id}")
            self._hb_thread.start()

    def _heartbeat_loop(self, stop: threading.Event) -> None:
        while not stop.wait(self.heartbeat_interval_s):
            if self._joining:
                continue  # a pending join pauses the session on the coordinator's side
            self._heartbeat_once()
            if self._fatal is not None:
                return

    def _heartbeat_once(self) -> None:
        member, generation = self._member_id, self._generation
        if member is None:
            return
        try:
            self._http.request("POST", f"{self._group_path}/members/{quote(member, safe='')}/heartbeat",
                               json={"generation": generation, "group_instance_id": self.group_instance_id},
                               timeout=max(self.heartbeat_interval_s * 3, 5))
        except RebalanceInProgress:
            if not self._joining and self._generation == generation:  # not made stale by a join meanwhile
                self._needs_join.set()
        except (IllegalGeneration, UnknownMemberId) as e:
            if not self._joining and self._member_id == member and self._generation == generation:
                if isinstance(e, UnknownMemberId):
                    self._member_id = None  # join again as a new member
                self._lost = True
                self._needs_join.set()
        except FencedInstanceId as e:
            self._fatal = e
        except KafkaError as e:  # the front may be restarting: keep trying within the session timeout
            log.debug("heartbeat of %s in group %s failed: %s", member, self.group_id, e)

    def _leave(self) -> None:
        self._hb_stop.set()
        if self._hb_thread is not None and self._hb_thread is not threading.current_thread():
            self._hb_thread.join(timeout=10)
        self._hb_thread = None
        if self._member_id is not None and self._http is not None and not self.group_instance_id:
            try:
                self._http.request("DELETE", f"{self._group_path}/members/{quote(self._member_id, safe='')}")
            except KafkaError as e:
                log.warning("leaving group %s failed (the session timeout will remove %s): %s",
                            self.group_id, self._member_id, e)
        self._member_id = None

    # -- positions ---------------------------------------------------------------------------------
    def _check_assigned(self, tp: TopicPartition) -> TopicPartition:
        tp = _tp(tp)
        if tp not in self._assignment:
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
        missing = [tp for tp in self._assignment if tp not in self._positions]
        if not missing:
            return
        committed = self._fetch_committed({tp.topic for tp in missing}) if self.group_id and self._http else {}
        resets = self._resets(tp for tp in sorted(missing) if committed.get(tp) is None)
        for tp in missing:
            off = committed.get(tp)
            self._positions[tp] = off.offset if off is not None else resets[tp]

    def position(self, tp: TopicPartition) -> int:
        """The offset of the next record this consumer will return for ``tp``."""
        tp = self._check_assigned(tp)
        self._initial_positions()
        return self._positions[tp]

    def seek(self, tp: TopicPartition, offset: int) -> None:
        """The next poll returns ``tp``'s records from ``offset`` on."""
        tp = self._check_assigned(tp)
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise InvalidRequest(f"offset must be an integer >= 0, got {offset!r}")
        self._positions[tp] = offset
        self._fetcher.drop(tp)

    def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        """Seek to the log start offset (every assigned partition if none is given)."""
        self._seek_by(partitions, "earliest")

    def _seek_by(self, partitions, strategy: str) -> None:
        tps = [self._check_assigned(tp) for tp in partitions or sorted(self._assignment)]
        for tp, offset in self._resets(tps, strategy).items():
            self._positions[tp] = offset
            self._fetcher.drop(tp)

    def seek_to_end(self, *partitions: TopicPartition) -> None:
        """Seek to the high watermark (every assigned partition if none is given)."""
        self._seek_by(partitions, "latest")

    def pause(self, *partitions: TopicPartition) -> None:
        """Stop returning records of these partitions (their buffers and positions are kept)."""
        self._paused |= {self._check_assigned(tp) for tp in partitions}

    def resume(self, *partitions: TopicPartition) -> None:
        self._paused -= {_tp(tp) for tp in partitions}

    def paused(self) -> set[TopicPartition]:
        return set(self._paused)

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
        if not self._manual and not self._topics and self._pattern is None:
            raise InvalidRequest("the consumer is not subscribed to any topics or assigned any partitions")
        deadline = time.monotonic() + timeout_ms / 1000
        limit = max_records or self.max_poll_records
        while True:
            try:
                self._ensure_membership()
                self._maybe_auto_commit()
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
        active = sorted(tp for tp in self._assignment if tp not in self._paused and tp in self._positions)
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
                records, self._positions[tp] = self._fetcher.take(tp, self._positions[tp], budget)
            except OffsetOutOfRange:
                self._positions[tp] = self._resets([tp])[tp]  # e.g. retention removed our position ('none' raises)
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
    def _fetch_committed(self, topics: set[str]) -> dict[TopicPartition, OffsetAndMetadata]:
        out = {}
        for topic in sorted(topics):
            rows = self._http.json("GET", f"{self._group_path}/offsets", params={"topic": topic})
            for r in rows["offsets"]:
                if r.get("offset") is not None and r["offset"] >= 0:
                    out[TopicPartition(r["topic"], r["partition"])] = OffsetAndMetadata(r["offset"],
                                                                                        r.get("metadata") or "")
        return out

    def committed(self, tp: TopicPartition) -> int | None:
        """The group's committed offset for ``tp`` (None if there is none)."""
        if self.group_id is None or self._http is None:
            raise InvalidRequest("committed() needs group_id and bootstrap")
        tp = _tp(tp)
        got = self._fetch_committed({tp.topic}).get(tp)
        return got.offset if got else None

    def _commit(self, offsets: Mapping[TopicPartition, int | OffsetAndMetadata]) -> None:
        if self.group_id is None or self._http is None:
            raise InvalidRequest("commit needs group_id and bootstrap")
        entries = []
        for tp, o in sorted(offsets.items()):
            offset = o.offset if isinstance(o, OffsetAndMetadata) else o
            if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
                raise InvalidRequest(f"offset to commit for {tp} must be an integer >= 0, got {offset!r}")
            entries.append({"topic": tp.topic, "partition": tp.partition, "offset": offset,
                            "metadata": o.metadata if isinstance(o, OffsetAndMetadata) else None})
        body: dict = {"offsets": entries}
        if self._member_id is not None:
            body.update(member_id=self._member_id, generation_id=self._generation)
            if self.group_instance_id:
                body["group_instance_id"] = self.group_instance_id
        self._http.json("POST", f"{self._group_path}/offsets", json=body)
        self._last_commit = time.monotonic()

    def commit(self, offsets: Mapping[TopicPartition, int | OffsetAndMetadata] | None = None) -> None:
        """commitSync: the given offsets, or the positions of every assigned partition.

        Raises ``ILLEGAL_GENERATION`` / ``UNKNOWN_MEMBER_ID`` when a rebalance took the
        partitions away (the next owner resumes from the last successful commit).
        """
        offsets = ({_tp(tp): o for tp, o in offsets.items()} if offsets is not None
                   else {tp: o for tp, o in self._positions.items() if tp in self._assignment})
        if offsets:
            self._commit(offsets)

    def commit_async(self, offsets: Mapping[TopicPartition, int | OffsetAndMetadata] | None = None,
                     callback: Callable[[Mapping, KafkaError | None], None] | None = None) -> Future:
        """commitAsync: returns a future; ``callback(offsets, error)`` runs when it completes."""
        snapshot = ({_tp(tp): o for tp, o in offsets.items()} if offsets is not None
                    else {tp: o for tp, o in self._positions.items() if tp in self._assignment})
        fut: Future = Future()

        def run() -> None:
            err = None
            try:
                if snapshot:
                    self._commit(snapshot)
            except KafkaError as e:
                err = e
            if callback is not None:
                callback(snapshot, err)
            fut.set_exception(err) if err is not None else fut.set_result(snapshot)

        threading.Thread(target=run, daemon=True, name=f"lakelog-commit-{self.client_id}").start()
        return fut

    def _maybe_auto_commit(self) -> None:
        if self.enable_auto_commit and time.monotonic() - self._last_commit >= self.auto_commit_interval_s:
            self._last_commit = time.monotonic()
            try:
                self.commit()
            except (IllegalGeneration, UnknownMemberId, RebalanceInProgress) as e:
                log.info("auto-commit for group %s refused (%s); rejoining", self.group_id, e)
                self._needs_join.set()
            except KafkaError as e:
                log.warning("auto-commit for group %s failed: %s", self.group_id, e)

    def close(self, autocommit: bool = True) -> None:
        """Commit (if auto-commit is on), leave the group (dynamic members) and release resources."""
        if self._closed:
            return
        self._closed = True
        try:
            if autocommit and self.enable_auto_commit and self._assignment and not self._lost:
                try:
                    self.commit()
                except KafkaError as e:
                    log.warning("final auto-commit for group %s failed: %s", self.group_id, e)
        finally:
            self._leave()
            if self._http is not None:
                self._http.close()

    def __enter__(self) -> "Consumer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
