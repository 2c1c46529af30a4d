"""The fenced append: validate, assign offsets, write segments, commit once.

One :class:`Committer` appends to one topic.  A commit covers every partition
with pending data and carries, per partition, the Delta ``txn`` app id
``lakelog.leo.<P>`` set to the partition's new log end offset.  delta-rs
refuses a commit whose app id was also committed by someone else since our
snapshot, so two writers (threads, processes, machines) can never assign the
same offsets: the loser deletes its files, refreshes, re-validates and retries,
or gives up with a retriable error.

Producer state rides in the same commit (``lakelog.producerBatches`` in the
commit metadata), and every commit carries a unique ``lakelog.commitId`` so a
commit whose outcome is unknown (the store failed after the write) is
recognised on refresh and never applied twice.  If it is not found, the
append fails with a retriable error and keeps its files: the PUT may still land.

The commit file is written directly (:meth:`Committer._commit_direct`), put-if-absent on a local root
or S3, with the actions and conflict rule delta-rs would use, and applied to our snapshot from what we
wrote; delta-rs commits only for a table whose protocol asks more of a writer.

When several fronts share the root, one of them -- the holder of partition 0's lease -- makes a topic's commits:
the others upload their segments and hand it the rest (:mod:`lakelog.writer.commit_handoff`), so the fronts do
not race for every version of the one table.

On an object store the accumulator pipelines group commits (:meth:`Committer.stage`): each group's offsets
are planned on top of the groups staged before it and its segments upload at once, while earlier groups'
uploads and commit PUTs are in flight. Commits stay strictly ordered -- a group's PUT starts only once the
one before it has landed -- and a group planned on a commit that did not land is appended again from
scratch, so no acknowledgement depends on a commit that failed.

Not thread-safe: callers hold the topic's lock (the one :class:`~lakelog.log.Log` passes in), and so do the
callbacks that move the pipeline on when an upload or a PUT finishes.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import re
import shutil
import tempfile
import threading
import time
import uuid
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakelog.errors import (InvalidProducerEpoch, KafkaError, KafkaStorageError, NotLeaderOrFollower,
                            OutOfOrderSequenceNumber, ProducerFenced, RequestTimedOut, UnknownTopicId,
                            UnknownTopicOrPartition, is_storage_failure, storage_error)
from lakelog.storage.delta_checkpoint import write_checkpoint
from lakelog.storage.delta_commit import CommitConflict, put_if_absent
from lakelog.storage.delta_log import (Commit, LogTailGone, commit_path, encode_actions, parse_commit, read_commit,
                                       read_tail, retry_listing_gaps)
from lakelog.storage.partition_lease import lease_app, unpack
from lakelog.storage.producer_ids import ProducerRegistry
from lakelog.storage.producer_state import AppendInfo, BatchMetadata, last_sequence
from lakelog.storage.record_schema import CREATE_TIME, FILE_SCHEMA, LOG_APPEND_TIME, PARTITION_COLUMN, TABLE_SCHEMA
from lakelog.storage.storage_root import StorageRoot
from lakelog.storage.topic_snapshot import (COMMIT_ID_KEY, HANDED_COMMIT_IDS_KEY, OPERATION_KEY, PRODUCER_BATCHES_KEY,
                                            TopicSnapshot, advance, leo_app, load_snapshot, store_index)
from lakelog.writer.commit_handoff import (AddAction as HandedAdd, Handoff, HandoffAnswer, HandoffRejected, carries,
                                          encode)
from lakelog.writer.records import INPUT_SCHEMA, normalize_records, validate_records
from lakelog.writer.segment_writer import delete_quietly, write_segment

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 20
# Errors that a snapshot older than another commit can cause (producer state, a lease taken since): look again once.
_STATE_ERRORS = (OutOfOrderSequenceNumber, InvalidProducerEpoch, ProducerFenced, NotLeaderOrFollower)
PERSIST_EVERY = 64
# On local roots a commit is written directly (put_if_absent): delta-rs's commit re-derives the
# table snapshot after every commit and our refresh derives it again -- two log replays that grow
# with live files and commits since the checkpoint (see BENCHMARKS.md).  False: always delta-rs.
DIRECT_COMMITS = True
MAX_COMMIT_RETRIES = 50  # commits by others that do not conflict with ours (as delta-rs's max_commit_retries)
MAX_HELD_BODIES = 4096  # commit bodies kept for the next checkpoint on an object store (a few KB each)
# Of our commits' bodies, the latest this many stay after a checkpoint took them: they answer handoffs with the
# commits since their sender's snapshot (the sender reads older ones from the store). As many of our commits
# that carried handoffs are remembered with the app ids those set.
RECENT_BODIES = 256
RETRY = "retry"  # _after_conflict: the same commit at the next version
DEFAULT_CHECKPOINT_INTERVAL = 100  # Delta's delta.checkpointInterval default
# On object stores: a checkpoint at most this often per topic. delta-rs reads the log tail since the last checkpoint
# twice (to bring its handle up to date, then again to write): about a second of GETs under S3 Standard latency,
# which with a commit per PUT round trip under load would otherwise recur every few seconds.
CHECKPOINT_MIN_INTERVAL_S = 10.0
# On object stores: expired-log cleanup (Delta's delta.logRetentionDuration, 30 days by default) at most this often
# per writer, not after every checkpoint: it loads the table afresh and lists its log, a burst of requests that
# tripled the p99 of produce at half rate (docs/storage.md), to find files that expire by the day.
LOG_CLEANUP_MIN_INTERVAL_S = 3600.0
ENGINE = "lakelog-direct-commit"
UPLOAD_THREADS = 16  # segment uploads in flight at once, over all topics (object stores only)
COMMIT_THREADS = 8  # pipelined commit PUTs in flight at once, over all topics (at most one per topic)
# Handoffs of one topic's groups in flight at once to its committer front (several fronts): the committer front
# takes them in order, each into its next commit, and each states the log ends it was planned on, so one waiting
# for the answer to the one before it only added latency -- about a commit PUT's, measured (BENCHMARKS.md).
MAX_HANDOFFS_IN_FLIGHT = 4
BACKGROUND_NICE = 10  # checkpoints and index storage run at this niceness (Linux: per thread)
_ANSI = re.compile(r"\x1b\[[0-9;]*m|\u21b3")


def _lower_thread_priority() -> None:
    """Nice the calling thread (Linux schedules threads individually); elsewhere a no-op."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), BACKGROUND_NICE)
    except (AttributeError, OSError):
        pass


def _describe(e: Exception) -> str:
    """delta-rs's error text on one line, without its terminal colours and arrows."""
    return " ".join(_ANSI.sub(" ", str(e)).split())


def storage_failure(context: str, e: Exception) -> KafkaStorageError:
    """The retriable error a client is told of ``e`` (``<context>: the storage failed: <reason>``): the failure's
    kind only (:func:`lakelog.errors.storage_error`), as its text names files or the store's URLs and keys. The
    text goes to the server's log (with the trace, for anything but a failing store)."""
    if is_storage_failure(e):
        log.warning("%s: %s", context, _describe(e))
    else:
        log.error("%s", context, exc_info=e)
    return KafkaStorageError(f"{context}: {storage_error(e).message}")


