"""The library's entry point: a :class:`Log` is one storage root with all its topics.

    from lakelog import Log
    log = Log("./lakelog-data")              # or "s3://bucket/prefix"
    log.create_topic("orders", partitions=3)
    log.append("orders", [{"key": b"k", "value": b"v"}])
    log.fetch("orders", partition=0, offset=0).records

Thread-safe: appends to one topic are serialised through that topic's
:class:`~lakelog.writer.committer.Committer` (one lock per topic); different
topics and reads proceed in parallel.  Several processes may share a root: the
commit protocol fences them (see :mod:`lakelog.writer.committer`).  Several fronts sharing a root give their Log
what it works with -- a :class:`LeaseView` of the fronts and their partition leases, a
:class:`~lakelog.writer.committer_front.Forwarder` for commits handed to a topic's committer front -- when they
build it.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from concurrent.futures import Future
from typing import Callable, Mapping, Protocol, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from lakelog.storage.catalog import Catalog, TopicDescription, altered_configuration, describe_snapshot
from lakelog.errors import KafkaError, RequestTimedOut, UnknownTopicOrPartition
from lakelog.writer.partitioner import StickyPartitioner, partition_batches
from lakelog.storage.orphan_files import delete_quietly
from lakelog.storage.producer_ids import ProducerIdentity, ProducerRegistry
from lakelog.reader.log_reader import FetchResult, fetch, offset_for_timestamp, resolve_offset
from lakelog.schema_registry.schema_registry import SchemaRegistry
from lakelog.storage.segment_index import Segment
from lakelog.storage.partition_lease import Lease, check_node_id, lease_app, unpack
from lakelog.storage.storage_root import StorageRoot
from lakelog.storage.topic_config import ConfigOp
from lakelog.storage.topic_name import is_internal, validate_topic_name
from lakelog.storage.delta_commit import CommitConflict, put_if_absent, table_metadata
from lakelog.storage.delta_log import commit_path, encode_actions, file_exists
from lakelog.storage.topic_snapshot import COMMIT_ID_KEY, OPERATION_KEY, TopicSnapshot, advance, lso_app
from lakelog.writer.accumulator import DEFAULT_BUFFER_MEMORY, OBJECT_STORE_BUFFER_MEMORY, RecordAccumulator
from lakelog.writer.commit_pipeline import StagesListener
from lakelog.writer.committer import Committer
from lakelog.writer.committer_front import Forwarder
from lakelog.writer.records import AppendResult, PartitionBatch, normalize_records


#: How long an admin commit (alter, delete-records) keeps re-planning after other processes' commits took its
#: version, before it answers ``REQUEST_TIMED_OUT`` (Kafka's admin requests time out after 30 s too).
ADMIN_COMMIT_TIMEOUT_S = 30.0


class LeaseView(Protocol):
    """This front's view of the fronts sharing the root and their partition leases (lakelog/cluster/)."""

    def locate(self, node_id: int) -> tuple[str, str | None]:
        """How errors name front ``node_id`` (with its addresses while it is live), and its HTTP URL or None."""

    def new_partitions(self, log: "Log", topic: str) -> None:
        """``log`` just created ``topic`` or added partitions to it: take this front's share of their leases
        before the call returns (as Kafka's controller elects a new topic's leaders as it creates it)."""


