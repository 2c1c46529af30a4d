"""The producer's transaction manager (Kafka's ``TransactionManager``): its producer id and epoch, the sequence
numbers per partition, and a transactional producer's transaction state and calls.

An idempotent producer takes its id from ``POST /v1/producers``; a transactional one from ``init_transactions``
(``/v1/transactions/{id}/init``), which fences older instances. A batch gets its partition's next sequence when it
is first sent and keeps it across its retries. A batch that finally fails either gives its sequence back (nothing
of it was written) or, if its outcome is unknown or the front reports a sequence or epoch error, makes the producer
take a new id before sending more (as Kafka's producer bumps its epoch). A transactional producer's failed write
makes its transaction abortable only; the errors in :data:`TXN_FATAL` are fatal.

Thread-safe: its state is guarded by the accumulator's condition.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from urllib.parse import quote

from lakelog.client.record_accumulator import ProducerBatch, RecordAccumulator
from lakelog.client.transport import Transport
from lakelog.errors import (InvalidProducerEpoch, InvalidProducerIdMapping, InvalidRequest, InvalidTxnState,
                            KafkaError, OutOfOrderSequenceNumber, ProducerFenced, TransactionalIdAuthorizationFailed,
                            UnknownProducerId)
from lakelog.storage.producer_state import INT32_MAX

# Errors after which an idempotent producer's sequence state is not the front's: it takes a new producer id.
RESET_ERRORS = (OutOfOrderSequenceNumber, InvalidProducerEpoch, UnknownProducerId)
# A transactional producer cannot go on after these (Kafka's fatal errors): another instance owns the id now.
TXN_FATAL = (ProducerFenced, InvalidProducerEpoch, InvalidProducerIdMapping, TransactionalIdAuthorizationFailed)


class TransactionAborted(KafkaError):
    """A record still queued when its transaction was aborted (Kafka's client-side TransactionAbortedException)."""

    name = "TRANSACTION_ABORTED"


class TransactionManager:
    """Producer id, sequences and transactions of one producer; ``transactional_id`` None: idempotent only (or
    neither, with ``idempotent`` False)."""

    def __init__(self, transport: Transport, accumulator: RecordAccumulator, *, idempotent: bool,
                 transactional_id: str | None, transaction_timeout_ms: int, backoff_s: float, backoff_max_s: float,
                 max_block_s: float) -> None:
        self.transport, self.accumulator = transport, accumulator
        self.cv = accumulator.cv
        self.idempotent = idempotent or transactional_id is not None
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self.path = f"/v1/transactions/{quote(transactional_id, safe='')}" if transactional_id else ""
        self.backoff_s, self.backoff_max_s, self.max_block_s = backoff_s, backoff_max_s, max_block_s
        self.fatal: KafkaError | None = None  # the producer cannot go on
        self.producer_id, self.epoch = -1, -1
        self._sequences: dict[tuple[str, int], int] = {}
        self._ready = False  # init_transactions succeeded
        self.in_txn = False  # begin_transaction .. the end of commit/abort
        self.ending = False  # commit/abort under way: send() is refused
        self._started = False  # the front may hold a write of this transaction: EndTxn is due
        self._error: KafkaError | None = None  # abortable: commit raises it, abort clears it
        self._bump = False  # a write's outcome stayed unknown: abort takes a new epoch (see abort)

    # -- the sender's side ------------------------------------------------------------------
    def ensure_producer_id(self) -> None:
        """An idempotent producer's id, taken from the front when it has none."""
        if not self.idempotent or self.producer_id >= 0:
            return
        if self.transactional_id is not None:  # send() refuses records before init_transactions: a bug
            raise InvalidTxnState("a transactional producer takes its producer id from init_transactions()")
        body = {"transactional_id": self.transactional_id} if self.transactional_id else {}
        out = self.transport.json("POST", "/v1/producers", json=body)
        with self.cv:
            self.producer_id, self.epoch = out["producer_id"], out["producer_epoch"]
            self._sequences.clear()

    def prepare(self, b: ProducerBatch) -> None:
        """A batch drained to be sent (lock held): it begins the transaction on the front, and a new batch (or one
        of an older producer id) takes its partition's next sequence."""
        if self.transactional_id is not None:
            self._started = True  # the front begins the transaction with this write
        if self.idempotent and (b.base_sequence is None or b.producer_id != self.producer_id):
            tp = (b.topic, b.partition)
            seq = self._sequences.get(tp, 0)
            b.base_sequence, b.producer_id = seq, self.producer_id
            self._sequences[tp] = (seq + len(b.records)) % (INT32_MAX + 1)

    def failed(self, b: ProducerBatch, error: KafkaError, final: KafkaError, *, ambiguous: bool) -> None:
        """A batch failed for good with ``final`` (``error`` as the front answered; ``ambiguous``: it may have
        landed): what that means for the producer's state (lock held)."""
        if isinstance(error, ProducerFenced) or (self.transactional_id is not None and isinstance(error, TXN_FATAL)):
            self.fatal = error
        elif self.transactional_id is not None:
            # the transaction cannot commit any more (Kafka's abortable error); the producer id stays
            self._error = self._error or final
            if ambiguous:
                self._bump = True
            elif b.base_sequence is not None:
                self._sequences[(b.topic, b.partition)] = b.base_sequence
        elif self.idempotent and (ambiguous or isinstance(error, RESET_ERRORS)):
            # the batch may have landed, or our sequence state is not the front's: take a new
            # producer id so no later batch can be mistaken for (or blocked by) this one
            self.producer_id = -1
            for other in self.accumulator.queued():
                other.base_sequence = None
        elif self.idempotent and b.base_sequence is not None:
            # nothing of the batch was written: the next batch reuses its sequence
            self._sequences[(b.topic, b.partition)] = b.base_sequence

    def fail_everything(self, error: KafkaError) -> None:
        """The producer cannot go on: every queued record fails with ``error``, and so does every later call."""
        with self.cv:
            self.fatal = self.fatal or error
            batches = self.accumulator.take_all()
        for b in batches:
            self.accumulator.finish(b, error, in_flight=False)

    # -- the application's side -------------------------------------------------------------
    def check_can_send(self) -> None:
        """A transactional producer sends only inside a transaction that is not ending."""
        if self.transactional_id is not None and (not self.in_txn or self.ending):
            raise InvalidTxnState("cannot send without an ongoing transaction: begin_transaction() first"
                                  if not self.in_txn else "cannot send while the transaction is committing or "
                                  "aborting")

    def init_transactions(self, timeout: float | None = None) -> None:
        """InitProducerId for the transactional id (``transaction_timeout_ms`` is the coordinator's
        transaction.timeout.ms): takes the id's producer id with a new epoch, fencing any older instance and
        aborting a transaction it left open.  Call once, before the first :meth:`begin_transaction`."""
        self._check("init_transactions")
        if self.in_txn:
            raise InvalidTxnState("init_transactions: a transaction is open (commit or abort it first)")
        self._init(self._deadline(timeout))

    def begin_transaction(self) -> None:
        """Open a transaction (locally: the front begins it with the first write, as Kafka's coordinator)."""
        self._check("begin_transaction")
        if not self._ready:
            raise InvalidTxnState("begin_transaction: init_transactions() first")
        with self.cv:
            if self.in_txn:
                raise InvalidTxnState("begin_transaction: a transaction is already open")
            self.in_txn, self._started, self._error, self._bump = True, False, None, False

    def send_offsets_to_transaction(self, offsets, group_id, timeout: float | None = None) -> None:
        """Commit consumer offsets with the transaction (committed at its commit, never if it aborts); see
        :meth:`Producer.send_offsets_to_transaction <lakelog.client.producer.Producer.send_offsets_to_transaction>`."""
        self._require("send_offsets_to_transaction")
        group = getattr(group_id, "group_id", group_id)
        if not isinstance(group, str) or not group:
            raise InvalidRequest(f"send_offsets_to_transaction needs a group id, got {group_id!r}")
        entries = offset_entries(offsets)
        deadline = self._deadline(timeout)
        self.accumulator.flush(max(0.0, deadline - time.monotonic()))
        with self.cv:
            self._started = True  # even a failed call may have begun the transaction on the front
        body = {"producer_id": self.producer_id, "producer_epoch": self.epoch, "group_id": group,
                "offsets": entries}
        try:
            self._call("offsets", body, deadline)
        except KafkaError as e:
            if self.fatal is None:
                with self.cv:
                    self._error = self._error or e
            raise

    def commit_transaction(self, timeout: float | None = None) -> None:
        """Flush every pending send, then EndTxn(commit); a failed write of the transaction is raised instead (the
        transaction must be aborted); a retriable failure (timeout) may be retried by calling this again."""
        self._require("commit_transaction")
        deadline = self._deadline(timeout)
        with self.cv:
            self.ending = True  # from here on send() is refused: a later record would miss the commit
        try:
            self.accumulator.flush(max(0.0, deadline - time.monotonic()))
            if self.fatal is not None:
                raise self.fatal
            if self._error is not None:
                e = self._error
                raise type(e)(f"the transaction cannot commit (abort_transaction() it): a write failed: "
                              f"{e.message}")
            if self._started:
                self._call("commit", {"producer_id": self.producer_id, "producer_epoch": self.epoch}, deadline)
            with self.cv:
                self.in_txn = False
        finally:
            with self.cv:
                self.ending = False

    def abort_transaction(self, timeout: float | None = None) -> None:
        """Drop the records not sent yet (their futures fail with :class:`TransactionAborted`), wait for the
        requests in flight, then EndTxn(abort): nothing of the transaction is ever visible."""
        self._require("abort_transaction")
        deadline = self._deadline(timeout)
        with self.cv:
            self.ending = True
            dropped = self.accumulator.take_all()
        try:
            for b in dropped:
                self.accumulator.finish(b, TransactionAborted("the transaction was aborted before the record was "
                                                              "sent"), in_flight=False)
            self.accumulator.flush(max(0.0, deadline - time.monotonic()))  # only requests in flight are left
            if self.fatal is not None:
                raise self.fatal
            producer = {"producer_id": self.producer_id, "producer_epoch": self.epoch}
            if self._bump:
                # a write whose outcome is unknown may still be staged later (a request the front is still
                # serving): a new epoch, which also aborts the open transaction, fences it (Kafka's KIP-360)
                self._init(deadline)
            elif self._started:
                try:
                    self._call("abort", producer, deadline)
                except InvalidTxnState:
                    pass  # the front holds no open transaction (no write reached it): nothing to abort
            with self.cv:
                self.in_txn, self._error, self._bump = False, None, False
        finally:
            with self.cv:
                self.ending = False

    def _check(self, call: str) -> None:
        if self.transactional_id is None:
            raise InvalidTxnState(f"{call} needs a transactional_id")
        if self.fatal is not None:
            raise self.fatal
        if self.accumulator.closed:
            raise InvalidRequest("the producer is closed")

    def _require(self, call: str) -> None:
        self._check(call)
        if not self.in_txn:
            raise InvalidTxnState(f"{call} needs an ongoing transaction (begin_transaction() first)")
        if self.ending:
            raise InvalidTxnState(f"{call}: the transaction is already committing or aborting")

    def _call(self, what: str, body: dict, deadline: float) -> dict | None:
        """POST ``/v1/transactions/{id}/{what}``, retrying retriable errors until ``deadline``; a fatal error
        makes the producer fatal."""
        attempt = 0
        while True:
            try:
                return self.transport.json("POST", f"{self.path}/{what}", json=body)
            except KafkaError as e:
                if isinstance(e, TXN_FATAL):
                    self.fail_everything(e)
                    raise
                backoff = min(self.backoff_s * (2 ** attempt), self.backoff_max_s)
                if not e.retriable or time.monotonic() + backoff >= deadline:
                    raise
                time.sleep(backoff)
                attempt += 1

    def _deadline(self, timeout: float | None) -> float:
        return time.monotonic() + (self.max_block_s if timeout is None else timeout)

    def _init(self, deadline: float) -> None:
        out = self._call("init", {"transaction_timeout_ms": self.transaction_timeout_ms}, deadline)
        with self.cv:
            self.producer_id, self.epoch = out["producer_id"], out["producer_epoch"]
            self._sequences.clear()  # a new epoch numbers every partition from 0
            self._ready = True


def offset_entries(offsets) -> list[dict]:
    """``[(topic, partition, offset[, metadata])]`` or ``{(topic, partition): offset}`` (TopicPartition keys and
    OffsetAndMetadata values too) as the body's offsets."""
    if isinstance(offsets, Mapping):
        items = [(tp, o) for tp, o in offsets.items()]
    else:
        items = [((o[0], o[1]), o[2] if len(o) < 4 else (o[2], o[3])) for o in offsets]
    entries = []
    for tp, o in items:
        topic, partition = (tp.topic, tp.partition) if hasattr(tp, "topic") else tp
        if hasattr(o, "offset"):
            offset, metadata = o.offset, o.metadata
        elif isinstance(o, tuple):
            offset, metadata = o
        else:
            offset, metadata = o, None
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise InvalidRequest(f"offset to commit for {topic}-{partition} must be an integer >= 0, got {offset!r}")
        entries.append({"topic": topic, "partition": partition, "offset": offset, "metadata": metadata or None})
    if not entries:
        raise InvalidRequest("send_offsets_to_transaction needs at least one offset")
    return entries