@dataclass
class PartitionBatch:
    """Records for one partition, optionally from an idempotent producer."""

    partition: int
    records: pa.Table  # lakelog.writer.records.INPUT_SCHEMA (other accepted input is normalised on creation)
    producer_id: int = -1
    producer_epoch: int = -1
    base_sequence: int = -1
    # A committing transaction's records: (Delta txn app id, version).  The commit sets the app id to the version,
    # and a batch whose app id is already at or past its version is a duplicate (the commit was applied before).
    transaction: tuple[str, int] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.records, pa.Table) or self.records.schema != INPUT_SCHEMA:
            self.records = normalize_records(self.records)

    @property
    def idempotent(self) -> bool:
        """Sequence-checked (a committing transaction's records were checked when they were staged)."""
        return self.producer_id >= 0 and self.transaction is None

    @functools.cached_property
    def nbytes(self) -> int:
        """The records' Arrow size (asked by the accumulator several times per batch; the table never changes)."""
        return self.records.nbytes


@dataclass(frozen=True)
class AppendResult:
    """Where a batch landed: like one partition entry of Kafka's ProduceResponse."""

    partition: int
    base_offset: int
    record_count: int
    log_append_time: int = -1  # epoch ms when the topic uses LogAppendTime, else -1
    duplicate: bool = False

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.record_count - 1


@dataclass(eq=False)
class StagedGroup:
    """A group commit planned on top of the group staged before it (``after``), its segments uploading.

    Consecutive uploaded groups go out together as one Delta commit (:class:`Launch`); ``future`` resolves
    with one result per batch once that commit is concluded.
    """
    batches: list[PartitionBatch]
    results: list
    plan: dict[int, list[tuple[int, int]]]
    acked: dict[int, AppendResult]
    leo: dict[int, int]  # every partition's log end once this group and the ones before it land
    info: AppendInfo  # producer state with this group's batches (and those before it) recorded
    producer_rows: list
    base: int  # with no ``after``: the snapshot version it was planned on
    txns: dict[str, int]
    expect: dict[str, int | None]  # each of ``txns``' app ids as planned on: ``after``'s log ends, else the snapshot's
    after: "StagedGroup | None"
    uploads: list[Future] = field(default_factory=list)
    adds: list = field(default_factory=list)
    version: int = -1  # the version of the commit it went out in
    landed: bool = False
    future: Future = field(default_factory=Future)
    # time.monotonic() when it was staged, when each upload finished, when its commit went out: its stages
    staged_at: float = 0.0
    uploaded_at: list[float] = field(default_factory=list)
    launched_at: float = 0.0

    def uploaded(self) -> OSError | None:
        """Collect the finished uploads' add actions; the first failure, if any."""
        failure = None
        for f in self.uploads:
            try:
                self.adds.append(f.result())
            except OSError as e:
                failure = failure or e
        return failure


@dataclass(eq=False)
class Launch:
    """One commit PUT in flight, carrying consecutive staged groups; after a conflict that touched none of
    its app ids, the same ``body`` PUT again at the next ``version`` (``attempt`` counts those)."""
    groups: list[StagedGroup]
    commit_id: str
    version: int
    added: list
    txns: dict[str, int]
    info: dict
    body: bytes
    attempt: int = 0
    put: Future | None = None
    handed: list[tuple[Handoff, Future]] = field(default_factory=list)  # other fronts' commits riding along
    forwarded: bool = False  # handed to the topic's committer front instead of PUT (``put`` is that call)


