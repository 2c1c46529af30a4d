"""The commit pipeline: group commits in flight one behind another, on an object store.

Each group's offsets are planned on top of the groups staged before it and its segments upload at once
(:meth:`CommitPipeline.stage`), while earlier groups' uploads and commit PUTs are in flight. Commits stay strictly
ordered -- a group's PUT starts only once the one before it has landed -- and consecutive uploaded groups go out
together as one commit (:class:`Launch`). A group planned on a commit that did not land is appended again from
scratch, the plain way, so no acknowledgement depends on a commit that failed.

On the topic's committer front the pipeline also carries other fronts' handoffs (:meth:`CommitPipeline.take`) in
its next commit; on the other fronts it hands its groups there (:mod:`lakelog.writer.committer_front`), up to
:data:`MAX_HANDOFFS_IN_FLIGHT` at once.

Not thread-safe: callers hold the topic's lock, and so do the callbacks that move the pipeline on when an upload or
a PUT finishes (on :func:`_pipeline_moves`' threads, never the finished upload's or PUT's own).
"""

from __future__ import annotations

import functools
import logging
import threading
import time
import uuid
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Callable, Protocol

import msgspec

from lakelog.errors import KafkaError, KafkaStorageError, NotLeaderOrFollower
from lakelog.storage.delta_commit import CommitConflict, put_if_absent
from lakelog.storage.delta_log import commit_path
from lakelog.storage.orphan_files import delete_quietly
from lakelog.storage.storage_failure import describe, storage_error
from lakelog.storage.topic_snapshot import TopicSnapshot, leo_app
from lakelog.writer.append_plan import (AppendPlan, AppendPlanner, Results, acknowledge, fail, segment_table)
from lakelog.writer.checkpointer import RECENT_BODIES
from lakelog.writer.commit_handoff import Handoff, HandoffAnswer, HandoffRejected
from lakelog.writer.committer_front import CommitterFront
from lakelog.writer.records import AppendResult, PartitionBatch
from lakelog.writer.segment_writer import uploads, write_segment
from lakelog.writer.table_commit import MAX_COMMIT_RETRIES, RETRY, TopicTable, add_action, commit_body, commit_meta
from lakelog.writer.typed_segments import commit_types

log = logging.getLogger(__name__)

COMMIT_THREADS = 8  # pipelined commit PUTs in flight at once, over all topics (at most one per topic)
# Handoffs of one topic's groups in flight at once to its committer front (several fronts): the committer front
# takes them in order, each into its next commit, and each states the log ends it was planned on, so one waiting
# for the answer to the one before it only adds latency, about a commit PUT's (BENCHMARKS.md, "Several fronts on one
# S3 root").
MAX_HANDOFFS_IN_FLIGHT = 4

class StagesListener(Protocol):
    """Told how long a group's stages took, for metrics."""

    def __call__(self, topic: str, stages: dict[str, float]) -> None:
        """``stages``: once a pipelined group's commit landed, "upload", "commit_wait", and "commit" (its PUT) or
        "handoff" (the round trip to the committer front); from an accumulator, "queue" (the wait to be taken)."""


@dataclass(eq=False)
class StagedGroup:
    """A group commit planned on top of the group staged before it (``after``), its segments uploading.

    Consecutive uploaded groups go out together as one Delta commit (:class:`Launch`); ``future`` resolves
    with one result per batch once that commit is concluded.
    """
    batches: list[PartitionBatch]
    results: Results
    plan: AppendPlan
    acked: dict[int, AppendResult]
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

    def fail(self, error: KafkaError) -> None:
        self.future.set_result(fail(self.results, self.plan.offsets, error))


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


