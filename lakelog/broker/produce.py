"""The produce pipeline both fronts share, in Kafka's order (``KafkaApis.handleProduceRequest`` then
``ReplicaManager.appendRecords``):

1. **authorize** -- Write on the topic (and on the transactional id of a transactional request);
2. **validate** -- the topic's name, the refusal of internal topics, then each batch's records against the
   topic's limits (``max.message.bytes``, timestamps: Kafka's ``LogValidator``);
3. **partition and leadership check** -- the partition exists in the topic's snapshot (a partition beyond a
   cached count re-reads it once), records without one are placed by Kafka's partitioner; leadership is the
   partition lease's, checked by the committer atomically with the commit (a front that does not lead a
   partition hands the commit off to the one that does, ``lakelog/writer``);
4. **producer state check** -- an idempotent batch's producer id is known and its epoch not fenced (sequence
   numbers are checked inside the commit, which must be atomic with them);
5. **accumulator** -- the batches join the group commit; the answer waits for it (acks 1 and all alike:
   storage is the only replica) or not at all (acks 0); a transactional request's batches instead go to its
   transaction coordinator, which holds them until EndTxn (:meth:`ProducePipeline.stage`).

A front decodes its wire format into Arrow tables of records (a Kafka record batch, an HTTP body in JSON or
Arrow, Confluent v3's records) and calls these stages in this order; each is written here once. Which stage
runs on the event loop and which in a worker thread is the front's choice: the methods that may read storage
say so.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Iterable, Protocol

from lakelog.broker.authorizer import TOPIC, TRANSACTIONAL_ID
from lakelog.errors import CoordinatorNotAvailable, InvalidTopic, KafkaError, UnknownTopicOrPartition
from lakelog.storage.topic_name import is_internal, validate_topic_name
from lakelog.writer.partitioner import partition_batches, split_records
from lakelog.writer.records import AppendResult, PartitionBatch, validate_records

if TYPE_CHECKING:
    from concurrent.futures import Future

    import pyarrow as pa

    from lakelog import Log
    from lakelog.broker.authorizer import Authorizer, Principal
    from lakelog.broker.metrics import Metrics
    from lakelog.broker.topic_metadata import TopicMetadata
    from lakelog.storage.topic_snapshot import TopicSnapshot
    from lakelog.writer.accumulator import RecordAccumulator

log = logging.getLogger(__name__)

Producer = tuple[int, int]  # (producer id, producer epoch)


class TransactionStager(Protocol):
    """What the pipeline needs of the transaction coordinator
    (:class:`lakelog.transaction.transaction_coordinator.TransactionCoordinator`)."""

    def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                       partitions: Iterable[tuple[str, int]]) -> None: ...

    def stage_batch(self, transactional_id: str, batch: PartitionBatch, topic: str) -> AppendResult: ...


class StaleMetadata(Exception):
    """A request names a partition beyond a cached snapshot's count: only a fresh read can tell if it exists."""