class Committer:
    """Appends batches to one topic table with offset fencing and idempotence."""

    def __init__(self, root: StorageRoot, topic: str, registry: ProducerRegistry | None = None,
                 node_id: int | None = None, locate_node=None, lock: threading.Lock | None = None,
                 forwarder=None, on_stages: Callable[[str, dict[str, float]], None] | None = None) -> None:
        from deltalake import DeltaTable
        from deltalake.exceptions import TableNotFoundError

        self.root = root
        self.topic = topic
        self.registry = registry or ProducerRegistry(root)
        self.node_id = node_id  # set: append only to partitions whose lease this node holds (partition_lease.py)
        # node id -> ("node 2 (its addresses)", its HTTP URL or None)
        self._locate_node = locate_node or (lambda node: (f"node {node}", None))
        # Several fronts: ``committer_front(snapshot) -> URL | None`` and ``hand_off(url, topic, data) -> Future``
        # (lakelog/cluster/commit_forwarder.py); None: this writer makes all its commits itself.
        self._forwarder = forwarder
        # (topic, {stage: seconds}) once a pipelined group's commit landed: "upload", "commit_wait", and
        # "commit" (its PUT) or "handoff" (the round trip to the committer front), for metrics
        self._on_stages = on_stages
        snap = load_snapshot(root, topic)
        if snap.version < 0 or snap.deleted:
            raise UnknownTopicOrPartition(f"topic {topic} does not exist under {root.uri}")
        self.topic_id = snap.topic_id  # the incarnation this writer appends to
        self.gone = False  # set once the topic was deleted or recreated under this writer: it never commits again
        try:
            self._dt = retry_listing_gaps(
                lambda: DeltaTable(root.uri_for("topics", topic), storage_options=root.storage_options))
        except TableNotFoundError:
            raise UnknownTopicOrPartition(f"topic {topic} does not exist under {root.uri}") from None
        self.snapshot: TopicSnapshot = advance(root, snap, until_version=self._dt.version())
        self._persisted_version = snap.persisted_version
        self._stale = False
        self._direct = DIRECT_COMMITS and _direct_commits_supported(self._dt)
        self._maintainer: threading.Thread | None = None  # checkpoint and index storage, off the commit path
        self._checkpoint_due: int | None = None  # the version a checkpoint fell due at, until one starts
        self._checkpointed = (-1, 0.0)  # (version, monotonic time) of this writer's last checkpoint
        # object stores: our commits' bodies since the last checkpoint began, and the latest RECENT_BODIES
        self._bodies: dict[int, bytes] = {}
        self._mirror: Path | None = None  # object stores: the local copy of the log checkpoints are written from
        self._cleaned_at = time.monotonic()  # object stores: when expired log files were last looked for
        self._lock = lock  # the topic's lock: pipeline callbacks take it
        self._pipeline: deque[StagedGroup] = deque()  # staged groups not yet sent, oldest first
        # Commits in flight, oldest first: our one PUT, or up to MAX_HANDOFFS_IN_FLIGHT handoffs, concluded in order
        self._flights: deque[Launch] = deque()
        self._handed: deque[tuple[Handoff, Future]] = deque()  # handoffs waiting for our next commit
        self._handed_apps: dict[int, frozenset[str]] = {}  # our commits that carried handoffs -> their app ids
        self._nudge_guard = threading.Lock()
        self._nudge_queued = False
        if self.snapshot.version - self._persisted_version >= PERSIST_EVERY:
            self.persist()  # spare the next reader replaying the same long tail

    def _refresh(self) -> None:
        """Catch up with every commit made since our snapshot (ours and other writers'). Pipelined commits still
        staged are not read back: they are applied from what we wrote, in order, when they land."""
        # Stale until handle and snapshot agree: committing through a handle newer than the
        # snapshot would skip delta-rs's conflict check against the commits in between.
        self._stale = True
        if self._direct:  # no delta-rs handle to keep in step: our commits do not go through it
            advance(self.root, self.snapshot)
        else:
            retry_listing_gaps(self._dt.update_incremental)
            advance(self.root, self.snapshot, until_version=self._dt.version())
        self._stale = False
        self._start_maintenance()

    def committed_snapshot(self, after: TopicSnapshot) -> TopicSnapshot | None:
        """A copy of the snapshot when it is the log as committed up to its version (not stale, the topic not
        gone) and newer than ``after``, of the same incarnation; else None, without copying. Call with the
        topic's lock held."""
        snap = self.snapshot
        if self._stale or self.gone or snap.version <= after.version or snap.topic_id != after.topic_id:
            return None
        return snap.copy()

    def close(self) -> None:
        """Let a running checkpoint or index store finish, then persist the index as it is now."""
        self.drain()
        if self._maintainer is not None:
            self._maintainer.join()
        if self._mirror is not None:
            shutil.rmtree(self._mirror, ignore_errors=True)
        self.persist()

    def persist(self) -> None:
        """Store the index as it is now, on this thread."""
        if self._store_index(self.snapshot.version, self.snapshot.to_ipc_bytes()):
            self._persisted_version = self.snapshot.version

    def _store_index(self, version: int, data: bytes) -> bool:
        try:
            store_index(self.root, self.topic, version, data)
            return True
        except OSError as e:  # the index is a cache of the log: failing to save it loses nothing
            log.warning("could not persist the index of %s: %s", self.topic, e)
            return False

    def append(self, batches: list[PartitionBatch]) -> list[AppendResult | KafkaError]:
        """Commit ``batches`` in one Delta commit; one result (or error) per batch, in order.

        Errors of one batch (bad input, sequence, epoch) fail only that batch;
        the others commit.  A batch is acknowledged only once its commit succeeded.
        """
        self.drain()
        return self._append(batches)

    def _append(self, batches: list[PartitionBatch]) -> list[AppendResult | KafkaError]:
        if self._stale:
            try:
                self._refresh()
            except Exception as e:
                return [storage_failure(f"refreshing {self.topic}", e)] * len(batches)
        results: list[AppendResult | KafkaError | None] = [None] * len(batches)
        static_ok = self._validate_static(batches, results, range(len(batches)))
        validated = self.snapshot.configuration  # replaced, never mutated, when a commit changes the configs
        attempts: dict[str, dict[int, AppendResult]] = {}  # commit id -> what it would acknowledge
        plan: dict[int, list[tuple[int, int]]] = {}
        rechecked = False
        for attempt in range(MAX_ATTEMPTS):
            landed = next((cid for cid in attempts if cid in self.snapshot.recent_commit_ids), None)
            if landed is not None:  # an attempt whose outcome looked unknown did commit
                return self._acknowledge(results, attempts[landed])
            snap = self.snapshot
            if (gone := self._fenced_by_delete(snap)) is not None:
                self.gone = True
                return self._fail_pending(results, {0: [(i, 0) for i in static_ok if results[i] is None]}, gone)
            if snap.configuration is not validated:  # a concurrent alter (any process) landed: check again
                static_ok = self._validate_static(batches, results, [i for i in static_ok if results[i] is None])
                snap, validated = self.snapshot, self.snapshot.configuration
            pending = [i for i in static_ok if results[i] is None]
            plan, producer_rows, early, _, _ = self._prepare(batches, pending)
            if not rechecked and any(isinstance(r, _STATE_ERRORS) for r in early.values()):
                # our view of producer state may predate another writer's commit: look again once
                rechecked = True
                outcome = self._refresh_or(None)
                if isinstance(outcome, KafkaError):
                    return self._fail_pending(results, {0: [(i, 0) for i in pending]}, outcome)
                continue
            for i, r in early.items():
                results[i] = r
            if not plan:
                return results  # type: ignore[return-value]
            append_time = int(time.time() * 1000)
            commit_id = uuid.uuid4().hex
            leo = {partition: items[-1][1] + batches[items[-1][0]].records.num_rows
                   for partition, items in plan.items()}
            adds, failure = self._write_segments(
                {partition: self._segment_table(batches, items, snap, append_time)
                 for partition, items in plan.items()}, snap.config.segment_codec)
            if failure is not None:
                delete_quietly(self.root, self.topic, [a.path for a in adds])
                log.warning("writing segments of %s failed: %s", self.topic, failure)
                return self._fail_pending(results, plan, storage_error(failure))  # no paths for clients
            attempts[commit_id] = {
                i: AppendResult(partition, base, batches[i].records.num_rows,
                                append_time if snap.config.log_append_time else -1)
                for partition, items in plan.items() for i, base in items}
            txns = {leo_app(p): v for p, v in leo.items()}
            txns.update(batches[i].transaction for items in plan.values() for i, _ in items
                        if batches[i].transaction is not None)
            if self.node_id is not None:  # our leases again, unchanged: a takeover since then conflicts with us
                txns.update({lease_app(p): snap.txn(lease_app(p)) for p in plan if self._holds_lease(snap, p)})
            outcome = self._commit(adds, txns, producer_rows, commit_id)
            if outcome is True or commit_id in self.snapshot.recent_commit_ids:
                return self._acknowledge(results, attempts[commit_id])
            if isinstance(outcome, KafkaError):
                # The attempt's outcome is unknown or unconfirmed (a lost response, a stalled PUT that may
                # still land): its files may yet be referenced, so they stay (orphans are never read).
                return self._fail_pending(results, plan, outcome)
            delete_quietly(self.root, self.topic, [a.path for a in adds])  # lost a conflict: can never land
            time.sleep(min(0.002 * (2 ** attempt), 0.2) * (0.5 + uuid.uuid4().int % 1000 / 1000))
        return self._fail_pending(results, plan, NotLeaderOrFollower(
            f"gave up appending to {self.topic} partitions {sorted(plan)} after {MAX_ATTEMPTS} commit conflicts"))

    # -- pipelined commits (object stores) ---------------------------------------------------------------
    def stage(self, batches: list[PartitionBatch]) -> StagedGroup | None:
        """Plan ``batches`` on top of the groups staged before them and start uploading their segments; None
        when they must take the plain path (:meth:`append`): a local root, a topic not committed directly, a
        stale snapshot, transactions, state errors to look at again, nothing to write.

        When no commit PUT is in flight, every staged group whose uploads are done, in order, goes out in one
        commit; its ``future`` resolves when that commit is concluded. Uploads and PUTs move the pipeline on
        from their own threads, under the topic's lock (:meth:`_advance`).
        """
        after = self._pipeline[-1] if self._pipeline else (
            self._flights[-1].groups[-1] if self._flights and self._flights[-1].groups else None)
        if (self.root.is_local or not self._direct or self._stale or self._lock is None
                or any(b.transaction is not None or not 0 <= b.partition < self.snapshot.partition_count
                       for b in batches)):
            return None
        snap = self.snapshot
        if self._fenced_by_delete(snap) is not None:
            return None
        results: list[AppendResult | KafkaError | None] = [None] * len(batches)
        static_ok = self._validate_static(batches, results, range(len(batches)))
        plan, producer_rows, early, info, leo = self._prepare(batches, static_ok, after)
        if not plan or any(isinstance(r, _STATE_ERRORS) for r in early.values()):
            return None  # (a duplicate may be of a group still in flight: answer it once that has landed)
        for i, r in early.items():
            results[i] = r
        append_time = int(time.time() * 1000)
        acked = {i: AppendResult(partition, base, batches[i].records.num_rows,
                                 append_time if snap.config.log_append_time else -1)
                 for partition, items in plan.items() for i, base in items}
        txns = {leo_app(p): leo[p] for p in plan}
        if self.node_id is not None:  # our leases again, unchanged: a takeover since then conflicts with us
            txns.update({lease_app(p): snap.txn(lease_app(p)) for p in plan if self._holds_lease(snap, p)})
        planned_on = after.leo if after is not None else {}  # (leases: expected unchanged, as set)
        expect = {**txns, **{leo_app(p): planned_on[p] if p in planned_on else snap.txn(leo_app(p)) for p in plan}}
        staged = StagedGroup(batches, results, plan, acked, leo, info, producer_rows, snap.version, txns, expect,
                             after, staged_at=time.monotonic())
        self._pipeline.append(staged)
        for p, items in plan.items():  # each segment is built on its upload's thread, not under the lock
            upload = _uploads().submit(self._write_segment, p, batches, items, snap, append_time)
            staged.uploads.append(upload)
            upload.add_done_callback(lambda _, g=staged: g.uploaded_at.append(time.monotonic()))
            upload.add_done_callback(self._nudge_later)
        return staged

    def _write_segment(self, partition: int, batches, items, snap: TopicSnapshot, append_time: int):
        return write_segment(self.root, self.topic, partition, self._segment_table(batches, items, snap, append_time),
                             codec=snap.config.segment_codec)

    def _nudge_later(self, _=None) -> None:
        # Not on the finished upload's or PUT's thread: blocking those on the topic's lock could leave none
        # free for the uploads that its holder (drain) waits for. One nudge queued at a time is enough: it
        # looks at everything that finished before it runs.
        with self._nudge_guard:
            if self._nudge_queued:
                return
            self._nudge_queued = True
        _pipeline_moves().submit(self._nudge)

    def _nudge(self) -> None:
        with self._nudge_guard:
            self._nudge_queued = False
        with self._lock:
            self._advance()

    def _advance(self) -> None:
        """Move the pipeline on as far as it is ready, without waiting: conclude the commits in flight that have
        answered, oldest first; then, with none in flight or only handoffs that another may follow, send every
        staged group whose uploads are done, in order, in one commit."""
        while True:
            url = None
            if self._flights:
                if self._flights[0].put.done():
                    flight = self._flights.popleft()
                    self._guarded(lambda: self._conclude(flight), flight.groups, flight.handed)
                    continue  # concluding may have sent it again, at the next version
                if (url := self._hand_on()) is None:
                    return
            ready = []
            for g in self._pipeline:
                if not all(f.done() for f in g.uploads):
                    break
                ready.append(g)
            if not ready and not self._handed:
                return
            for _ in ready:
                self._pipeline.popleft()
            if url is not None and not ready:
                return
            handed = list(self._handed)
            self._handed.clear()
            self._guarded(lambda: self._launch(ready, handed, url), ready, handed)

    def _hand_on(self) -> str | None:
        """With handoffs in flight, where the next group may be handed too -- the committer front, while every
        commit in flight is a handoff, fewer than :data:`MAX_HANDOFFS_IN_FLIGHT`, nothing waits to be committed
        here and the snapshot is current -- else None: wait for them. The committer front takes them in order,
        and one planned on a handoff that does not land is refused (its log ends differ), so none waits."""
        if (len(self._flights) >= MAX_HANDOFFS_IN_FLIGHT or self._handed or self._stale
                or not all(f.forwarded for f in self._flights)):
            return None
        return self._committer_front(self._flights[-1].txns)

    def _guarded(self, step, groups: list[StagedGroup], handed: list[tuple[Handoff, Future]]) -> None:
        """Run a pipeline step; if it raises, its groups fail retriably and its handoffs' outcome is unknown (no
        future is left unresolved)."""
        try:
            step()
        except Exception as e:
            log.warning("pipelined commit of %s failed: %s", self.topic, _describe(e))
            self._stale = True  # look at the log again before the next append
            error = KafkaStorageError(f"committing to {self.topic} failed (retry)")
            for g in groups:
                if not g.future.done():
                    g.future.set_result(self._fail_pending(g.results, g.plan, error))
            for _, done in handed:
                if not done.done():
                    done.set_exception(error)

    def drain(self) -> None:
        """Conclude every staged group and handoff, in order, waiting for their uploads and PUTs (lock held)."""
        while self._flights or self._pipeline or self._handed:
            waits = ([self._flights[0].put] if self._flights
                     else self._pipeline[0].uploads if self._pipeline else [])
            for f in waits:
                try:
                    f.exception()
                except Exception:  # a cancelled future: _advance reports it
                    pass
            self._advance()

    def _launch(self, groups: list[StagedGroup], handed: list[tuple[Handoff, Future]], url: str | None = None) -> None:
        """Send ``groups`` (uploaded, consecutive) and the ``handed`` commits of other fronts that still fit the
        log in one commit PUT (or hand it on: :meth:`_send`). Groups whose plan no longer holds -- what the
        first was planned on did not land as planned, or a commit not ours (or one of ours that carried
        handoffs setting their app ids) landed since -- or whose upload failed are resolved now: a failed
        group with a storage error, the others appended again, in order, the plain way, on what did land.

        ``url``: behind handoffs still in flight (:meth:`_hand_on`), hand the groups to that committer front; what
        they were planned on is checked there. If an upload failed they all fail retriably: appended again now,
        before the handoffs ahead of them landed, they could land first."""
        if handed and max(h.known_version for h, _ in handed) > self.snapshot.version:
            self._stale = True  # a sender has seen commits we have not: look before judging its handoff
        if groups:
            failures = [g.uploaded() for g in groups]
            if url is not None and any(failures):
                for g in groups:
                    delete_quietly(self.root, self.topic, [a.path for a in g.adds])
                    g.future.set_result(self._fail_pending(g.results, g.plan, KafkaStorageError(
                        f"writing segments of {self.topic} failed (retry)")))
                return
        if groups and url is None:
            after, base = groups[0].after, groups[0].base
            if after is not None:
                base = after.version if after.landed else -2
            apps = set().union(*(g.txns for g in groups))
            if self._stale or not self._only_handoffs_since(base, apps) or any(failures):
                for g, failure in zip(groups, failures):
                    if failure is None:
                        self._replan([g])
                        continue
                    delete_quietly(self.root, self.topic, [a.path for a in g.adds])
                    log.warning("writing segments of %s failed: %s", self.topic, failure)
                    g.future.set_result(self._fail_pending(g.results, g.plan, storage_error(failure)))
                groups = []
        if handed and self._stale and isinstance(error := self._refresh_or(None), KafkaError):
            for _, done in handed:
                done.set_exception(HandoffRejected(error))
            return
        txns: dict[str, int] = {}
        for g in groups:
            txns.update(g.txns)  # a later group's log end is the partition's
        rows = [row for g in groups for row in g.producer_rows]
        added = [_add_action(a) for g in groups for a in g.adds]
        taken = []
        for h, done in handed:
            if (problem := self._handoff_problem(h, txns)) is not None:
                done.set_exception(HandoffRejected(problem))
                continue
            txns.update(h.txns)
            rows.extend(h.producer_rows)
            added.extend(msgspec.structs.asdict(a) for a in h.adds)
            taken.append((h, done))
        if not groups and not taken:
            return
        commit_id = uuid.uuid4().hex
        meta = _commit_meta(rows, commit_id, [h.commit_id for h, _ in taken])
        body, info = _commit_body(added, txns, meta)
        if groups:
            groups[0].after = None  # concluded, or in a handoff in flight: let it go
        for g in groups:
            g.launched_at = time.monotonic()
        self._send(Launch(groups, commit_id, self.snapshot.version + 1, added, txns, info, body, handed=taken), url)

    def _only_handoffs_since(self, base: int, apps: set[str]) -> bool:
        """Whether every commit after ``base`` is one of ours that carried only handoffs, none setting ``apps``."""
        if base < 0 or base > self.snapshot.version:
            return False
        for v in range(base + 1, self.snapshot.version + 1):
            carried = self._handed_apps.get(v)
            if carried is None or carried & apps:
                return False
        return True

    def _handoff_problem(self, h: Handoff, txns: dict[str, int]) -> KafkaError | None:
        """Why a handoff cannot go in our next commit (planned on a log other than ours plus ``txns``), or None."""
        snap = self.snapshot
        if (gone := self._fenced_by_delete(snap)) is not None:
            return gone
        if h.topic_id != snap.topic_id:
            return UnknownTopicId(f"topic {self.topic} has topic id {snap.topic_id}, not {h.topic_id}")
        for app, planned in h.expect.items():
            if (now := txns.get(app, snap.txn(app))) != planned:
                return NotLeaderOrFollower(f"{app} of {self.topic} is {now}; the commit handed over was planned "
                                           f"on {planned}")
        if any(int(app.rsplit(".", 1)[1]) >= snap.partition_count for app in h.txns):
            return UnknownTopicOrPartition(f"a partition of {self.topic} handed over does not exist")
        return None

    def accept(self, handoff: Handoff, advance: bool = True) -> Future:
        """Take another front's commit into our next one (topic's lock held): the future resolves with a
        :class:`HandoffAnswer` once that commit landed, or with :class:`HandoffRejected` if it will never
        land, or another error if its outcome is unknown. Rejected at once unless this writer pipelines its
        commits and takes itself for the topic's committer front (so two fronts never wait on each other).
        ``advance=False`` leaves moving the pipeline on (which may conclude commits and read the store) to a
        pipeline thread: for a caller that must not block."""
        done: Future = Future()
        if (self.root.is_local or not self._direct or self._lock is None or self._forwarder is None
                or self._forwarder.committer_front(self.snapshot) is not None):
            done.set_exception(HandoffRejected(NotLeaderOrFollower(
                f"this front does not make the commits of {self.topic}; commit directly")))
            return done
        self._handed.append((handoff, done))
        if advance:
            self._advance()
        else:
            self._nudge_later()
        return done

    def _send(self, flight: Launch, url: str | None = None) -> None:
        """PUT the commit; or, on a front that is not the topic's committer front and carries no handoff itself,
        hand it to that front (``url``: the one :meth:`_hand_on` found) as planned: each app id as the first of
        the groups that sets it expected it."""
        if url is None and not flight.handed and flight.attempt == 0:
            url = self._committer_front(flight.txns)
        if url is not None:
            expect: dict[str, int | None] = {}
            for g in flight.groups:
                for app, planned in g.expect.items():
                    expect.setdefault(app, planned)
            flight.forwarded = True
            flight.put = self._hand_off(url, flight.commit_id, flight.added, flight.txns,
                                        [row for g in flight.groups for row in g.producer_rows], expect)
        else:
            flight.put = _commits().submit(put_if_absent, self.root,
                                           commit_path(f"topics/{self.topic}", flight.version), flight.body,
                                           fsync=False)
        self._flights.append(flight)
        flight.put.add_done_callback(self._nudge_later)

    def _conclude(self, flight: Launch) -> None:
        """Apply a commit whose PUT has answered to the snapshot and resolve its groups and handoffs, as
        :meth:`_commit_direct` would: a conflict is looked up by commit id, an unknown outcome too."""
        if flight.forwarded:
            return self._conclude_handoff(flight)
        error = flight.put.exception()
        if error is None:
            landed = True
            try:
                self.snapshot.apply(Commit(flight.version, adds=flight.added, txns=flight.txns,
                                           commit_info=flight.info))
            except Exception as e:  # committed all the same; re-read it from the log before the next append
                log.warning("applying our commit %d of %s failed: %s", flight.version, self.topic, e)
                self._stale = True
            else:
                self._after_direct_commit(flight.version, flight.body)
            if flight.handed:
                self._handed_apps[flight.version] = frozenset(app for h, _ in flight.handed for app in h.txns)
                while len(self._handed_apps) > RECENT_BODIES:
                    del self._handed_apps[next(iter(self._handed_apps))]
            outcome = True
        elif isinstance(error, CommitConflict):  # the version is taken -- perhaps by our own PUT, retried by the store
            outcome = (self._after_conflict(flight.commit_id, flight.txns, flight.version)
                       if flight.attempt < MAX_COMMIT_RETRIES else self._refresh_or(None))
            if outcome is RETRY:  # the same commit, files and offsets at the next version: nothing re-uploaded
                self._send(replace(flight, version=self.snapshot.version + 1, attempt=flight.attempt + 1, put=None))
                return
            if outcome is None and flight.commit_id not in self.snapshot.recent_commit_ids:
                # another writer's commit set our app ids (or the metadata): nothing of ours landed, and our
                # offsets may be taken; append the plain way on what did land (the handoffs' senders too)
                for _, done in flight.handed:
                    done.set_exception(HandoffRejected(NotLeaderOrFollower(
                        f"another writer's commit to {self.topic} took the offsets planned on")))
                self._replan(flight.groups)
                return
            outcome = outcome or True
            landed = self.snapshot.version == flight.version
        else:  # the PUT's outcome is unknown: look for it by its commit id
            outcome = self._unknown_outcome(error, flight.commit_id)
            landed = self.snapshot.version == flight.version
        # Other fronts' answers first: each has an HTTP response and the sender's own conclusion still to go
        for h, done in flight.handed:
            if outcome is True:
                # the held bodies (bounded), not every version since the sender's: a sender may be far behind
                done.set_result(HandoffAnswer(flight.version, [
                    (v, body.decode()) for v, body in self._bodies.items() if h.known_version < v <= flight.version]))
            else:  # unknown: the sender looks for its commit id
                done.set_exception(outcome)
        self._resolve(flight, outcome, landed)

    def _resolve(self, flight: Launch, outcome, landed: bool) -> None:
        for g in flight.groups:
            if outcome is True:
                g.version, g.landed = flight.version, landed and not self._stale
                if self._on_stages is not None:
                    self._report_stages(g, "handoff" if flight.forwarded else "commit")
                g.future.set_result(self._acknowledge(g.results, g.acked))
            else:  # it may still land: its files stay (orphans are never read)
                g.future.set_result(self._fail_pending(g.results, g.plan, outcome))

    def _report_stages(self, g: StagedGroup, last: str) -> None:
        uploaded = max(g.uploaded_at, default=g.staged_at)
        try:
            self._on_stages(self.topic, {"upload": uploaded - g.staged_at, "commit_wait": g.launched_at - uploaded,
                                         last: time.monotonic() - g.launched_at})
        except Exception as e:  # a metrics hook must not fail an acknowledgement
            log.warning("reporting commit stages of %s failed: %s", self.topic, _describe(e))

    def _replan(self, groups: list[StagedGroup]) -> None:
        """Groups none of whose commit landed: their files go, and they are appended again the plain way."""
        for g in groups:
            delete_quietly(self.root, self.topic, [a.path for a in g.adds])
            g.future.set_result(self._append(g.batches))

    def _conclude_handoff(self, flight: Launch) -> None:
        """A commit handed to the committer front has been answered: catch up to the commit it landed in (from
        the answer, else the store); or, rejected, append again the plain way; or look for it by its id."""
        error = flight.put.exception()
        if isinstance(error, HandoffRejected):
            log.debug("handoff of a commit to %s rejected: %s", self.topic, error)
            if isinstance(outcome := self._refresh_or(None), KafkaError):
                return self._resolve(flight, outcome, False)
            if flight.commit_id not in self.snapshot.recent_commit_ids:
                return self._replan(flight.groups)
            return self._resolve(flight, True, False)
        if error is not None:
            return self._resolve(flight, self._unknown_outcome(error, flight.commit_id), False)
        answer: HandoffAnswer = flight.put.result()
        self._catch_up(answer, flight.commit_id)
        flight.version = answer.version
        self._resolve(flight, True, self.snapshot.version == answer.version)
        self._start_maintenance()

    def _catch_up(self, answer: HandoffAnswer, commit_id: str) -> None:
        """Apply the commits up to the one our handoff landed in: those the answer holds, the others read."""
        held = dict(answer.commits)
        table = self.root.path_for("topics", self.topic)
        try:
            for v in range(self.snapshot.version + 1, answer.version + 1):
                commit = parse_commit(v, held[v]) if v in held else read_commit(self.root, table, v)
                if commit is None:
                    raise LogTailGone(f"commit {v} of {self.topic} is not in the store")
                self.snapshot.apply(commit)
            if self.snapshot.recent_commit_ids.get(commit_id) != answer.version:
                raise ValueError(f"commit {answer.version} of {self.topic} does not carry ours")
        except (LogTailGone, OSError, ValueError, KeyError) as e:  # committed all the same: look again next time
            log.warning("catching up with handed commit %d of %s failed: %s", answer.version, self.topic, e)
            self._stale = True

    def _fenced_by_delete(self, snap: TopicSnapshot) -> KafkaError | None:
        """Kafka's answer to a writer whose topic was deleted (and perhaps recreated) since it started."""
        if snap.deleted:
            return UnknownTopicOrPartition(f"topic {self.topic} was deleted")
        if snap.topic_id != self.topic_id:
            return UnknownTopicId(f"topic {self.topic} was deleted and recreated (topic id {snap.topic_id}); "
                                  f"this writer held topic id {self.topic_id}")
        return None

    @staticmethod
    def _acknowledge(results, acked: dict[int, AppendResult]):
        for i, r in acked.items():
            results[i] = r
        return results

    # -- steps ----------------------------------------------------------------------------
    def _validate_static(self, batches, results, indices) -> list[int]:
        if any(not 0 <= batches[i].partition < self.snapshot.partition_count for i in indices):
            self._refresh_or(None)  # partitions may have been added (topics alter) since our snapshot
        snap, ok = self.snapshot, []
        for i in indices:
            b = batches[i]
            try:
                if not 0 <= b.partition < snap.partition_count:
                    raise UnknownTopicOrPartition(
                        f"partition {b.partition} of topic {self.topic} does not exist "
                        f"(the topic has {snap.partition_count} partitions)")
                validate_records(b.records, snap.config, topic=self.topic, partition=b.partition)
                ok.append(i)
            except KafkaError as e:
                results[i] = e
        return ok

    def _prepare(self, batches, pending, after: StagedGroup | None = None):
        """Validate producer state and assign offsets against the current snapshot, or on top of ``after``
        (a commit in flight): its producer state and log end offsets."""
        snap = self.snapshot
        info = after.info if after is not None else snap.producers.begin()
        plan: dict[int, list[tuple[int, int]]] = {}
        leo: dict[int, int] = dict(after.leo) if after is not None else {}
        producer_rows: list[list[int]] = []
        dups: dict[int, AppendResult | KafkaError] = {}
        now = int(time.time() * 1000)
        if any(batches[i].idempotent for i in pending):
            self.registry.refresh_soon()
        for i in pending:
            b = batches[i]
            p = b.partition
            n = b.records.num_rows
            try:
                if b.idempotent:
                    transactional = self.registry.check(b.producer_id, b.producer_epoch)
                    dup = info.check(topic=self.topic, partition=p, producer_id=b.producer_id,
                                     epoch=b.producer_epoch, first_seq=b.base_sequence, count=n,
                                     transactional=transactional)
                    if dup is not None:
                        dups[i] = AppendResult(p, dup.first_offset, dup.last_offset - dup.first_offset + 1,
                                               duplicate=True)
                        continue
            except KafkaError as e:
                dups[i] = e
                continue
            if b.transaction is not None:
                done = snap.txn(b.transaction[0])
                if done is not None and done >= b.transaction[1]:
                    dups[i] = AppendResult(p, -1, n, duplicate=True)
                    continue
            lease = unpack(snap.txn(lease_app(p))) if self.node_id is not None else None
            # A transaction's commit is applied by its coordinator, which need not lead the partition: the
            # offsets' fencing (lakelog.leo.<P>) keeps it safe beside the leader's appends.
            if self.node_id is not None and b.transaction is None and (lease is None or lease.node_id != self.node_id):
                leader, url = self._locate_node(lease.node_id) if lease else (None, None)
                dups[i] = NotLeaderOrFollower(
                    f"this front (node {self.node_id}) does not hold the lease of {self.topic} partition {p}"
                    + (f"; {leader} does" if lease else ""), lease.node_id if lease else -1, url)
                continue
            base = leo.get(p, snap.high_watermark(p))
            leo[p] = base + n
            plan.setdefault(p, []).append((i, base))
            if b.idempotent:
                meta = BatchMetadata(p, b.producer_id, b.producer_epoch, b.base_sequence,
                                     last_sequence(b.base_sequence, n), base, base + n - 1, now)
                info.record(meta)
                producer_rows.append(meta.to_row())
        return plan, producer_rows, dups, info, leo

    def _holds_lease(self, snap: TopicSnapshot, partition: int) -> bool:
        lease = unpack(snap.txn(lease_app(partition)))
        return lease is not None and lease.node_id == self.node_id

    def _segment_table(self, batches, items, snap: TopicSnapshot, append_time_ms: int) -> pa.Table:
        log_append = snap.config.log_append_time
        ts_type = FILE_SCHEMA.field("timestamp").type
        parts = []
        for i, base in items:
            b = batches[i]
            n = b.records.num_rows
            rec = b.records
            if log_append:
                ts = pa.array(np.full(n, append_time_ms * 1000, dtype=np.int64)).view(ts_type)
            else:
                ts = rec.column("timestamp")
                if ts.null_count:
                    ts = pc.fill_null(ts, pa.scalar(append_time_ms * 1000, pa.int64()).cast(ts_type))
            if b.idempotent:
                seq = (np.arange(n, dtype=np.int64) + b.base_sequence) % (2**31)
            else:
                seq = np.full(n, -1)
            parts.append(pa.table(
                {
                    "offset": pa.array(np.arange(base, base + n, dtype=np.int64)),
                    "timestamp": ts,
                    "timestampType": pa.array(np.full(n, LOG_APPEND_TIME if log_append else CREATE_TIME, np.int32)),
                    "key": rec.column("key"),
                    "value": rec.column("value"),
                    "headers": rec.column("headers"),
                    "producerId": pa.array(np.full(n, b.producer_id, np.int64)),
                    "producerEpoch": pa.array(np.full(n, b.producer_epoch, np.int16)),
                    "sequence": pa.array(seq.astype(np.int32)),
                },
                schema=FILE_SCHEMA,
            ))
        return pa.concat_tables(parts) if len(parts) > 1 else parts[0]

    def _commit(self, adds, txns, producer_rows, commit_id) -> bool | KafkaError | None:
        """True when committed; None to retry after a conflict; an error to give up."""
        from deltalake import CommitProperties, Transaction
        from deltalake.exceptions import CommitFailedError

        meta = _commit_meta(producer_rows, commit_id)
        if self._direct:
            if (url := self._committer_front(txns)) is not None:
                return self._commit_handed(url, adds, txns, producer_rows, meta)
            return self._commit_direct(adds, txns, meta)
        props = CommitProperties(
            custom_metadata=meta,
            app_transactions=[Transaction(app, v) for app, v in txns.items()],
            max_commit_retries=MAX_COMMIT_RETRIES,
        )
        try:
            self._dt.create_write_transaction(adds, mode="append", schema=TABLE_SCHEMA,
                                              partition_by=[PARTITION_COLUMN], commit_properties=props)
        except CommitFailedError as e:
            log.debug("commit conflict on %s: %s", self.topic, e)
            return self._refresh_or(None)
        except Exception as e:  # the outcome is unknown: the commit may have landed
            return self._unknown_outcome(e, commit_id)
        try:
            self._refresh()
        except Exception as e:  # committed; catch up before the next append
            log.warning("refresh of %s after a commit failed: %s", self.topic, e)
            self._stale = True
        return True

    def _committer_front(self, txns: dict[str, int]) -> str | None:
        """Where a commit setting ``txns`` is handed over: the topic's committer front, if that is another live
        front and the commit can be handed over; else None (commit directly)."""
        if self._forwarder is None or self.root.is_local or not carries(txns):
            return None
        return self._forwarder.committer_front(self.snapshot)

    def _hand_off(self, url: str, commit_id: str, added: list[dict], txns: dict[str, int], producer_rows,
                  expect: dict[str, int | None] | None = None) -> Future:
        """Send a commit planned on ``expect`` (by default our snapshot) to the committer front; the future
        resolves with its answer."""
        snap = self.snapshot
        handoff = Handoff(self.topic_id, commit_id, snap.version, [HandedAdd(**a) for a in added], txns,
                          expect if expect is not None else {app: snap.txn(app) for app in txns}, producer_rows)
        return self._forwarder.hand_off(url, self.topic, encode(handoff))

    def _commit_handed(self, url: str, adds, txns, producer_rows, meta) -> bool | KafkaError | None:
        """Hand a plain commit to the committer front and wait for its answer; committed directly if it is
        refused (nothing of it will land there). Direct PUTs would race the committer front's back-to-back
        commits for every version and mostly lose: measured, a re-planned append held the topic's lock (and
        this front's lease pass) for 8 s that way."""
        added = [_add_action(a) for a in adds]
        try:
            answer = self._hand_off(url, meta[COMMIT_ID_KEY], added, txns, producer_rows).result()
        except HandoffRejected as e:
            log.debug("handoff of a commit to %s rejected: %s", self.topic, e)
            return self._commit_direct(adds, txns, meta)
        except Exception as e:
            return self._unknown_outcome(e, meta[COMMIT_ID_KEY])
        self._catch_up(answer, meta[COMMIT_ID_KEY])
        self._start_maintenance()
        return True

    def _commit_direct(self, adds, txns, meta) -> bool | KafkaError | None:
        """Commit by creating ``_delta_log/<snapshot version + 1>.json`` ourselves: put-if-absent (a rename
        without replace locally, a conditional PUT, ``If-None-Match: *``, on S3).

        The actions are the ones delta-rs would write, and so is the conflict rule:
        when another commit took the version, it is replayed and we retry at the
        next version -- unless it set one of our app ids (``lakelog.leo.<P>``, ``lakelog.lease.<P>``) or
        changed the table's metadata or protocol; then the caller re-plans
        (None).  On success our own commit is applied to the snapshot from what we
        wrote: nothing is re-read, and no delta-rs snapshot is rebuilt.
        """
        added = [_add_action(a) for a in adds]
        body, info = _commit_body(added, txns, meta)
        for _ in range(MAX_COMMIT_RETRIES):
            version = self.snapshot.version + 1
            try:
                put_if_absent(self.root, commit_path(f"topics/{self.topic}", version), body,
                              fsync=False)
            except CommitConflict:
                outcome = self._after_conflict(meta[COMMIT_ID_KEY], txns, version)
                if outcome is RETRY:
                    continue
                return outcome
            except OSError as e:
                if self.root.is_local:  # the link was not made: nothing became visible
                    return storage_failure(f"committing to {self.topic} failed (not visible; retry)", e)
                return self._unknown_outcome(e, meta[COMMIT_ID_KEY])
            except Exception as e:  # an object store's PUT whose response was lost may still have landed
                return self._unknown_outcome(e, meta[COMMIT_ID_KEY])
            try:
                self.snapshot.apply(Commit(version, adds=added, txns=txns, commit_info=info))
            except Exception as e:  # committed all the same; re-read it from the log before the next append
                log.warning("applying our commit %d of %s failed: %s", version, self.topic, e)
                self._stale = True
                return True
            self._after_direct_commit(version, body)
            return True
        return None

    def _after_conflict(self, commit_id: str, txns: dict[str, int], version: int):
        """Another commit took our ``version``: replay the commits up to it into the snapshot (no probe past it:
        a later version taken too costs the next PUT its own 412, a probe would cost every conflict a GET) and
        apply Delta's conflict rule. True: ours is among them (a PUT the store retried); :data:`RETRY`: none set
        one of our app ids (``lakelog.leo.<P>``, ``lakelog.lease.<P>``) or changed the metadata or protocol, so
        the same commit -- files, offsets -- may go at the next version; otherwise None, or a KafkaError if the
        log could not be read (the caller re-plans on what landed)."""
        try:
            winners = list(read_tail(self.root, self.root.path_for("topics", self.topic), self.snapshot.version,
                                     version))
            for commit in winners:
                self.snapshot.apply(commit)
        except (LogTailGone, OSError, ValueError) as e:
            log.debug("replaying the commits that beat ours on %s: %s", self.topic, e)
            return self._refresh_or(None)
        if commit_id in self.snapshot.recent_commit_ids:
            return True
        if any(c.protocol is not None for c in winners):
            self._direct = False  # a protocol we may not speak: leave it to delta-rs
            return self._refresh_or(None)
        if any(c.configuration is not None or txns.keys() & c.txns.keys() for c in winners):
            return self._refresh_or(None)  # our offsets or validation may be stale: re-plan on the latest state
        return RETRY

    def _write_segments(self, tables: dict[int, pa.Table], codec: str | None) -> tuple[list, OSError | None]:
        """Write one segment per partition in ``codec``; ``(the adds written, the first failure or None)``.

        On an object store the uploads run in parallel (each is a round trip of the store's latency);
        locally, one after another.
        """
        adds: list = []
        if self.root.is_local or len(tables) == 1:
            for partition, table in tables.items():
                try:
                    adds.append(write_segment(self.root, self.topic, partition, table, codec=codec))
                except OSError as e:
                    return adds, e
            return adds, None
        futures = [_uploads().submit(write_segment, self.root, self.topic, p, t, codec=codec)
                   for p, t in tables.items()]
        failure = None
        for f in futures:
            try:
                adds.append(f.result())
            except OSError as e:
                failure = failure or e
        return adds, failure

    def _unknown_outcome(self, e: Exception, commit_id: str) -> bool | KafkaError:
        """A commit whose store call failed without saying whether it landed: look for it by its id."""
        log.warning("commit of %s failed ambiguously: %s", self.topic, e)
        outcome = self._refresh_or(None)
        if isinstance(outcome, KafkaError):
            return outcome
        if commit_id in self.snapshot.recent_commit_ids:
            return True  # it landed; only the response was lost
        text = str(e).lower()
        error = RequestTimedOut if "timed out" in text or "timeout" in text else KafkaStorageError
        # The exception's kind only: its text names the store's URLs and paths, which clients must not see.
        return error(f"committing to {self.topic} failed (not visible; retry): {type(e).__name__}")

    def _after_direct_commit(self, version: int, body: bytes) -> None:
        """What delta-rs's post-commit hook would do (checkpoint, log cleanup), and our index persistence.
        On an object store the commit's body is kept for the next checkpoint (delta_checkpoint.py)."""
        if not self.root.is_local:
            self._bodies[version] = body
            if len(self._bodies) > MAX_HELD_BODIES:  # no checkpoint for long: the oldest will be read back
                del self._bodies[next(iter(self._bodies))]  # versions come in order
        interval = int(self.snapshot.configuration.get("delta.checkpointInterval", DEFAULT_CHECKPOINT_INTERVAL))
        now = time.monotonic()
        last_version, last_time = self._checkpointed
        # Delta's rule (every interval-th version) until this writer checkpoints, then interval versions on
        due = version % interval == 0 if last_version < 0 else version - last_version >= interval
        min_s = 0.0 if self.root.is_local else CHECKPOINT_MIN_INTERVAL_S
        if due and now - last_time >= min_s:
            self._checkpoint_due = version
            self._checkpointed = (version, now)
        self._start_maintenance()

    def _start_maintenance(self) -> None:
        """Start what is due -- a checkpoint, storing the index -- on one background thread, off the commit path.

        One run at a time: while one runs, what is due stays due and starts after a later commit.  A
        checkpoint replays the table's log and storing the index creates, renames and deletes files; only
        the index's serialization (an in-memory copy of the snapshot as it is now) stays on this thread.
        """
        if self._maintainer is not None and self._maintainer.is_alive():
            return
        checkpoint, self._checkpoint_due = self._checkpoint_due, None
        bodies = {}
        if checkpoint is not None:
            bodies = {v: b for v, b in self._bodies.items() if v <= checkpoint}
            for v in [v for v in bodies if v <= self.snapshot.version - RECENT_BODIES]:
                del self._bodies[v]
        index = None
        if self.snapshot.version - self._persisted_version >= PERSIST_EVERY:
            index = (self.snapshot.version, self.snapshot.to_ipc_bytes())
            self._persisted_version = self.snapshot.version
        if checkpoint is not None or index:
            # Not a daemon thread, so the interpreter lets a started checkpoint finish before it exits.
            self._maintainer = threading.Thread(target=self._maintain, args=(checkpoint, bodies, index),
                                                name=f"lakelog-maintain-{self.topic}")
            self._maintainer.start()

    def _maintain(self, checkpoint: int | None, bodies: dict[int, bytes], index: tuple[int, bytes] | None) -> None:
        _lower_thread_priority()  # a checkpoint's CPU must not delay the appends acknowledged meanwhile
        if index is not None:
            self._store_index(*index)
        if checkpoint is not None:
            self._checkpoint(checkpoint, bodies)

    def _checkpoint(self, version: int, bodies: dict[int, bytes]) -> None:
        """A Delta checkpoint, then expired-log cleanup. Locally: delta-rs through ``_dt``, at the latest
        version. On an object store, where delta-rs would read every commit since the last checkpoint twice
        (four GETs each), at ``version``, from a local copy of the log that our own commits' ``bodies`` fill
        (:func:`write_checkpoint`); the cleanup, at most every :data:`LOG_CLEANUP_MIN_INTERVAL_S`, through a
        handle loaded from that checkpoint."""
        from deltalake import DeltaTable

        try:
            if self.root.is_local:
                retry_listing_gaps(self._dt.update_incremental)
                retry_listing_gaps(self._dt.create_checkpoint)
                self._dt.cleanup_metadata()
                return
            if self._mirror is None:
                self._mirror = Path(tempfile.mkdtemp(prefix="lakelog-checkpoint-"))
            fetched = write_checkpoint(self.root, self.root.path_for("topics", self.topic), version, bodies,
                                       self._mirror)
            log.debug("checkpoint of %s at version %d: %d commits read back", self.topic, version, fetched)
            if time.monotonic() - self._cleaned_at >= LOG_CLEANUP_MIN_INTERVAL_S:
                self._cleaned_at = time.monotonic()
                retry_listing_gaps(lambda: DeltaTable(self.root.uri_for("topics", self.topic),
                                                      storage_options=self.root.storage_options,
                                                      without_files=True)).cleanup_metadata()
        except Exception as e:  # a checkpoint only speeds up readers; the commits stand
            log.warning("checkpoint of %s after version %d failed: %s", self.topic, version, _describe(e))

    def _refresh_or(self, outcome):
        try:
            self._refresh()
        except Exception as e:
            return storage_failure(f"refreshing {self.topic} after a commit", e)
        return outcome

    def _fail_pending(self, results, plan, error: KafkaError):
        for items in plan.values():
            for i, _ in items:
                results[i] = error
        return results


