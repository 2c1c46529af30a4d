"""Offset planning and validation for one group commit: Kafka's ``LogValidator`` and ``ProducerAppendInfo``.

A group of :class:`~lakelog.writer.records.PartitionBatch` is checked as Kafka's ``UnifiedLog.append`` checks a
batch, in two steps. :meth:`AppendPlanner.validate` checks each batch's records against the topic (the partition
exists, sizes, headers, keys, timestamps: ``analyzeAndValidateRecords``). :meth:`AppendPlanner.plan` then checks each
one's producer state and its partition's leadership and assigns offsets to those that pass, on top of the snapshot or
of a group still in flight (``analyzeAndValidateProducerState``, ``validateMessagesAndAssignOffsets``). The
:class:`AppendPlan` it returns holds what the commit needs: each partition's batches with their base offsets, the new
log ends, the producer-state rows, and the answers known before anything is written (duplicates and errors).
:func:`segment_table` lays a partition's planned batches out as its segment's columns.

Nothing here writes; the producer registry is asked about epochs.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakelog.errors import (InvalidProducerEpoch, KafkaError, NotLeaderOrFollower, OutOfOrderSequenceNumber,
                            ProducerFenced, UnknownTopicId, UnknownTopicOrPartition)
from lakelog.storage.partition_lease import lease_app, unpack
from lakelog.storage.producer_ids import ProducerRegistry
from lakelog.schema.record_typing import SchemaLookup
from lakelog.storage.producer_state import AppendInfo, BatchMetadata, last_sequence
from lakelog.storage.record_schema import CREATE_TIME, FILE_SCHEMA, LOG_APPEND_TIME
from lakelog.storage.topic_config import TopicConfig
from lakelog.storage.topic_snapshot import TopicSnapshot, leo_app
from lakelog.writer.records import AppendResult, PartitionBatch, validate_records
from lakelog.writer.typed_segments import type_batches, with_typed_columns

#: Errors that a snapshot older than another writer's commit can cause (producer state, a lease taken since):
#: the plan is made again once on a fresh snapshot before they are answered.
STATE_ERRORS = (OutOfOrderSequenceNumber, InvalidProducerEpoch, ProducerFenced, NotLeaderOrFollower)

#: node id -> (how errors name that front, with its addresses; its HTTP URL or None)
Locate = Callable[[int], tuple[str, str | None]]
#: One result per batch of a group, filled in as it is known.
Results = list[AppendResult | KafkaError | None]


def locate_unknown(node: int) -> tuple[str, str | None]:
    """How errors name a front when nothing more is known of it."""
    return f"node {node}", None


@dataclass
class AppendPlan:
    """A group's batches that passed, with their offsets (Kafka's ``LogAppendInfo`` for a whole group)."""

    offsets: dict[int, list[tuple[int, int]]]  # partition -> [(batch index, base offset)], in batch order
    leo: dict[int, int]  # every partition's log end once this group (and those it was planned on) land
    info: AppendInfo  # producer state with this group's batches (and those it was planned on) recorded
    producer_rows: list[list[int]]  # BatchMetadata.to_row() of this group's idempotent batches
    early: dict[int, AppendResult | KafkaError]  # batch index -> its answer, known before any write

    def state_errors(self) -> bool:
        """Whether an early answer may differ on a fresher snapshot (:data:`STATE_ERRORS`)."""
        return any(isinstance(r, STATE_ERRORS) for r in self.early.values())

    def batches(self, batches: Sequence[PartitionBatch]) -> list[PartitionBatch]:
        """The planned batches, partition by partition."""
        return [batches[i] for items in self.offsets.values() for i, _ in items]

    def acknowledgements(self, batches: Sequence[PartitionBatch], append_time: int,
                         log_append_time: bool) -> dict[int, AppendResult]:
        """Batch index -> its result, for when the commit lands."""
        return {i: AppendResult(partition, base, batches[i].records.num_rows, append_time if log_append_time else -1)
                for partition, items in self.offsets.items() for i, base in items}

    def txns(self, batches: Sequence[PartitionBatch], snap: TopicSnapshot, node_id: int | None) -> dict[str, int]:
        """The Delta ``txn`` app ids the commit sets: each partition's new log end (``lakelog.leo.<P>``), each
        committing transaction's marker, and, on a node holding leases, its leases again, unchanged (a takeover
        since the snapshot then conflicts with the commit)."""
        txns = {leo_app(p): self.leo[p] for p in self.offsets}
        txns.update(batches[i].transaction for items in self.offsets.values() for i, _ in items
                    if batches[i].transaction is not None)
        if node_id is not None:
            txns.update({lease_app(p): snap.txn(lease_app(p)) for p in self.offsets
                         if holds_lease(snap, p, node_id)})
        return txns


class AppendPlanner:
    """Validates and plans a topic's groups for one writer (its ``node_id`` when several fronts share the root)."""

    def __init__(self, topic: str, topic_id: str | None, registry: ProducerRegistry, node_id: int | None = None,
                 locate: Locate | None = None, schemas: SchemaLookup | None = None) -> None:
        self.topic = topic
        self.topic_id = topic_id  # the incarnation this writer appends to
        self.registry = registry
        self.node_id = node_id  # set: plan only batches of partitions whose lease this node holds
        self.locate = locate or locate_unknown
        self.schemas = schemas  # the Schema Registry, for topics that validate or type their records

    def fenced(self, snap: TopicSnapshot) -> KafkaError | None:
        """Kafka's answer to a writer whose topic was deleted (and perhaps recreated) since it started."""
        if snap.deleted:
            return UnknownTopicOrPartition(f"topic {self.topic} was deleted")
        if snap.topic_id != self.topic_id:
            return UnknownTopicId(f"topic {self.topic} was deleted and recreated (topic id {snap.topic_id}); "
                                  f"this writer held topic id {self.topic_id}")
        return None

    def validate(self, snap: TopicSnapshot, batches: Sequence[PartitionBatch], results: Results,
                 indices: Sequence[int]) -> list[int]:
        """Check the records of ``batches[indices]`` against the topic, and type them where it validates them
        against the Schema Registry (each gets ``typed``); the indices that pass (the others' errors go to
        ``results``)."""
        ok = []
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
        return type_batches(self.topic, snap, self.schemas, batches, results, ok)

    def plan(self, snap: TopicSnapshot, batches: Sequence[PartitionBatch], pending: Sequence[int],
             after: AppendPlan | None = None) -> AppendPlan:
        """Check producer state and leadership of ``batches[pending]`` and assign offsets to those that pass, on
        ``snap`` or on top of ``after`` (a group in flight: its producer state, which this plan records into, and
        its log ends)."""
        info = after.info if after is not None else snap.producers.begin()
        offsets: dict[int, list[tuple[int, int]]] = {}
        leo: dict[int, int] = dict(after.leo) if after is not None else {}
        producer_rows: list[list[int]] = []
        early: dict[int, AppendResult | KafkaError] = {}
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
                        early[i] = AppendResult(p, dup.first_offset, dup.last_offset - dup.first_offset + 1,
                                                duplicate=True)
                        continue
            except KafkaError as e:
                early[i] = e
                continue
            if b.transaction is not None:
                done = snap.txn(b.transaction[0])
                if done is not None and done >= b.transaction[1]:
                    early[i] = AppendResult(p, -1, n, duplicate=True)
                    continue
            # A transaction's commit is applied by its coordinator, which need not lead the partition: the
            # offsets' fencing (lakelog.leo.<P>) keeps it safe beside the leader's appends.
            if self.node_id is not None and b.transaction is None and (error := self._not_leader(snap, p)):
                early[i] = error
                continue
            base = leo.get(p, snap.high_watermark(p))
            leo[p] = base + n
            offsets.setdefault(p, []).append((i, base))
            if b.idempotent:
                meta = BatchMetadata(p, b.producer_id, b.producer_epoch, b.base_sequence,
                                     last_sequence(b.base_sequence, n), base, base + n - 1, now)
                info.record(meta)
                producer_rows.append(meta.to_row())
        return AppendPlan(offsets, leo, info, producer_rows, early)

    def _not_leader(self, snap: TopicSnapshot, partition: int) -> NotLeaderOrFollower | None:
        lease = unpack(snap.txn(lease_app(partition)))
        if lease is not None and lease.node_id == self.node_id:
            return None
        leader, url = self.locate(lease.node_id) if lease else (None, None)
        return NotLeaderOrFollower(
            f"this front (node {self.node_id}) does not hold the lease of {self.topic} partition {partition}"
            + (f"; {leader} does" if lease else ""), lease.node_id if lease else -1, url)


