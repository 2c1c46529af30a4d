"""Kafka's transaction coordinator over one storage root: InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn,
TxnOffsetCommit, EndTxn and ``transaction.timeout.ms``, for the Kafka listener and the HTTP front alike.

How a transaction reaches the topics (docs/architecture.md, "Transactions"):

1. Produced batches are staged (:mod:`lakelog.transaction.staging`), not appended: no topic table, and so no
   reader of any isolation level nor any plain Delta reader, ever holds a record of an open or aborted
   transaction.  Produce responses of transactional batches carry offset -1: offsets are assigned at commit.
2. EndTxn(commit) writes the decision (``PrepareCommit``, :mod:`lakelog.transaction.transaction_log`), then
   appends each topic's staged records in one Delta commit per topic through the normal append path (offsets
   assigned then, after anything appended before), then commits the staged offsets to ``__consumer_offsets``,
   then writes ``CompleteCommit`` and deletes the staging.  Every topic commit carries the Delta ``txn`` entry
   ``lakelog.tx.<producer id>.<partition>`` = :attr:`TxnMetadata.marker`, so applying the same decision again
   (EndTxn retried, or recovery after a crash at any point) appends nothing twice.
3. Once the decision is written the transaction commits, whatever fails after it.  The Kafka listener answers
   EndTxn then, as a broker does, and the commit completes in the background while the producer goes on
   (``end_txn(wait=False)``); the id's next request (AddPartitionsToTxn, AddOffsetsToTxn, InitProducerId)
   finishes it first if it has not completed, as do an offset fetch of its groups, :meth:`recover` (every
   front, at start) after a crash, and :meth:`abort_expired` (every second) after a failed apply.  The HTTP
   front waits (``wait=True``): an apply's error reaches its client, whose retried EndTxn finishes the commit.
4. EndTxn(abort), a new InitProducerId of the id, and the timeout abort by deleting the staging; the last two
   bump the epoch first, fencing the old producer (``PRODUCER_FENCED``).

The last stable offset of every partition therefore equals its high watermark, and the aborted-transaction
index is always empty.

Thread-safe: one lock per transactional id serialises its requests; state changes are put-if-absent, so two
fronts acting on one id at once cannot both succeed (the loser answers ``CONCURRENT_TRANSACTIONS``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import TYPE_CHECKING, Callable, Iterable

import pyarrow as pa

from lakelog.errors import (ConcurrentTransactions, InvalidProducerIdMapping, InvalidRequest,
                            InvalidTransactionTimeout, InvalidTxnState, KafkaError, UnknownTopicId,
                            UnknownTopicOrPartition)
from lakelog.group.group_id import validate_group_id
from lakelog.schema.record_typing import type_records
from lakelog.storage.delta_commit import CommitConflict
from lakelog.storage.producer_ids import ProducerIdentity
from lakelog.transaction import transaction_state as ts
from lakelog.transaction.staging import Offsets, TransactionStaging
from lakelog.transaction.transaction_log import TransactionLog
from lakelog.transaction.transaction_state import TxnMetadata, TxnState
from lakelog.writer.records import AppendResult, PartitionBatch

if TYPE_CHECKING:
    from lakelog.group.consumer_offsets import OffsetStore
    from lakelog.log import Log

log = logging.getLogger(__name__)

DEFAULT_TRANSACTION_TIMEOUT_MS = 60_000  # the Java producer's transaction.timeout.ms
MAX_TRANSACTION_TIMEOUT_MS = 900_000  # Kafka's transaction.max.timeout.ms
COMPLETION_THREADS = 4  # decided transactions completing in the background at once
AppendBatches = Callable[[str, list[PartitionBatch]], "list[AppendResult | KafkaError]"]


class UnknownPartitions(UnknownTopicOrPartition):
    """AddPartitionsToTxn named partitions that do not exist (``partitions``); nothing was added."""

    def __init__(self, partitions: set[tuple[str, int]]) -> None:
        super().__init__(f"partitions {sorted(partitions)} do not exist")
        self.partitions = partitions


def marker_app(producer_id: int, partition: int) -> str:
    """The Delta ``txn`` app id a committed transaction of ``producer_id`` sets in ``partition``."""
    return f"lakelog.tx.{producer_id}.{partition}"


def validate_transactional_id(transactional_id: object) -> str:
    if not isinstance(transactional_id, str) or not transactional_id \
            or len(transactional_id) > ts.MAX_TRANSACTIONAL_ID_LENGTH:
        raise InvalidRequest(f"a transactional id is a string of 1 to {ts.MAX_TRANSACTIONAL_ID_LENGTH} "
                             f"characters, got {transactional_id!r}")
    return transactional_id


class TransactionCoordinator:
    """``append`` commits one topic's batches (default: the log's own append; the fronts pass their accumulator
    so a transaction's records group-commit with other producers'); ``offsets`` is the fronts' offset store."""

    def __init__(self, log: "Log", *, append: AppendBatches | None = None, offsets: "OffsetStore | None" = None,
                 max_timeout_ms: int = MAX_TRANSACTION_TIMEOUT_MS, clock: Callable[[], float] = time.time) -> None:
        self.log = log
        self.states = TransactionLog(log.root)
        self.staging = TransactionStaging(log.root)
        self.max_timeout_ms = max_timeout_ms
        self._append = append or log.append_batches
        self._offsets = offsets
        self._clock = clock
        self._guard = threading.Lock()
        self._locks: dict[str, threading.Lock] = defaultdict(threading.Lock)
        self._metas: dict[str, TxnMetadata] = {}
        self._completions = ThreadPoolExecutor(max_workers=COMPLETION_THREADS, thread_name_prefix="lakelog-txn")

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    def _lock(self, transactional_id: str) -> threading.Lock:
        with self._guard:
            return self._locks[transactional_id]

    def _load(self, transactional_id: str) -> TxnMetadata | None:
        meta = self._metas.get(transactional_id)
        if meta is None:
            meta = self.states.load(transactional_id)
            if meta is not None:
                self._metas[transactional_id] = meta
        return meta

    def _known(self, transactional_id: str) -> TxnMetadata:
        meta = self._load(validate_transactional_id(transactional_id))
        if meta is None:
            raise InvalidProducerIdMapping(f"transactional id {transactional_id!r} was never initialised "
                                           f"(InitProducerId first)")
        return meta

    def _save(self, meta: TxnMetadata) -> TxnMetadata:
        try:
            saved = self.states.save(meta)
        except CommitConflict:
            self._metas.pop(meta.transactional_id, None)  # another front moved it: read it again next time
            raise ConcurrentTransactions(f"transactional id {meta.transactional_id!r} was changed concurrently "
                                         f"(by another front); retry") from None
        self._metas[meta.transactional_id] = saved
        return saved

    # -- the producer's requests -----------------------------------------------------------------------
    def init_producer_id(self, transactional_id: str,
                         timeout_ms: int = DEFAULT_TRANSACTION_TIMEOUT_MS) -> ProducerIdentity:
        """The id's producer id with its epoch bumped, fencing older instances; an open transaction of the id
        is aborted first, and one already decided is finished."""
        validate_transactional_id(transactional_id)
        if isinstance(timeout_ms, bool) or not isinstance(timeout_ms, int) \
                or not 0 < timeout_ms <= self.max_timeout_ms:
            raise InvalidTransactionTimeout(f"transaction.timeout.ms must be in [1, {self.max_timeout_ms}] "
                                            f"(transaction.max.timeout.ms), got {timeout_ms!r}")
        with self._lock(transactional_id):
            self._metas.pop(transactional_id, None)  # another front may have coordinated it since
            meta = self._load(transactional_id)
            if meta is not None:
                meta = self._finish(meta)  # a decided transaction completes under the epoch it was staged with
            ident = self.log.init_producer(transactional_id)
            if meta is None:
                self._save(TxnMetadata(transactional_id, ident.producer_id, ident.producer_epoch, timeout_ms))
                return ident
            meta = self._finish(self._save(ts.fence(meta, ident.producer_id, ident.producer_epoch)))
            self.staging.discard(transactional_id)  # the aborted transaction's batches, and older epochs' leftovers
            self._save(replace(meta, timeout_ms=timeout_ms))
            return ident

    def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                       partitions: Iterable[tuple[str, int]]) -> None:
        """AddPartitionsToTxn: the transaction (begun by this call if none is open) writes to ``partitions``."""
        wanted = frozenset(partitions)
        counts: dict[str, int] = {}
        for topic in {t for t, _ in wanted}:
            try:
                counts[topic] = self.log.snapshot(topic).partition_count
            except UnknownTopicOrPartition:
                counts[topic] = 0
        missing = {(t, p) for t, p in wanted if not 0 <= p < counts[t]}
        if missing:
            raise UnknownPartitions(missing)
        self._add(transactional_id, producer_id, producer_epoch, partitions=wanted)

    def add_offsets(self, transactional_id: str, producer_id: int, producer_epoch: int, group: str) -> None:
        """AddOffsetsToTxn: the transaction commits offsets of ``group``."""
        self._add(transactional_id, producer_id, producer_epoch, groups=frozenset([validate_group_id(group)]))

    def _add(self, transactional_id: str, producer_id: int, producer_epoch: int, **what) -> None:
        with self._lock(transactional_id):
            meta = self._known(transactional_id)
            if meta.state.preparing:  # the last EndTxn's completion has not run yet: it goes first
                ts.check_producer(meta, producer_id, producer_epoch)
                meta = self._finish(meta)
            new = ts.add(meta, producer_id, producer_epoch, now_ms=self._now_ms(), **what)
            if new is meta:
                return
            if meta.state.idle:  # a new transaction: nothing an earlier one left behind may join it
                self.staging.discard(transactional_id, producer_id, producer_epoch)
            self._save(new)

    def stage_batch(self, transactional_id: str, batch: PartitionBatch, topic: str) -> AppendResult:
        """A transactional Produce: keep the batch until EndTxn (``duplicate`` for a retried batch)."""
        self.log.registry.check(batch.producer_id, batch.producer_epoch)  # fenced epochs, from any front
        meta = self._metas.get(transactional_id)
        if meta is not None and meta.producer_id == batch.producer_id:
            ts.check_producer(meta, batch.producer_id, batch.producer_epoch)
            # No open transaction (before the first AddPartitionsToTxn, after EndTxn): the batch would be
            # acknowledged, then discarded when the next transaction begins.
            if meta.state is not TxnState.ONGOING or (topic, batch.partition) not in meta.partitions:
                raise InvalidTxnState(f"partition {topic}-{batch.partition} was not added to the transaction "
                                      f"(AddPartitionsToTxn first)")
        # records validated against the Schema Registry now, as an append would: EndTxn can no longer refuse them
        type_records(batch.records, self.log.snapshot(topic).config, self.log.schemas, topic=topic,
                     partition=batch.partition)
        fresh = self.staging.stage(transactional_id, batch.producer_id, batch.producer_epoch, topic,
                                   batch.partition, batch.base_sequence, batch.records)
        return AppendResult(batch.partition, -1, batch.records.num_rows, duplicate=not fresh)

    def txn_offset_commit(self, transactional_id: str, producer_id: int, producer_epoch: int, group: str,
                          offsets: Offsets) -> None:
        """TxnOffsetCommit: offsets of ``group`` that become committed with the transaction."""
        validate_transactional_id(transactional_id)
        validate_group_id(group)
        for topic, partition, offset, *_ in offsets:
            if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0 or partition < 0:
                raise InvalidRequest(f"an offset to commit for {topic}-{partition} must be >= 0, got {offset!r}")
        self.log.registry.check(producer_id, producer_epoch)
        self.staging.stage_offsets(transactional_id, producer_id, producer_epoch, group, offsets)

    def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool, *,
                wait: bool = True) -> None:
        """EndTxn: decide the open transaction.  ``wait``: return once it is complete; otherwise once the
        decision is durable (as a broker's EndTxn does), completing it in the background -- the id's next
        request finishes it first if the background has not, and so does an offset fetch of its groups
        (:meth:`pending_offsets`)."""
        with self._lock(transactional_id):
            meta = self._known(transactional_id)
            if meta.state.preparing:  # finishing applies what is staged now: never from a state another front
                self._metas.pop(transactional_id, None)  # has finished since (the next transaction may be staging)
                meta = self._known(transactional_id)
            decided = ts.end(meta, producer_id, producer_epoch, commit)
            if not decided.state.preparing:
                return
            if decided is not meta:
                decided = self._save(decided)
            if wait:
                self._finish(decided)
                return
        self._completions.submit(self._finish_later, transactional_id, decided.marker)

    def _finish_later(self, transactional_id: str, marker: int) -> None:
        with self._lock(transactional_id):
            meta = self._metas.get(transactional_id)
            if meta is None or not meta.state.preparing or meta.marker != marker:
                return  # finished meanwhile by the id's next request
            try:
                self._finish(meta)
            except KafkaError as e:  # stays decided: the id's next request, or recovery, finishes it
                log.warning("completing the transaction of %r: %s", transactional_id, e)

    def pending_offsets(self, group: str) -> list[tuple[str, int]]:
        """(transactional id, marker) of this front's decided transactions whose offsets of ``group`` are not
        committed yet (in memory: cheap enough to ask on every offset fetch)."""
        return [(t, m.marker) for t, m in list(self._metas.items())
                if m.state is TxnState.PREPARE_COMMIT and group in m.groups]

    def finish_pending(self, pending: list[tuple[str, int]]) -> None:
        """Complete the transactions :meth:`pending_offsets` named, so that an offset fetch right after a commit
        sees their offsets (a broker answers UNSTABLE_OFFSET_COMMIT instead, which librdkafka's ``committed()``
        surfaces as an error)."""
        for transactional_id, marker in pending:
            self._finish_later(transactional_id, marker)

    def describe(self, transactional_id: str) -> TxnMetadata | None:
        with self._lock(transactional_id):
            self._metas.pop(transactional_id, None)
            return self._load(validate_transactional_id(transactional_id))

    # -- the coordinator's own work ---------------------------------------------------------------------
    def _finish(self, meta: TxnMetadata) -> TxnMetadata:
        """Apply a decided transaction (nothing for one not preparing) and record it complete; caller holds the lock."""
        if not meta.state.preparing:
            return meta
        if meta.state is TxnState.PREPARE_COMMIT:
            self._apply(meta)
        self.staging.discard(meta.transactional_id, meta.producer_id, meta.producer_epoch)
        return self._save(ts.complete(meta))

    def _apply(self, meta: TxnMetadata) -> None:
        staged = self.staging.records(meta.transactional_id, meta.producer_id, meta.producer_epoch)
        by_topic: dict[str, list[PartitionBatch]] = defaultdict(list)
        for (topic, partition), tables in sorted(staged.items()):
            if (topic, partition) not in meta.partitions or not tables:
                continue  # produced to a partition never added: not part of the transaction
            records = pa.concat_tables(tables) if len(tables) > 1 else tables[0]
            by_topic[topic].append(PartitionBatch(
                partition, records, meta.producer_id, meta.producer_epoch,
                transaction=(marker_app(meta.producer_id, partition), meta.marker)))
        for topic, batches in by_topic.items():
            try:
                results = self._append(topic, batches)
            except (UnknownTopicOrPartition, UnknownTopicId) as e:
                results = [e]
            for result in results:
                if isinstance(result, (UnknownTopicOrPartition, UnknownTopicId)):
                    # deleted since (a broker drops the markers of deleted partitions the same way)
                    log.warning("transaction of %r: topic %s was deleted before its commit reached it",
                                meta.transactional_id, topic)
                elif isinstance(result, KafkaError):
                    raise result  # still PrepareCommit: a retry or recovery applies what is left
        if meta.groups:
            staged_offsets = self.staging.offsets(meta.transactional_id, meta.producer_id, meta.producer_epoch)
            for group in sorted(meta.groups):
                entries = staged_offsets.get(group, {})
                if entries:
                    self._offset_store().commit(group, [(t, p, o, md, e) for (t, p), (o, md, e) in
                                                        sorted(entries.items())])

    def _offset_store(self) -> "OffsetStore":
        if self._offsets is None:
            from lakelog.group.consumer_offsets import OffsetStore

            self._offsets = OffsetStore(self.log)
        return self._offsets

    def abort_expired(self) -> list[str]:
        """Abort every open transaction past its ``transaction.timeout.ms`` (bumping the epoch, as Kafka does,
        so the abandoned producer is fenced); the ids aborted.  First finish the decided transactions whose
        completion failed (an append's storage error): a decision is applied whether or not its producer calls
        again, as Kafka's coordinator retries its markers."""
        for transactional_id in [t for t, m in list(self._metas.items()) if m.state.preparing]:
            with self._lock(transactional_id):
                self._metas.pop(transactional_id, None)  # another front may have finished it since: read it again
                meta = self._load(transactional_id)
                if meta is not None and meta.state.preparing:
                    try:
                        self._finish(meta)
                    except KafkaError as e:
                        log.warning("finishing the decided transaction of %r: %s", transactional_id, e)
        now = self._now_ms()
        aborted = []
        for transactional_id in [t for t, m in list(self._metas.items()) if ts.expired(m, now)]:
            with self._lock(transactional_id):
                meta = self._metas.get(transactional_id)
                if meta is None or not ts.expired(meta, now):
                    continue
                try:
                    ident = self.log.init_producer(transactional_id)
                    fenced = self._save(ts.fence(meta, ident.producer_id, ident.producer_epoch))
                    self.staging.discard(transactional_id, meta.producer_id, meta.producer_epoch)
                    self._finish(fenced)
                    aborted.append(transactional_id)
                    log.info("aborted transaction of %r after transaction.timeout.ms=%d", transactional_id,
                             meta.timeout_ms)
                except KafkaError as e:
                    log.warning("aborting the timed-out transaction of %r: %s", transactional_id, e)
        return aborted

    def recover(self) -> int:
        """Load every transactional id's state and finish the decided ones (a front's start); how many were."""
        finished = 0
        for meta in self.states.all():
            with self._lock(meta.transactional_id):
                self._metas[meta.transactional_id] = meta
                if meta.state.preparing:
                    try:
                        self._finish(meta)
                        finished += 1
                    except KafkaError as e:
                        log.warning("finishing the transaction of %r: %s", meta.transactional_id, e)
        return finished