def _commit_meta(producer_rows, commit_id: str, handed_ids: list[str] = ()) -> dict:
    meta: dict = {COMMIT_ID_KEY: commit_id, OPERATION_KEY: "append"}
    if producer_rows:
        meta[PRODUCER_BATCHES_KEY] = json.dumps(producer_rows)
    if handed_ids:
        meta[HANDED_COMMIT_IDS_KEY] = list(handed_ids)
    return meta


def _add_action(a) -> dict:
    """A deltalake AddAction as the add action of a commit file."""
    return {"path": a.path, "partitionValues": dict(a.partition_values), "size": a.size,
            "modificationTime": a.modification_time, "dataChange": a.data_change, "stats": a.stats}


def _commit_body(added: list[dict], txns: dict[str, int], meta: dict) -> tuple[bytes, dict]:
    """An append's commit file -- the actions delta-rs would write -- and its commitInfo."""
    now = int(time.time() * 1000)
    info = {"timestamp": now, "operation": "WRITE",
            "operationParameters": {"mode": "Append", "partitionBy": json.dumps([PARTITION_COLUMN])},
            "engineInfo": ENGINE, "clientVersion": ENGINE, "isBlindAppend": True, **meta}
    body = encode_actions([{"commitInfo": info}, *({"add": a} for a in added),
                           *({"txn": {"appId": app, "version": v, "lastUpdated": now}} for app, v in txns.items())])
    return body, info


@functools.cache
def _pipeline_moves():
    """The threads that move pipelines on after an upload or a PUT finished (they wait for topics' locks)."""
    return ThreadPoolExecutor(max_workers=4, thread_name_prefix="lakelog-pipeline")


@functools.cache
def _commits():
    """The threads that make pipelined commits' PUTs (shared by all topics; one in flight per topic)."""
    return ThreadPoolExecutor(max_workers=COMMIT_THREADS, thread_name_prefix="lakelog-commit")


@functools.cache
def _uploads():
    """The threads that upload a commit's segments to an object store in parallel (shared by all topics)."""
    return ThreadPoolExecutor(max_workers=UPLOAD_THREADS, thread_name_prefix="lakelog-upload")


def _direct_commits_supported(dt) -> bool:
    """Whether the table's protocol asks nothing of an appender beyond plain adds (writer version <= 2)."""
    protocol = dt.protocol()
    return protocol.min_writer_version <= 2 and not protocol.writer_features
