"""The fenced append: validate, assign offsets, write segments, commit once.

One :class:`Committer` appends to one topic. A commit covers every partition with pending data and carries, per
partition, the Delta ``txn`` app id ``lakelog.leo.<P>`` set to the partition's new log end offset. A commit whose
app id was also committed by someone else since our snapshot loses (Delta's conflict rule), so two writers
(threads, processes, machines) can never assign the same offsets: the loser deletes its files, refreshes,
re-validates and retries, or gives up with a retriable error. Producer state rides in the same commit
(``lakelog.producerBatches`` in the commit metadata).

An append goes as Kafka's ``UnifiedLog.append`` does -- prepare, validate, commit -- over these parts, each in a
module of its own:

- :mod:`~lakelog.writer.append_plan`: validation and offset planning (Kafka's ``LogValidator`` and
  ``ProducerAppendInfo``);
- :mod:`~lakelog.writer.table_commit`: the Delta commit, put-if-absent, and unknown outcomes;
- :mod:`~lakelog.writer.commit_pipeline`: group commits pipelined on an object store (:meth:`Committer.stage`);
- :mod:`~lakelog.writer.committer_front`: the hand-off to the topic's committer front when several fronts share
  the root (:meth:`Committer.accept` on that front);
- :mod:`~lakelog.writer.checkpointer`: checkpoints and index storage, off the commit path.

Not thread-safe: callers hold the topic's lock (the one :class:`~lakelog.log.Log` passes in), and so do the
callbacks that move the pipeline on when an upload or a PUT finishes.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from concurrent.futures import Future

from lakelog.errors import KafkaError, NotLeaderOrFollower
from lakelog.schema.record_typing import SchemaLookup
from lakelog.storage.delta_commit import table_metadata
from lakelog.storage.orphan_files import delete_quietly
from lakelog.storage.producer_ids import ProducerRegistry
from lakelog.storage.storage_failure import storage_error, storage_failure
from lakelog.storage.storage_root import StorageRoot
from lakelog.storage.topic_snapshot import TopicSnapshot
from lakelog.writer.append_plan import (AppendPlan, AppendPlanner, Locate, Results, acknowledge, fail,
                                        segment_table)
from lakelog.writer.commit_handoff import Handoff, HandoffRejected
from lakelog.writer.commit_pipeline import CommitPipeline, StagedGroup, StagesListener
from lakelog.writer.committer_front import CommitterFront, Forwarder
from lakelog.writer.records import AppendResult, PartitionBatch
from lakelog.writer.segment_writer import write_segments
from lakelog.writer.table_commit import Outcome, TopicTable, commit_meta
from lakelog.writer.typed_segments import commit_types

__all__ = ["AppendResult", "Committer", "PartitionBatch"]

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 20  # plans of one append, each after a lost commit race, before it answers NOT_LEADER_OR_FOLLOWER


class Committer:
    """Appends batches to one topic table with offset fencing and idempotence.

    ``node_id``: append only to partitions whose lease this node holds (storage/partition_lease.py), naming their
    leaders through ``locate``; ``lock``: the topic's, which pipeline callbacks take; ``forwarder``: several fronts
    share the root, and commits go through the topic's committer front; ``on_stages``: pipelined groups' stage
    times, for metrics; ``schemas``: the Schema Registry, for topics that validate or type their records.
    """

    def __init__(self, root: StorageRoot, topic: str, registry: ProducerRegistry | None = None,
                 node_id: int | None = None, locate: Locate | None = None, lock: threading.Lock | None = None,
                 forwarder: Forwarder | None = None, on_stages: StagesListener | None = None,
                 schemas: SchemaLookup | None = None) -> None:
        self.root = root
        self.topic = topic
        self.table = TopicTable(root, topic)
        self.topic_id = self.table.snapshot.topic_id  # the incarnation this writer appends to
        self.gone = False  # set once the topic was deleted or recreated under this writer: it never commits again
        self.planner = AppendPlanner(topic, self.topic_id, registry or ProducerRegistry(root), node_id, locate,
                                     schemas)
        self.front = CommitterFront(self.table, self.planner, forwarder)
        self.pipeline = CommitPipeline(self.table, self.planner, self.front, lock, self._append, on_stages)

    @property
    def snapshot(self) -> TopicSnapshot:
        """The topic as this writer last applied it (read-only)."""
        return self.table.snapshot

    def committed_snapshot(self, after: TopicSnapshot) -> TopicSnapshot | None:
        """A copy of the snapshot when it is the log as committed up to its version (not stale, the topic not
        gone) and newer than ``after``, of the same incarnation; else None, without copying. Call with the
        topic's lock held."""
        snap = self.table.snapshot
        if self.table.stale or self.gone or snap.version <= after.version or snap.topic_id != after.topic_id:
            return None
        return snap.copy()

    def close(self) -> None:
        """Conclude the pipeline, let a running checkpoint or index store finish, then persist the index."""
        self.pipeline.drain()
        self.table.close()

    def persist(self) -> None:
        """Store the index as it is now, on this thread."""
        self.table.persist()

    def drain(self) -> None:
        """Conclude every staged group and handoff, in order (:meth:`CommitPipeline.drain`)."""
        self.pipeline.drain()

    def stage(self, batches: list[PartitionBatch]) -> StagedGroup | None:
        """Plan ``batches`` on top of the groups staged before them and start uploading their segments; None
        when they must take the plain path (:meth:`append`) (:meth:`CommitPipeline.stage`)."""
        return self.pipeline.stage(batches)

    def accept(self, handoff: Handoff, advance: bool = True) -> Future:
        """Take another front's commit into our next one (topic's lock held): the future resolves with a
        :class:`~lakelog.writer.commit_handoff.HandoffAnswer` once that commit landed, or with
        :class:`HandoffRejected` if it will never land, or another error if its outcome is unknown. Rejected at
        once unless this writer pipelines its commits and takes itself for the topic's committer front (so two
        fronts never wait on each other). ``advance=False`` leaves moving the pipeline on (which may conclude
        commits and read the store) to a pipeline thread: for a caller that must not block."""
        done: Future = Future()
        if not self.pipeline.enabled or not self.front.is_this_front():
            done.set_exception(HandoffRejected(NotLeaderOrFollower(
                f"this front does not make the commits of {self.topic}; commit directly")))
            return done
        self.pipeline.take(handoff, done, advance)
        return done

    def append(self, batches: list[PartitionBatch]) -> list[AppendResult | KafkaError]:
        """Commit ``batches`` in one Delta commit; one result (or error) per batch, in order.

        Errors of one batch (bad input, sequence, epoch) fail only that batch;
        the others commit.  A batch is acknowledged only once its commit succeeded.
        """
        self.pipeline.drain()
        return self._append(batches)

    def _append(self, batches: list[PartitionBatch]) -> list[AppendResult | KafkaError]:
        """Prepare, validate and commit, as often as commit races are lost (up to :data:`MAX_ATTEMPTS`)."""
        table = self.table
        if table.stale:
            try:
                table.refresh()
            except Exception as e:
                return [storage_failure(f"refreshing {self.topic}", e, log)] * len(batches)
        results: Results = [None] * len(batches)
        static_ok = self._validate(batches, results, range(len(batches)))
        validated = table.snapshot.configuration  # replaced, never mutated, when a commit changes the configs
        attempts: dict[str, dict[int, AppendResult]] = {}  # commit id -> what it would acknowledge
        plan: AppendPlan | None = None
        rechecked = False
        for attempt in range(MAX_ATTEMPTS):
            landed = next((cid for cid in attempts if cid in table.snapshot.recent_commit_ids), None)
            if landed is not None:  # an attempt whose outcome looked unknown did commit
                return acknowledge(results, attempts[landed])
            snap = table.snapshot
            if (gone := self.planner.fenced(snap)) is not None:
                self.gone = True
                return fail(results, {0: [(i, 0) for i in static_ok if results[i] is None]}, gone)
            if snap.configuration is not validated:  # a concurrent alter (any process) landed: check again
                static_ok = self._validate(batches, results, [i for i in static_ok if results[i] is None])
                snap, validated = table.snapshot, table.snapshot.configuration
            pending = [i for i in static_ok if results[i] is None]
            plan = self.planner.plan(snap, batches, pending)
            if not rechecked and plan.state_errors():
                # our view of producer state may predate another writer's commit: look again once
                rechecked = True
                outcome = table.refresh_or(None)
                if isinstance(outcome, KafkaError):
                    return fail(results, {0: [(i, 0) for i in pending]}, outcome)
                continue
            for i, r in plan.early.items():
                results[i] = r
            if not plan.offsets:
                return results  # type: ignore[return-value]
            append_time = int(time.time() * 1000)
            commit_id = uuid.uuid4().hex
            types, evolution = commit_types(snap, plan.batches(batches))
            adds, failure = write_segments(
                self.root, self.topic, {partition: segment_table(batches, items, snap.config, append_time, types)
                                        for partition, items in plan.offsets.items()}, snap.config.segment_codec)
            if failure is not None:
                delete_quietly(self.root, self.topic, [a.path for a in adds])
                log.warning("writing segments of %s failed: %s", self.topic, failure)
                return fail(results, plan.offsets, storage_error(failure))  # no paths for clients
            attempts[commit_id] = plan.acknowledgements(batches, append_time, snap.config.log_append_time)
            outcome = self._commit(adds, plan.txns(batches, snap, self.planner.node_id), plan.producer_rows,
                                   commit_id, evolution)
            if outcome is True or commit_id in table.snapshot.recent_commit_ids:
                return acknowledge(results, attempts[commit_id])
            if isinstance(outcome, KafkaError):
                # The attempt's outcome is unknown or unconfirmed (a lost response, a stalled PUT that may
                # still land): its files may yet be referenced, so they stay (orphans are never read).
                return fail(results, plan.offsets, outcome)
            delete_quietly(self.root, self.topic, [a.path for a in adds])  # lost a conflict: can never land
            time.sleep(min(0.002 * (2 ** attempt), 0.2) * (0.5 + uuid.uuid4().int % 1000 / 1000))
        offsets = plan.offsets if plan is not None else {}
        return fail(results, offsets, NotLeaderOrFollower(
            f"gave up appending to {self.topic} partitions {sorted(offsets)} after {MAX_ATTEMPTS} commit conflicts"))

    def _validate(self, batches: list[PartitionBatch], results: Results, indices) -> list[int]:
        """:meth:`AppendPlanner.validate` on the latest snapshot: refreshed first if a batch names a partition
        it does not know (partitions may have been added since)."""
        if any(not 0 <= batches[i].partition < self.table.snapshot.partition_count for i in indices):
            self.table.refresh_or(None)
        return self.planner.validate(self.table.snapshot, batches, results, indices)

    def _commit(self, adds, txns: dict[str, int], producer_rows, commit_id: str,
                evolution: dict | None = None) -> Outcome:
        """True when committed; None to retry after a conflict; an error to give up. Through the committer
        front when another front makes the topic's commits, unless it widens the table schema (``evolution``:
        the ``metaData`` fields of :func:`~lakelog.writer.typed_segments.commit_types`), which this writer
        commits itself."""
        meta = commit_meta(producer_rows, commit_id)
        metadata = None if evolution is None else {**table_metadata(self.root, self.topic), **evolution,
                                                   "configuration": dict(self.snapshot.configuration)}
        if not self.table.direct:
            return self.table.commit_with_delta_rs(adds, txns, meta, metadata)
        if metadata is None and (url := self.front.address(txns)) is not None:
            return self.front.commit_handed(url, adds, txns, producer_rows, meta)
        return self.table.commit_direct(adds, txns, meta, metadata)