class Log:
    """All topics under one storage root."""

    def __init__(self, root: str | StorageRoot | None = None, *, storage_options: Mapping[str, str] | None = None,
                 node_id: int | None = None, leases: LeaseView | None = None, forwarder: Forwarder | None = None,
                 on_commit_stages: StagesListener | None = None):
        """``node_id``: this process's Kafka node id when several fronts share the root; it then appends only
        to partitions whose lease it holds (:meth:`take_lease`, storage/partition_lease.py), as ``leases``
        deals them, and hands its commits to each topic's committer front through ``forwarder`` (None: a lone
        writer).

        ``on_commit_stages(topic, {stage: seconds})``, for metrics: this Log's accumulators (:meth:`accumulator`)
        report each group's wait to be taken ("queue"); each pipelined group commit that landed (object stores)
        how long its segments took to upload ("upload"), it then waited for the commit ahead ("commit_wait"),
        and its commit PUT ("commit") or the round trip to the committer front ("handoff") took."""
        self.root = StorageRoot.resolve(root, storage_options)
        self.node_id = None if node_id is None else check_node_id(node_id)
        self._leases = leases
        self._forwarder = forwarder
        self._on_commit_stages = on_commit_stages
        self.catalog = Catalog(self.root)
        self.registry = ProducerRegistry(self.root)
        #: the Schema Registry (subjects, versions, ids in ``_schemas``), which typed topics validate against
        self.schemas = SchemaRegistry(self)
        self.sticky = StickyPartitioner()
        self._lock = threading.Lock()
        self._committers: dict[str, tuple[threading.Lock, Committer | None]] = {}
        self._snapshots: dict[str, TopicSnapshot] = {}

    # -- admin ------------------------------------------------------------------------------
    def create_topic(self, name: str, partitions: int = 1, configs: Mapping[str, object] | None = None) -> TopicDescription:
        """Create a topic (a new incarnation, with a new topic id, if the name was deleted)."""
        description = self.catalog.create(name, partitions, dict(configs or {}))
        self._forget(name)
        if self._leases is not None:
            self._leases.new_partitions(self, name)
        return description

    def list_topics(self, include_internal: bool = False) -> list[str]:
        return self.catalog.list(include_internal, exists=self._exists)

    def _exists(self, name: str) -> bool:
        """Whether the topic exists, from this Log's cached snapshot when it has one (advanced incrementally)."""
        try:
            self.snapshot(name)
            return True
        except UnknownTopicOrPartition:
            return False

    def describe_topic(self, name: str) -> TopicDescription:
        return describe_snapshot(self.snapshot(name))

    def alter_topic(self, name: str, configs: Mapping[str, object] | None = None,
                    partitions: int | None = None, ops: Sequence[ConfigOp] = ()) -> TopicDescription:
        """Set configs (None: back to the default), apply IncrementalAlterConfigs ``ops`` and/or increase the
        partition count (``INVALID_PARTITIONS`` on a decrease).

        An open writer sees the change at its next commit (it conflicts with this one) and validates again.
        """
        configs = dict(configs) if configs is not None else None
        Catalog.plan_alter(self.snapshot(name), configs, partitions, ops)  # refuse bad input before storage work
        base = table_metadata(self.root, name)

        def actions(snap: TopicSnapshot) -> list[dict]:
            props = Catalog.plan_alter(snap, configs, partitions, ops)
            configuration = altered_configuration(snap.configuration, props)
            schema = {"schemaString": snap.schema_string} if snap.schema_string else {}  # as typed columns widened it
            return [{"metaData": {**base, **schema, "configuration": configuration}}] if props else []

        description = describe_snapshot(self._admin_commit(name, "alter", "SET TBLPROPERTIES", actions))
        if partitions is not None and self._leases is not None:
            self._leases.new_partitions(self, name)
        return description

    def delete_topic(self, name: str) -> None:
        """Delete a topic: one commit removes every segment and marks the table deleted, then the segment files
        go. The table's Delta log stays, so a writer that still holds the topic loses its next commit's
        version to the delete and is fenced (``UNKNOWN_TOPIC_OR_PARTITION``, or ``UNKNOWN_TOPIC_ID`` once
        the name is recreated), and a recreated topic continues the log under a new topic id."""
        self.snapshot(name)  # UNKNOWN_TOPIC_OR_PARTITION before anything is read or written
        base = table_metadata(self.root, name)
        removed: list[str] = []

        def actions(snap: TopicSnapshot) -> list[dict]:
            removed[:] = [seg.path for seg in snap.index]
            return Catalog.plan_delete(snap, base)

        self._admin_commit(name, "delete", "DELETE", actions, expect_gone=True)
        delete_quietly(self.root, name, removed)
        self._forget(name)

    def _forget(self, name: str) -> None:
        with self._lock:
            self._committers.pop(name, None)
            self._snapshots.pop(name, None)

    def snapshot(self, topic: str) -> TopicSnapshot:
        """The topic's latest committed state, advanced incrementally from the last one seen.

        The returned snapshot is shared and must be treated as read-only (take
        :meth:`TopicSnapshot.copy` to modify one).  When nothing was committed
        since the cached version, this costs two or three existence probes (a
        HEAD each on S3): the next commit file, then the table itself (a topic
        deleted by another process must not keep answering from the cache).
        """
        with self._lock:
            cached = self._snapshots.get(topic)
        if cached is None:
            snap = self.catalog.snapshot(topic)
        else:
            # This process's writer knows its own commits: start from its state rather than read them back
            # (on an object store a GET each, every time the front's metadata cache refreshes).
            base = self._writer_snapshot(topic, cached)
            if self._has_commit(topic, (base or cached).version + 1):
                snap = advance(self.root, base or cached.copy())
            elif base is not None:
                snap = base
            elif cached.version >= 0 and not self.catalog.table_exists(topic):  # its files removed by hand
                self._forget(topic)
                raise UnknownTopicOrPartition(f"topic {topic} does not exist under {self.root.uri}")
            else:
                return cached
            if snap.deleted:  # deleted since: a later create starts from a fresh snapshot of the new incarnation
                with self._lock:
                    self._snapshots.pop(topic, None)
                raise UnknownTopicOrPartition(f"topic {topic} does not exist under {self.root.uri}")
        with self._lock:
            current = self._snapshots.get(topic)
            if current is None or current.version <= snap.version:
                self._snapshots[topic] = snap
        return snap

    def _writer_snapshot(self, topic: str, cached: TopicSnapshot) -> TopicSnapshot | None:
        """A copy of this process's writer's snapshot of ``topic`` when it is ahead of ``cached`` (same
        incarnation) and the writer is not committing right now (no waiting for its lock); else None."""
        with self._lock:
            lock, committer = self._committers.get(topic, (None, None))
        if committer is None or not lock.acquire(blocking=False):
            return None
        try:
            return committer.committed_snapshot(after=cached)
        finally:
            lock.release()

    def _has_commit(self, topic: str, version: int) -> bool:
        return file_exists(self.root, self.root.path_for(commit_path(f"topics/{topic}", version)))

    # -- produce ------------------------------------------------------------------------------
    def init_producer(self, transactional_id: str | None = None) -> ProducerIdentity:
        """Kafka's InitProducerId: a fresh id, or a transactional id's id with its epoch bumped."""
        return self.registry.init_producer(transactional_id)

    def _committer(self, topic: str) -> tuple[threading.Lock, Committer | None]:
        with self._lock:
            entry = self._committers.get(topic)
            if entry is None:
                entry = self._committers[topic] = (threading.Lock(), None)
        return entry

    def append_batches(self, topic: str, batches: list[PartitionBatch]) -> list[AppendResult | KafkaError]:
        """Commit per-partition batches in one Delta commit; one result or error per batch."""
        lock, _ = self._committer(topic)
        with lock:
            return self._append_locked(topic, lock, batches)

    def open_writer(self, topic: str) -> bool:
        """Open the topic's writer now rather than at its first append; False if it was open already. Opening
        reads the table (its snapshot, the Delta log since the checkpoint), several round trips at object-store
        latency, which a front spends when it comes to lead a partition (as a Kafka broker loads the logs it
        leads) rather than in a producer's first request (docs/architecture.md, "Several fronts").
        """
        lock, committer = self._committer(topic)
        if committer is not None:
            return False
        with lock:
            opened = self._committers[topic][1] is None
            self._open_committer(topic, lock)
        return opened

    def _open_committer(self, topic: str, lock: threading.Lock) -> Committer:
        """The topic's committer, created on first use (call with ``lock``, the topic's, held)."""
        committer = self._committers[topic][1]
        if committer is None:
            # Internal topics (__consumer_offsets) are not leased: each group's coordinator front writes them.
            leased = not is_internal(topic)
            committer = Committer(self.root, topic, self.registry, self.node_id if leased else None,
                                  self._leases.locate if self._leases is not None else None, lock,
                                  self._forwarder if leased else None, on_stages=self._on_commit_stages,
                                  schemas=self.schemas)
            with self._lock:
                self._committers[topic] = (lock, committer)
        return committer

    def _append_locked(self, topic: str, lock: threading.Lock, batches: list[PartitionBatch]):
        committer = self._open_committer(topic, lock)
        results = committer.append(batches)
        if committer.gone:  # the topic was deleted or recreated under it: the next append starts afresh
            with self._lock:
                self._committers[topic] = (lock, None)
                self._snapshots.pop(topic, None)
        return results

    def accept_handoff(self, topic: str, handoff) -> Future:
        """Another front's commit to ``topic``, to make in our next one (:meth:`Committer.accept`)."""
        lock, _ = self._committer(validate_topic_name(topic))
        with lock:
            return self._open_committer(topic, lock).accept(handoff)

    def try_accept_handoff(self, topic: str, handoff) -> Future | None:
        """:meth:`accept_handoff` when that needs no wait -- the topic's writer is open and its lock free -- else
        None, and nothing done. Never blocks: for the event loop."""
        with self._lock:
            lock, committer = self._committers.get(topic, (None, None))
        if committer is None or not lock.acquire(blocking=False):
            return None
        try:
            return committer.accept(handoff, advance=False)
        finally:
            lock.release()

    def append_pipelined(self, topic: str, batches: list[PartitionBatch]
                         ) -> "tuple[Future[list[AppendResult | KafkaError]], list[Future]]":
        """:meth:`append_batches`, pipelined on object stores: returns once ``batches`` are planned on top of the
        groups staged before them and their segments' uploads have started, while the groups before them may
        still be uploading or committing: (a future that resolves when their commit has landed, or failed, in
        commit order; their uploads' futures). Elsewhere (local roots, transactions, anything unusual) it is
        :meth:`append_batches`, with a resolved future and no uploads."""
        lock, _ = self._committer(topic)
        with lock:
            committer = self._open_committer(topic, lock)
            staged = committer.stage(batches)
            if staged is None:
                done: Future = Future()
                done.set_result(self._append_locked(topic, lock, batches))
                return done, []
        return staged.future, staged.uploads

    def split_by_partition(self, topic: str, records, partition: int | None = None,
                           num_partitions: int | None = None, *, explicit: list | None = None,
                           switch_bytes: int | None = None) -> list[PartitionBatch]:
        """Partition records Kafka's way: ``partition`` for all, else :func:`partition_batches`."""
        table = normalize_records(records)
        if partition is not None:  # the committer checks it exists: no snapshot needed here
            return [PartitionBatch(int(partition), table)]
        n = num_partitions if num_partitions is not None else self.snapshot(topic).partition_count
        return partition_batches(self.sticky, topic, table, n, explicit=explicit, switch_bytes=switch_bytes)

    def append(self, topic: str, records, *, partition: int | None = None) -> list[AppendResult]:
        """Append records (Arrow table or list of dicts) and wait for the commit; raises the first error."""
        batches = self.split_by_partition(topic, records, partition)
        results = self.append_batches(topic, batches)
        for r in results:
            if isinstance(r, KafkaError):
                raise r
        return results  # type: ignore[return-value]

    def accumulator(self, **kwargs) -> RecordAccumulator:
        """A group-commit accumulator over this log (``linger_ms``, ``batch_size``, ``buffer_memory``,
        ``max_commit_bytes``). On an object store ``buffer_memory`` defaults to
        :data:`OBJECT_STORE_BUFFER_MEMORY` and a commit may carry half of it: a commit costs about two round
        trips whatever its size, so the bytes in flight, not the commit count, set the throughput, and the
        bytes a commit gathers set its segments' size (PUTs per GB; docs/storage.md)."""
        if kwargs.get("buffer_memory") is None:
            kwargs["buffer_memory"] = DEFAULT_BUFFER_MEMORY if self.root.is_local else OBJECT_STORE_BUFFER_MEMORY
        if not self.root.is_local and kwargs.get("max_commit_bytes") is None:
            kwargs["max_commit_bytes"] = kwargs["buffer_memory"] // 2
        kwargs.setdefault("on_stages", self._on_commit_stages)
        # LAKELOG_PIPELINE_COMMITS=0: one group commit at a time (fewer, larger objects; see docs/storage.md)
        pipelined = os.environ.get("LAKELOG_PIPELINE_COMMITS", "1") != "0"
        return RecordAccumulator(self.append_batches, append_pipelined=self.append_pipelined if pipelined else None,
                                 **kwargs)

    def delete_records(self, topic: str, partition: int, before_offset: int) -> int:
        """Kafka's DeleteRecords: move the log start offset up to ``before_offset``; returns the new one.

        ``-1`` means the high watermark.  Segments wholly below it are removed by
        the next retention run; reads below it fail with ``OFFSET_OUT_OF_RANGE`` at once.  As in Kafka, a topic
        whose ``cleanup.policy`` lacks ``delete`` (compact only) refuses it with ``POLICY_VIOLATION``.
        """
        from lakelog.errors import OffsetOutOfRange, PolicyViolation

        def actions(snap: TopicSnapshot) -> list[dict]:
            if not 0 <= partition < snap.partition_count:
                raise UnknownTopicOrPartition(f"partition {partition} of topic {topic} does not exist")
            if "delete" not in snap.config.cleanup_policy:
                raise PolicyViolation(f"Records of partition {topic}-{partition} can not be deleted due to the "
                                      f"configured policy")
            hw = snap.high_watermark(partition)
            target = hw if before_offset == -1 else before_offset
            if target < 0 or target > hw:
                raise OffsetOutOfRange(f"delete-records offset {before_offset} for topic {topic} partition "
                                       f"{partition} is outside [0, high watermark {hw}]")
            if target <= snap.log_start_offset(partition):
                return []
            return [{"txn": {"appId": lso_app(partition), "version": target, "lastUpdated": int(time.time() * 1000)}}]

        return self._admin_commit(topic, "delete-records", "WRITE", actions).log_start_offset(partition)

    def lease(self, topic: str, partition: int) -> Lease | None:
        """The partition's lease as of the latest commit (None: never taken)."""
        return unpack(self.snapshot(topic).txn(lease_app(partition)))

    def take_lease(self, topic: str, partition: int) -> Lease:
        """Take the partition's lease for this node (``node_id``) at the next epoch; the holder's next append is
        fenced.  Returns the lease held afterwards (unchanged if this node already holds it)."""
        return self.take_leases(topic, [partition])[partition]

    def take_leases(self, topic: str, partitions: Sequence[int]) -> dict[int, Lease]:
        """:meth:`take_lease` for several partitions of one topic in one commit (one PUT, one wait for this
        process's appends, however many partitions a front joining or outliving another takes)."""
        if self.node_id is None:
            raise ValueError("take_lease needs a Log with a node_id")

        def actions(snap: TopicSnapshot) -> list[dict]:
            out = []
            for partition in dict.fromkeys(partitions):  # one txn action per app id in a commit
                if not 0 <= partition < snap.partition_count:
                    raise UnknownTopicOrPartition(f"partition {partition} of topic {topic} does not exist")
                held = unpack(snap.txn(lease_app(partition)))
                if held is not None and held.node_id == self.node_id:
                    continue
                taken = held.next(self.node_id) if held else Lease(0, self.node_id)
                out.append({"txn": {"appId": lease_app(partition), "version": taken.pack(),
                                    "lastUpdated": int(time.time() * 1000)}})
            return out

        after = self._admin_commit(topic, "lease", "WRITE", actions)
        return {p: unpack(after.txn(lease_app(p))) for p in partitions}

    def _admin_commit(self, topic: str, operation: str, delta_operation: str,
                      actions: Callable[[TopicSnapshot], list[dict]], *, expect_gone: bool = False) -> TopicSnapshot:
        """Commit ``actions(snapshot)`` on the topic's latest snapshot; the snapshot after it.

        The commit is the next ``_delta_log`` file, written put-if-absent like an append's, while this process's
        appends to the topic wait (the committer's lock), so they cannot take its version; another process's
        commit can, and then the actions are planned again on the newer snapshot, for up to
        :data:`ADMIN_COMMIT_TIMEOUT_S`. The snapshot is advanced by reading the new commit files, never by a
        listing (a listing under concurrent commits can show a false gap). Empty actions commit nothing.
        """
        lock, _ = self._committer(topic)
        deadline = time.monotonic() + ADMIN_COMMIT_TIMEOUT_S
        with lock:
            while True:
                snap = self.snapshot(topic)
                planned = actions(snap)
                if not planned:
                    return snap
                info = {"timestamp": int(time.time() * 1000), "operation": delta_operation,
                        "clientVersion": "lakelog", OPERATION_KEY: operation, COMMIT_ID_KEY: uuid.uuid4().hex}
                try:
                    put_if_absent(self.root, commit_path(f"topics/{topic}", snap.version + 1),
                                  encode_actions([{"commitInfo": info}, *planned]))
                except CommitConflict:
                    if time.monotonic() > deadline:
                        raise RequestTimedOut(f"{operation} on {topic} lost to other writers' commits for "
                                              f"{ADMIN_COMMIT_TIMEOUT_S:.0f} s; retry") from None
                    continue
                return snap if expect_gone else self.snapshot(topic)

    # -- consume ------------------------------------------------------------------------------
    def fetch(self, topic: str, partition: int, offset: int, *, max_records: int | None = None,
              max_bytes: int | None = None, record_overhead: int = 0) -> FetchResult:
        return fetch(self.root, self.snapshot(topic), partition, offset, max_records=max_records, max_bytes=max_bytes,
                     record_overhead=record_overhead)

    def read(self, topic: str, partition: int, start: int | str = "earliest", end: int | str = "latest") -> pa.Table:
        """Every committed record of a partition with start <= offset < end."""
        snap = self.snapshot(topic)
        lo = resolve_offset(self.root, snap, partition, start) if isinstance(start, str) else start
        hi = resolve_offset(self.root, snap, partition, end) if isinstance(end, str) else end
        tables = []
        offset = lo
        while offset < hi:
            res = fetch(self.root, snap, partition, offset)
            if not res.records.num_rows:
                break
            tables.append(res.records.filter(pc.less(res.records.column("offset"), hi)))
            offset = res.next_offset
        from lakelog.storage.record_schema import FILE_SCHEMA

        return pa.concat_tables(tables) if tables else FILE_SCHEMA.empty_table()

    def list_offsets(self, topic: str, spec: int | str) -> dict[int, int]:
        """Per partition: ``earliest``, ``latest`` or the first offset with timestamp >= ``spec`` ms."""
        snap = self.snapshot(topic)
        return {p: resolve_offset(self.root, snap, p, spec) for p in range(snap.partition_count)}

    def offsets_for_times(self, topic: str, timestamps: Mapping[int, int]) -> dict[int, int | None]:
        snap = self.snapshot(topic)
        return {p: offset_for_timestamp(self.root, snap, p, ts) for p, ts in timestamps.items()}

    def segments(self, topic: str, partition: int) -> list[Segment]:
        snap = self.snapshot(topic)
        from lakelog.reader.log_reader import check_partition

        check_partition(snap, partition)
        return snap.index.segments(partition)

    def close(self) -> None:
        """Persist every open writer's index (a cache; nothing is lost without it)."""
        with self._lock:
            committers = [(lock, c) for lock, c in self._committers.values() if c is not None]
        for lock, c in committers:
            with lock:  # its pipelined commits move on under this lock
                c.close()