class CommitPipeline:
    """One topic's pipelined commits. ``append``: the plain path (:meth:`Committer.append
    <lakelog.writer.committer.Committer>`'s), which groups whose plan did not hold take again."""

    def __init__(self, table: TopicTable, planner: AppendPlanner, front: CommitterFront, lock: threading.Lock | None,
                 append: Callable[[list[PartitionBatch]], Results], on_stages: StagesListener | None = None) -> None:
        self.table, self.planner, self.front = table, planner, front
        self.topic = table.topic
        self._lock = lock  # the topic's lock: pipeline callbacks take it
        self._append = append
        self._on_stages = on_stages
        self._pipeline: deque[StagedGroup] = deque()  # staged groups not yet sent, oldest first
        # Commits in flight, oldest first: our one PUT, or up to MAX_HANDOFFS_IN_FLIGHT handoffs, concluded in order
        self._flights: deque[Launch] = deque()
        self._handed: deque[tuple[Handoff, Future]] = deque()  # handoffs waiting for our next commit
        # Of our commits that carried handoffs, the latest RECENT_BODIES -> the app ids those set
        self._handed_apps: dict[int, frozenset[str]] = {}
        self._nudge_guard = threading.Lock()
        self._nudge_queued = False

    @property
    def enabled(self) -> bool:
        """Whether commits may be pipelined: an object store, commits made directly, a lock to move on under."""
        return not self.table.root.is_local and self.table.direct and self._lock is not None

    def stage(self, batches: list[PartitionBatch]) -> StagedGroup | None:
        """Plan ``batches`` on top of the groups staged before them and start uploading their segments; None
        when they must take the plain path: a local root, a topic not committed directly, a stale snapshot,
        transactions, state errors to look at again, nothing to write.

        When no commit PUT is in flight, every staged group whose uploads are done, in order, goes out in one
        commit; its ``future`` resolves when that commit is concluded. Uploads and PUTs move the pipeline on
        from their own threads, under the topic's lock (:meth:`_advance`).
        """
        after = self._pipeline[-1] if self._pipeline else (
            self._flights[-1].groups[-1] if self._flights and self._flights[-1].groups else None)
        snap = self.table.snapshot
        if (not self.enabled or self.table.stale
                or any(b.transaction is not None or not 0 <= b.partition < snap.partition_count for b in batches)):
            return None
        if self.planner.fenced(snap) is not None:
            return None
        results: Results = [None] * len(batches)
        static_ok = self.planner.validate(snap, batches, results, range(len(batches)))
        plan = self.planner.plan(snap, batches, static_ok, after.plan if after is not None else None)
        if not plan.offsets or plan.state_errors():
            return None  # (a duplicate may be of a group still in flight: answer it once that has landed)
        types, evolution = commit_types(snap, plan.batches(batches))
        if evolution is not None:
            return None  # a commit that widens the table schema is made the plain way
        for i, r in plan.early.items():
            results[i] = r
        append_time = int(time.time() * 1000)
        acked = plan.acknowledgements(batches, append_time, snap.config.log_append_time)
        txns = plan.txns(batches, snap, self.planner.node_id)
        planned_on = after.plan.leo if after is not None else {}  # (leases: expected unchanged, as set)
        expect = {**txns, **{leo_app(p): planned_on[p] if p in planned_on else snap.txn(leo_app(p))
                             for p in plan.offsets}}
        staged = StagedGroup(batches, results, plan, acked, snap.version, txns, expect, after,
                             staged_at=time.monotonic())
        self._pipeline.append(staged)
        for p, items in plan.offsets.items():  # each segment is built on its upload's thread, not under the lock
            upload = uploads().submit(self._write_segment, p, batches, items, snap, append_time, types)
            staged.uploads.append(upload)
            upload.add_done_callback(lambda _, g=staged: g.uploaded_at.append(time.monotonic()))
            upload.add_done_callback(self._nudge_later)
        return staged

    def take(self, handoff: Handoff, done: Future, advance: bool = True) -> None:
        """Carry another front's commit in our next one; ``done`` resolves as :meth:`Committer.accept
        <lakelog.writer.committer.Committer.accept>` says. ``advance=False`` leaves moving the pipeline on to
        a pipeline thread."""
        self._handed.append((handoff, done))
        if advance:
            self._advance()
        else:
            self._nudge_later()

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

    def _write_segment(self, partition: int, batches, items, snap: TopicSnapshot, append_time: int, types=None):
        return write_segment(self.table.root, self.topic, partition,
                             segment_table(batches, items, snap.config, append_time, types),
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
        if (len(self._flights) >= MAX_HANDOFFS_IN_FLIGHT or self._handed or self.table.stale
                or not all(f.forwarded for f in self._flights)):
            return None
        return self.front.address(self._flights[-1].txns)

    def _guarded(self, step, groups: list[StagedGroup], handed: list[tuple[Handoff, Future]]) -> None:
        """Run a pipeline step; if it raises, its groups fail retriably and its handoffs' outcome is unknown (no
        future is left unresolved)."""
        try:
            step()
        except Exception as e:
            log.warning("pipelined commit of %s failed: %s", self.topic, describe(e))
            self.table.stale = True  # look at the log again before the next append
            error = KafkaStorageError(f"committing to {self.topic} failed (retry)")
            for g in groups:
                if not g.future.done():
                    g.fail(error)
            for _, done in handed:
                if not done.done():
                    done.set_exception(error)

    def _launch(self, groups: list[StagedGroup], handed: list[tuple[Handoff, Future]], url: str | None = None) -> None:
        """Send ``groups`` (uploaded, consecutive) and the ``handed`` commits of other fronts that still fit the
        log in one commit PUT (or hand it on: :meth:`_send`). Groups whose plan no longer holds -- what the
        first was planned on did not land as planned, or a commit not ours (or one of ours that carried
        handoffs setting their app ids) landed since -- or whose upload failed are resolved now: a failed
        group with a storage error, the others appended again, in order, the plain way, on what did land.

        ``url``: behind handoffs still in flight (:meth:`_hand_on`), hand the groups to that committer front; what
        they were planned on is checked there. If an upload failed they all fail retriably: appended again now,
        before the handoffs ahead of them landed, they could land first."""
        table = self.table
        if handed and max(h.known_version for h, _ in handed) > table.snapshot.version:
            table.stale = True  # a sender has seen commits we have not: look before judging its handoff
        if groups:
            failures = [g.uploaded() for g in groups]
            if url is not None and any(failures):
                for g in groups:
                    delete_quietly(table.root, self.topic, [a.path for a in g.adds])
                    g.fail(KafkaStorageError(f"writing segments of {self.topic} failed (retry)"))
                return
        if groups and url is None:
            after, base = groups[0].after, groups[0].base
            if after is not None:
                base = after.version if after.landed else -2
            apps = set().union(*(g.txns for g in groups))
            if table.stale or not self._only_handoffs_since(base, apps) or any(failures):
                for g, failure in zip(groups, failures):
                    if failure is None:
                        self._replan([g])
                        continue
                    delete_quietly(table.root, self.topic, [a.path for a in g.adds])
                    log.warning("writing segments of %s failed: %s", self.topic, failure)
                    g.fail(storage_error(failure))
                groups = []
        if handed and table.stale and isinstance(error := table.refresh_or(None), KafkaError):
            for _, done in handed:
                done.set_exception(HandoffRejected(error))
            return
        txns: dict[str, int] = {}
        for g in groups:
            txns.update(g.txns)  # a later group's log end is the partition's
        rows = [row for g in groups for row in g.plan.producer_rows]
        added = [add_action(a) for g in groups for a in g.adds]
        taken = []
        for h, done in handed:
            if (problem := self.front.problem(h, txns)) is not None:
                done.set_exception(HandoffRejected(problem))
                continue
            txns.update(h.txns)
            rows.extend(h.producer_rows)
            added.extend(msgspec.structs.asdict(a) for a in h.adds)
            taken.append((h, done))
        if not groups and not taken:
            return
        commit_id = uuid.uuid4().hex
        meta = commit_meta(rows, commit_id, [h.commit_id for h, _ in taken])
        body, info = commit_body(added, txns, meta)
        if groups:
            groups[0].after = None  # concluded, or in a handoff in flight: let it go
        for g in groups:
            g.launched_at = time.monotonic()
        self._send(Launch(groups, commit_id, table.snapshot.version + 1, added, txns, info, body, handed=taken), url)

    def _only_handoffs_since(self, base: int, apps: set[str]) -> bool:
        """Whether every commit after ``base`` is one of ours that carried only handoffs, none setting ``apps``."""
        version = self.table.snapshot.version
        if base < 0 or base > version:
            return False
        for v in range(base + 1, version + 1):
            carried = self._handed_apps.get(v)
            if carried is None or carried & apps:
                return False
        return True

    def _send(self, flight: Launch, url: str | None = None) -> None:
        """PUT the commit; or, on a front that is not the topic's committer front and carries no handoff itself,
        hand it to that front (``url``: the one :meth:`_hand_on` found) as planned: each app id as the first of
        the groups that sets it expected it."""
        if url is None and not flight.handed and flight.attempt == 0:
            url = self.front.address(flight.txns)
        if url is not None:
            expect: dict[str, int | None] = {}
            for g in flight.groups:
                for app, planned in g.expect.items():
                    expect.setdefault(app, planned)
            flight.forwarded = True
            flight.put = self.front.hand_off(url, flight.commit_id, flight.added, flight.txns,
                                             [row for g in flight.groups for row in g.plan.producer_rows], expect)
        else:
            flight.put = _commits().submit(put_if_absent, self.table.root,
                                           commit_path(f"topics/{self.topic}", flight.version), flight.body,
                                           fsync=False)
        self._flights.append(flight)
        flight.put.add_done_callback(self._nudge_later)

    def _conclude(self, flight: Launch) -> None:
        """Apply a commit whose PUT has answered to the snapshot and resolve its groups and handoffs, as
        :meth:`TopicTable.commit_direct` would: a conflict is looked up by commit id, an unknown outcome too."""
        if flight.forwarded:
            return self._conclude_handoff(flight)
        table = self.table
        error = flight.put.exception()
        if error is None:
            landed = True
            table.landed(flight.version, flight.added, flight.txns, flight.info, flight.body)
            if flight.handed:
                self._handed_apps[flight.version] = frozenset(app for h, _ in flight.handed for app in h.txns)
                while len(self._handed_apps) > RECENT_BODIES:
                    del self._handed_apps[next(iter(self._handed_apps))]
            outcome = True
        elif isinstance(error, CommitConflict):  # the version is taken -- perhaps by our own PUT, retried by the store
            outcome = (table.after_conflict(flight.commit_id, flight.txns, flight.version)
                       if flight.attempt < MAX_COMMIT_RETRIES else table.refresh_or(None))
            if outcome is RETRY:  # the same commit, files and offsets at the next version: nothing re-uploaded
                self._send(replace(flight, version=table.snapshot.version + 1, attempt=flight.attempt + 1, put=None))
                return
            if outcome is None and flight.commit_id not in table.snapshot.recent_commit_ids:
                # another writer's commit set our app ids (or the metadata): nothing of ours landed, and our
                # offsets may be taken; append the plain way on what did land (the handoffs' senders too)
                for _, done in flight.handed:
                    done.set_exception(HandoffRejected(NotLeaderOrFollower(
                        f"another writer's commit to {self.topic} took the offsets planned on")))
                self._replan(flight.groups)
                return
            outcome = outcome or True
            landed = table.snapshot.version == flight.version
        else:  # the PUT's outcome is unknown: look for it by its commit id
            outcome = table.unknown_outcome(error, flight.commit_id)
            landed = table.snapshot.version == flight.version
        # Other fronts' answers first: each has an HTTP response and the sender's own conclusion still to go
        for h, done in flight.handed:
            if outcome is True:
                # the held bodies (bounded), not every version since the sender's: a sender may be far behind
                done.set_result(HandoffAnswer(flight.version, table.checkpointer.held(h.known_version, flight.version)))
            else:  # unknown: the sender looks for its commit id
                done.set_exception(outcome)
        self._resolve(flight, outcome, landed)

    def _resolve(self, flight: Launch, outcome, landed: bool) -> None:
        for g in flight.groups:
            if outcome is True:
                g.version, g.landed = flight.version, landed and not self.table.stale
                if self._on_stages is not None:
                    self._report_stages(g, "handoff" if flight.forwarded else "commit")
                g.future.set_result(acknowledge(g.results, g.acked))
            else:  # it may still land: its files stay (orphans are never read)
                g.fail(outcome)

    def _report_stages(self, g: StagedGroup, last: str) -> None:
        uploaded = max(g.uploaded_at, default=g.staged_at)
        try:
            self._on_stages(self.topic, {"upload": uploaded - g.staged_at, "commit_wait": g.launched_at - uploaded,
                                         last: time.monotonic() - g.launched_at})
        except Exception as e:  # a metrics hook must not fail an acknowledgement
            log.warning("reporting commit stages of %s failed: %s", self.topic, describe(e))

    def _replan(self, groups: list[StagedGroup]) -> None:
        """Groups none of whose commit landed: their files go, and they are appended again the plain way."""
        for g in groups:
            delete_quietly(self.table.root, self.topic, [a.path for a in g.adds])
            g.future.set_result(self._append(g.batches))

    def _conclude_handoff(self, flight: Launch) -> None:
        """A commit handed to the committer front has been answered: catch up to the commit it landed in (from
        the answer, else the store); or, rejected, append again the plain way; or look for it by its id."""
        table = self.table
        error = flight.put.exception()
        if isinstance(error, HandoffRejected):
            log.debug("handoff of a commit to %s rejected: %s", self.topic, error)
            if isinstance(outcome := table.refresh_or(None), KafkaError):
                return self._resolve(flight, outcome, False)
            if flight.commit_id not in table.snapshot.recent_commit_ids:
                return self._replan(flight.groups)
            return self._resolve(flight, True, False)
        if error is not None:
            return self._resolve(flight, table.unknown_outcome(error, flight.commit_id), False)
        answer: HandoffAnswer = flight.put.result()
        self.front.catch_up(answer, flight.commit_id)
        flight.version = answer.version
        self._resolve(flight, True, table.snapshot.version == answer.version)
        table.checkpointer.start(table.snapshot)


@functools.cache
def _pipeline_moves() -> ThreadPoolExecutor:
    """The threads that move pipelines on after an upload or a PUT finished (they wait for topics' locks)."""
    return ThreadPoolExecutor(max_workers=4, thread_name_prefix="lakelog-pipeline")


@functools.cache
def _commits() -> ThreadPoolExecutor:
    """The threads that make pipelined commits' PUTs (shared by all topics; one in flight per topic)."""
    return ThreadPoolExecutor(max_workers=COMMIT_THREADS, thread_name_prefix="lakelog-commit")