def holds_lease(snap: TopicSnapshot, partition: int, node_id: int) -> bool:
    lease = unpack(snap.txn(lease_app(partition)))
    return lease is not None and lease.node_id == node_id


def segment_table(batches: Sequence[PartitionBatch], items: list[tuple[int, int]], config: TopicConfig,
                  append_time_ms: int, types: dict[str, pa.DataType] | None = None) -> pa.Table:
    """A partition's planned batches (``items``: (batch index, base offset)) as its segment's columns
    (:data:`FILE_SCHEMA`): offsets assigned, the append time as every timestamp under LogAppendTime (else as
    the missing ones), each record's sequence for idempotent batches; then the typed columns fitted to
    ``types`` (:func:`~lakelog.writer.typed_segments.commit_types`), if any."""
    log_append = config.log_append_time
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
    table = pa.concat_tables(parts) if len(parts) > 1 else parts[0]
    if types:
        table = with_typed_columns(table, [(batches[i].typed, batches[i].records.num_rows) for i, _ in items], types)
    return table


def fail(results: Results, offsets: dict[int, list[tuple[int, int]]], error: KafkaError) -> Results:
    """Answer every planned batch (``offsets``) with ``error``."""
    for items in offsets.values():
        for i, _ in items:
            results[i] = error
    return results


def acknowledge(results: Results, acked: dict[int, AppendResult]) -> Results:
    for i, r in acked.items():
        results[i] = r
    return results