class ProducePipeline:
    """The five stages of produce over one process's shared objects (see the module docstring).

    Thread-safe: the checks are pure or read storage through thread-safe objects; :meth:`append` may be called
    from any thread, and calls made in one order queue in that order (idempotent sequences depend on it)."""

    def __init__(self, log: "Log", accumulator: "RecordAccumulator", metadata: "TopicMetadata",
                 authorizer: "Authorizer", metrics: "Metrics", transactions: TransactionStager | None = None) -> None:
        self.log = log
        self.accumulator = accumulator
        self.metadata = metadata
        self.authorizer = authorizer
        self.metrics = metrics
        self.transactions = transactions

    # -- 1. authorize ------------------------------------------------------------------------
    def authorize(self, principal: "Principal", topic: str) -> None:
        """``TOPIC_AUTHORIZATION_FAILED`` unless ``principal`` may Write ``topic``."""
        self.authorizer.authorize(principal, "Write", TOPIC, topic)

    def authorize_transactional(self, principal: "Principal", transactional_id: str) -> None:
        """``TRANSACTIONAL_ID_AUTHORIZATION_FAILED`` unless ``principal`` may Write ``transactional_id``."""
        self.authorizer.authorize(principal, "Write", TRANSACTIONAL_ID, transactional_id)

    def admit(self, principal: "Principal", topic: str) -> None:
        """Stages 1 and 2 for the topic itself, before any record is looked at: authorized, a legal name, no
        internal topic (written by the group and transaction coordinators only, as Kafka's
        ``internalTopicsAllowed`` is for clients)."""
        self.authorize(principal, topic)
        self.check_topic(topic)

    # -- 2. validate -------------------------------------------------------------------------
    @staticmethod
    def check_topic(topic: str) -> None:
        """``INVALID_TOPIC_EXCEPTION`` for an illegal name or an internal topic."""
        validate_topic_name(topic)
        if is_internal(topic):
            raise InvalidTopic(f"topic {topic} is internal: it cannot be produced to")

    @staticmethod
    def validate(snap: "TopicSnapshot", records: "pa.Table", partition: int) -> None:
        """The records of one batch against the topic's limits (the batch is refused whole)."""
        validate_records(records, snap.config, topic=snap.topic, partition=partition)

    # -- 3. partition and leadership check ---------------------------------------------------
    @staticmethod
    def check_partition(topic: str, snap: "TopicSnapshot", highest: int, *, fresh: bool) -> None:
        """``highest`` is a partition of ``snap``; beyond its count :class:`StaleMetadata` for a cached snapshot,
        ``UNKNOWN_TOPIC_OR_PARTITION`` for one just read (``fresh``)."""
        n = snap.partition_count
        if highest >= n:
            if not fresh:
                raise StaleMetadata(topic)
            raise UnknownTopicOrPartition(
                f"partition {highest} of topic {topic} does not exist (the topic has {n} partitions)")

    def snapshot(self, topic: str, highest: int = -1) -> "TopicSnapshot":
        """The topic's snapshot holding partition ``highest``: the cached one, re-read once if the partition is
        beyond it (may read storage: call off the event loop); ``UNKNOWN_TOPIC_OR_PARTITION`` otherwise."""
        snap = self.metadata.get(topic)
        try:
            self.check_partition(topic, snap, highest, fresh=False)
        except StaleMetadata:
            snap = self.metadata.get(topic, fresh=True)
            self.check_partition(topic, snap, highest, fresh=True)
        return snap

    async def snapshot_async(self, topic: str, highest: int = -1) -> "TopicSnapshot":
        """:meth:`snapshot` from the event loop: a cached snapshot that holds the partition costs no thread hop."""
        snap = self.metadata.peek(topic)
        if snap is not None and highest < snap.partition_count:
            return snap
        return await asyncio.to_thread(self.snapshot, topic, highest)

    def partition(self, topic: str, records: "pa.Table", explicit: list | None,
                  partitions: int) -> list[PartitionBatch]:
        """Batches of validated records per partition: ``explicit`` partitions (None: every record placed), else
        Kafka's partitioner (murmur2 of the key, sticky for keyless records, moving on after ``batch.size``
        bytes: KIP-794)."""
        return partition_batches(self.log.sticky, topic, records, partitions, explicit=explicit,
                                 switch_bytes=self.accumulator.batch_size)

    def partition_rows(self, topic: str, records: "pa.Table", explicit: list | None,
                       partitions: int) -> "tuple[list[PartitionBatch], pa.Array | None]":
        """:meth:`partition`, with each record's partition (None: all in the one batch)."""
        return split_records(self.log.sticky, topic, records, partitions, explicit=explicit,
                             switch_bytes=self.accumulator.batch_size)

    # -- 4. producer state check -------------------------------------------------------------
    def check_producers(self, batches: Iterable[PartitionBatch],
                        known: "set[Producer] | frozenset[Producer]" = frozenset()) -> dict["Producer", bool]:
        """Refuse unknown or fenced producer ids of idempotent batches (``UNKNOWN_PRODUCER_ID``,
        ``INVALID_PRODUCER_EPOCH``, ``PRODUCER_FENCED``), except those in ``known`` (checked before by the
        caller: a non-transactional id stays valid); may read the producer-id table (call off the event loop).
        Returns each checked producer with whether it is transactional."""
        todo = {(b.producer_id, b.producer_epoch) for b in batches if b.idempotent} - set(known)
        return {p: self.log.registry.check(*p) for p in todo}

    # -- 5. accumulator ----------------------------------------------------------------------
    def append(self, topic: str, batches: list[PartitionBatch]) -> "Future[list[AppendResult | KafkaError]]":
        """Queue checked batches for the group commit; the future holds one result per batch.  Raises
        ``THROTTLING_QUOTA_EXCEEDED`` (``buffer.memory`` full) or a closed accumulator's error, queueing
        nothing."""
        return self.accumulator.append(topic, batches)

    async def commit(self, topic: str, batches: list[PartitionBatch]) -> list[AppendResult | KafkaError]:
        """:meth:`append` and wait for the commit without blocking the event loop."""
        return await asyncio.wrap_future(self.append(topic, batches))

    def stage(self, transactional_id: str, topic: str, batches: list[PartitionBatch], *,
              add_partitions: bool = False) -> list[AppendResult]:
        """A transactional request's checked batches, held by the transaction coordinator until EndTxn (one
        result per batch, ``duplicate`` for a retried one; nothing is appended).  ``add_partitions`` first adds
        their partitions to the transaction (HTTP's produce does; a Kafka client sends AddPartitionsToTxn
        itself).  Raises the coordinator's KafkaError (fenced, no open transaction, ...); reads and writes
        storage (call off the event loop)."""
        if self.transactions is None:
            raise CoordinatorNotAvailable("this process serves no transactions")
        if add_partitions and batches:
            first = batches[0]
            self.transactions.add_partitions(transactional_id, first.producer_id, first.producer_epoch,
                                             {(topic, b.partition) for b in batches})
        return [self.transactions.stage_batch(transactional_id, b, topic) for b in batches]

    def append_unacknowledged(self, topic: str, batches: list[PartitionBatch]) -> None:
        """``acks=0``: queue and return at once; failures are only counted and logged."""
        future = self.append(topic, batches)

        def done(f) -> None:
            for r in f.result():
                if isinstance(r, KafkaError):
                    self.metrics.count_error(r)
                    log.warning("acks=0 append to %s failed: %s", topic, r)

        future.add_done_callback(done)
