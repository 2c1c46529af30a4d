"""``Producer``: Kafka's producer over the HTTP front.

* Partitioning on the client, exactly as the front and the Java client do:
  explicit partition → murmur2(key) → sticky partition (switched when a batch
  for it is started).
* Batching per partition with ``linger_ms`` / ``batch_size``; one sender thread
  drains ready batches, one HTTP request per topic, up to
  ``max_in_flight_requests`` requests at a time.
* Idempotence on by default: a producer id from ``POST /v1/producers``, a
  sequence number per partition assigned when a batch is first sent and kept
  across its retries, and **at most one batch in flight per partition**, so a
  retry can never overtake or reorder anything.  Retriable failures
  (connection errors, 429/503 back-pressure, storage errors) are retried with
  exponential back-off until ``delivery_timeout_ms``; the front answers a
  retry of a committed batch with its original offsets (``duplicate``), so
  nothing is written twice.
* A batch that finally fails is failed to its futures.  If its outcome was
  unknown (it may have been committed), or the front reports a sequence or
  epoch error, the producer takes a new producer id before sending more, as
  Kafka's producer bumps its epoch; ``PRODUCER_FENCED`` is fatal.
* Transactions (with ``transactional_id``), as Kafka's transactional producer:
  :meth:`init_transactions` once, then :meth:`begin_transaction`, :meth:`send`
  and :meth:`send_offsets_to_transaction`, and :meth:`commit_transaction` or
  :meth:`abort_transaction`.  Batches go to ``/v1/transactions/{id}/...``,
  where the front holds them until the commit: a transactional record's
  :class:`RecordMetadata` has offset -1 (offsets are assigned at commit, after
  anything appended before; nothing of an open or aborted transaction is ever in
  a topic).  A failed send makes the transaction abortable only (commit raises,
  abort clears); ``PRODUCER_FENCED``, ``INVALID_PRODUCER_EPOCH``,
  ``INVALID_PRODUCER_ID_MAPPING`` and ``TRANSACTIONAL_ID_AUTHORIZATION_FAILED``
  are fatal.

:meth:`send` returns a ``concurrent.futures.Future`` resolving to
:class:`RecordMetadata` (partition, offset).  :meth:`flush` waits for every
record sent so far; :meth:`close` flushes and stops.  Thread-safe: any number
of threads may call :meth:`send`.
"""

from __future__ import annotations

import base64
import json
import threading
import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import quote

from lakelog.errors import (InvalidConfig, InvalidProducerEpoch, InvalidProducerIdMapping, InvalidRequest,
                            InvalidTxnState, KafkaError, OutOfOrderSequenceNumber, ProducerFenced, RequestTimedOut,
                            TransactionalIdAuthorizationFailed, UnknownProducerId, UnknownTopicOrPartition,
                            error_for_code)
from lakelog.writer.partitioner import StickyPartitioner, partition_for_key
from lakelog.storage.record_fields import as_bytes
from lakelog.storage.producer_state import INT32_MAX
from lakelog.client.transport import Transport

_RESET_ERRORS = (OutOfOrderSequenceNumber, InvalidProducerEpoch, UnknownProducerId)
# A transactional producer cannot go on after these (Kafka's fatal errors): another instance owns the id now.
_TXN_FATAL = (ProducerFenced, InvalidProducerEpoch, InvalidProducerIdMapping, TransactionalIdAuthorizationFailed)
_RECORD_OVERHEAD = 70  # JSON framing per record, for batch sizing


@dataclass(frozen=True)
class RecordMetadata:
    """Where a record landed."""

    topic: str
    partition: int
    offset: int
    log_append_time: int = -1  # epoch ms when the topic stamps LogAppendTime, else -1


@dataclass
class _Batch:
    topic: str
    partition: int
    created: float
    records: list[dict] = field(default_factory=list)
    futures: list[Future] = field(default_factory=list)
    size: int = 0
    base_sequence: int | None = None
    attempts: int = 0
    next_attempt: float = 0.0
    deadline: float = 0.0  # delivery timeout, counted from the batch's creation
    closed: bool = False  # no more records may join (it has been drained once)
    producer_id: int = -1  # the producer id its sequence belongs to
    solo: bool = False  # send in a request of its own (a shared request was refused as a whole)


class TransactionAborted(KafkaError):
    """A record still queued when its transaction was aborted (Kafka's client-side TransactionAbortedException)."""

    name = "TRANSACTION_ABORTED"


def _offset_entries(offsets) -> list[dict]:
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


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


class Producer:
    """An (idempotent by default) producer for one front."""

    def __init__(self, bootstrap: str, *, token: str | None = None, linger_ms: float = 5.0,
                 batch_size: int = 16384, enable_idempotence: bool = True, transactional_id: str | None = None,
                 delivery_timeout_ms: int = 120_000, request_timeout_ms: int = 30_000,
                 retry_backoff_ms: int = 100, retry_backoff_max_ms: int = 1000, max_in_flight_requests: int = 5,
                 max_request_size: int = 1 << 20, buffer_memory: int = 32 << 20, max_block_ms: int = 60_000,
                 metadata_max_age_ms: int = 60_000, transaction_timeout_ms: int = 60_000) -> None:
        if isinstance(transaction_timeout_ms, bool) or not isinstance(transaction_timeout_ms, int) \
                or transaction_timeout_ms < 1:
            raise InvalidConfig(f"transaction_timeout_ms must be a positive integer, got {transaction_timeout_ms!r}")
        self.transport = Transport(bootstrap, token=token, timeout=request_timeout_ms / 1000.0,
                                   max_connections=max_in_flight_requests + 2)
        self.linger_s = linger_ms / 1000.0
        self.batch_size = batch_size
        self.idempotent = enable_idempotence or transactional_id is not None
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self._txn_path = f"/v1/transactions/{quote(transactional_id, safe='')}" if transactional_id else ""
        self.delivery_timeout_s = delivery_timeout_ms / 1000.0
        self.backoff_s, self.backoff_max_s = retry_backoff_ms / 1000.0, retry_backoff_max_ms / 1000.0
        self.max_in_flight = max_in_flight_requests
        self.max_request_size = max_request_size
        self.buffer_memory = buffer_memory
        self.max_block_s = max_block_ms / 1000.0
        self.metadata_max_age_s = metadata_max_age_ms / 1000.0
        self.sticky = StickyPartitioner()
        self._cv = threading.Condition()
        self._queues: dict[tuple[str, int], deque[_Batch]] = {}
        self._in_flight: set[tuple[str, int]] = set()
        self._requests = 0
        self._buffered = 0
        self._pending = 0  # records sent and not yet completed
        self._flushing = 0
        self._closed = False
        self._fatal: KafkaError | None = None
        self._partitions: dict[str, tuple[float, int]] = {}
        self._producer_id, self._epoch = -1, -1
        self._sequences: dict[tuple[str, int], int] = {}
        # transactions (guarded by _cv)
        self._txn_ready = False  # init_transactions succeeded
        self._in_txn = False  # begin_transaction .. the end of commit/abort
        self._ending = False  # commit/abort under way: send() is refused
        self._txn_started = False  # the front may hold a write of this transaction: EndTxn is due
        self._txn_error: KafkaError | None = None  # abortable: commit raises it, abort clears it
        self._txn_bump = False  # a write's outcome stayed unknown: abort takes a new epoch (see abort_transaction)
        self._pool = ThreadPoolExecutor(max_workers=max_in_flight_requests, thread_name_prefix="lakelog-request")
        self._sender = threading.Thread(target=self._run, name="lakelog-producer-sender", daemon=True)
        self._sender.start()

    # -- metadata -------------------------------------------------------------------------
    def partitions_for(self, topic: str, *, refresh: bool = False) -> int:
        """The topic's partition count (cached for ``metadata_max_age_ms``)."""
        cached = self._partitions.get(topic)
        if cached is not None and not refresh and time.monotonic() - cached[0] < self.metadata_max_age_s:
            return cached[1]
        desc = self.transport.json("GET", f"/v1/topics/{quote(topic, safe='')}")
        n = len(desc["partitions"])
        self._partitions[topic] = (time.monotonic(), n)
        return n

    # -- sending --------------------------------------------------------------------------
    def send(self, topic: str, value=None, key=None, *, partition: int | None = None,
             headers: list[tuple[str, bytes | str | None]] | dict | None = None,
             timestamp_ms: int | None = None) -> "Future[RecordMetadata]":
        """Queue one record; the future resolves once it is committed (or fails).  A transactional producer
        sends only inside a transaction, and its records' offsets are -1 (assigned at commit)."""
        if self._fatal is not None:
            raise self._fatal
        if self._closed:
            raise InvalidRequest("the producer is closed")
        if self.transactional_id is not None and (not self._in_txn or self._ending):
            raise InvalidTxnState("cannot send without an ongoing transaction: begin_transaction() first"
                                  if not self._in_txn else "cannot send while the transaction is committing or "
                                  "aborting")
        k, v = as_bytes(key, "key"), as_bytes(value, "value")
        n = self.partitions_for(topic)
        if partition is not None:
            if not 0 <= partition < n:
                n = self.partitions_for(topic, refresh=True)
                if not 0 <= partition < n:
                    raise UnknownTopicOrPartition(f"partition {partition} of topic {topic} does not exist "
                                                  f"(the topic has {n} partitions)")
            p = partition
        elif k is not None:
            p = partition_for_key(k, n)
        else:
            p = self.sticky.partition(topic, n)
        record: dict = {"key": _b64(k), "value": _b64(v)}
        size = len(k or b"") + len(v or b"") + _RECORD_OVERHEAD
        if headers:
            items = headers.items() if isinstance(headers, dict) else headers
            record["headers"] = [{"key": str(hk), "value": _b64(as_bytes(hv, "header value"))} for hk, hv in items]
            size += sum(len(h["key"]) + len(h["value"] or "") for h in record["headers"])
        if timestamp_ms is not None:
            record["timestamp"] = int(timestamp_ms)
        future: Future = Future()
        deadline = time.monotonic() + self.max_block_s
        with self._cv:
            while self._buffered + size > self.buffer_memory and self._buffered > 0:
                if not self._cv.wait(max(0.0, deadline - time.monotonic())):
                    raise RequestTimedOut(f"buffer_memory={self.buffer_memory} stayed full for max_block_ms")
            queue = self._queues.setdefault((topic, p), deque())
            batch = queue[-1] if queue else None
            if batch is None or batch.closed or (batch.records and batch.size + size > self.batch_size):
                now = time.monotonic()
                batch = _Batch(topic, p, now, deadline=now + self.delivery_timeout_s)
                queue.append(batch)
                if k is None and partition is None:
                    self.sticky.on_new_batch(topic, n, p)  # Kafka moves the sticky partition per new batch
            batch.records.append(record)
            batch.futures.append(future)
            batch.size += size
            self._buffered += size
            self._pending += 1
            self._cv.notify_all()
        return future

    def flush(self, timeout: float | None = None) -> None:
        """Send everything queued now and wait until every record sent so far is acknowledged or failed."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cv:
            self._flushing += 1
            self._cv.notify_all()
            try:
                while self._pending > 0:
                    remaining = None if deadline is None else deadline - time.monotonic()
                    if remaining is not None and remaining <= 0:
                        raise RequestTimedOut(f"flush timed out with {self._pending} records pending")
                    self._cv.wait(remaining if remaining is not None else 1.0)
            finally:
                self._flushing -= 1

    def close(self, timeout: float | None = None) -> None:
        """Flush (abort an open transaction, as Kafka's producer does), then stop the sender and release
        connections."""
        try:
            if self._fatal is None and self._in_txn and not self._ending:
                try:
                    self.abort_transaction(timeout)
                except KafkaError:
                    pass  # the coordinator aborts it after transaction_timeout_ms anyway
            if self._fatal is None:
                self.flush(timeout)
        finally:
            with self._cv:
                self._closed = True
                self._cv.notify_all()
            self._sender.join(timeout=5)
            self._pool.shutdown(wait=True)
            self.transport.close()

    def __enter__(self) -> "Producer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- transactions ---------------------------------------------------------------------
    def _check_txn(self, call: str) -> None:
        if self.transactional_id is None:
            raise InvalidTxnState(f"{call} needs a transactional_id")
        if self._fatal is not None:
            raise self._fatal
        if self._closed:
            raise InvalidRequest("the producer is closed")

    def _require_txn(self, call: str) -> None:
        self._check_txn(call)
        if not self._in_txn:
            raise InvalidTxnState(f"{call} needs an ongoing transaction (begin_transaction() first)")
        if self._ending:
            raise InvalidTxnState(f"{call}: the transaction is already committing or aborting")

    def _txn_call(self, what: str, body: dict, deadline: float) -> dict | None:
        """POST ``/v1/transactions/{id}/{what}``, retrying retriable errors until ``deadline``; a fatal error
        makes the producer fatal."""
        attempt = 0
        while True:
            try:
                return self.transport.json("POST", f"{self._txn_path}/{what}", json=body)
            except KafkaError as e:
                if isinstance(e, _TXN_FATAL):
                    self._fail_everything(e)
                    raise
                backoff = min(self.backoff_s * (2 ** attempt), self.backoff_max_s)
                if not e.retriable or time.monotonic() + backoff >= deadline:
                    raise
                time.sleep(backoff)
                attempt += 1

    def _deadline(self, timeout: float | None) -> float:
        return time.monotonic() + (self.max_block_s if timeout is None else timeout)

    def _init_txn(self, deadline: float) -> None:
        out = self._txn_call("init", {"transaction_timeout_ms": self.transaction_timeout_ms}, deadline)
        with self._cv:
            self._producer_id, self._epoch = out["producer_id"], out["producer_epoch"]
            self._sequences.clear()  # a new epoch numbers every partition from 0
            self._txn_ready = True

    def init_transactions(self, timeout: float | None = None) -> None:
        """InitProducerId for the transactional id (``transaction_timeout_ms`` is the coordinator's
        transaction.timeout.ms): takes the id's producer id with a new epoch, fencing any older instance and
        aborting a transaction it left open.  Call once, before the first :meth:`begin_transaction`."""
        self._check_txn("init_transactions")
        if self._in_txn:
            raise InvalidTxnState("init_transactions: a transaction is open (commit or abort it first)")
        self._init_txn(self._deadline(timeout))

    def begin_transaction(self) -> None:
        """Open a transaction (locally: the front begins it with the first write, as Kafka's coordinator)."""
        self._check_txn("begin_transaction")
        if not self._txn_ready:
            raise InvalidTxnState("begin_transaction: init_transactions() first")
        with self._cv:
            if self._in_txn:
                raise InvalidTxnState("begin_transaction: a transaction is already open")
            self._in_txn, self._txn_started, self._txn_error, self._txn_bump = True, False, None, False

    def send_offsets_to_transaction(self, offsets, group_id, timeout: float | None = None) -> None:
        """Commit consumer offsets with the transaction (committed at its commit, never if it aborts).

        ``offsets``: ``[(topic, partition, offset[, metadata])]`` or ``{(topic, partition): offset}``
        (TopicPartition / OffsetAndMetadata accepted); offsets are those of the next record to consume.
        ``group_id``: the group's id or a consumer's :meth:`group_metadata`.  Flushes pending sends first."""
        self._require_txn("send_offsets_to_transaction")
        group = getattr(group_id, "group_id", group_id)
        if not isinstance(group, str) or not group:
            raise InvalidRequest(f"send_offsets_to_transaction needs a group id, got {group_id!r}")
        entries = _offset_entries(offsets)
        deadline = self._deadline(timeout)
        self.flush(max(0.0, deadline - time.monotonic()))
        with self._cv:
            self._txn_started = True  # even a failed call may have begun the transaction on the front
        body = {"producer_id": self._producer_id, "producer_epoch": self._epoch, "group_id": group,
                "offsets": entries}
        try:
            self._txn_call("offsets", body, deadline)
        except KafkaError as e:
            if self._fatal is None:
                with self._cv:
                    self._txn_error = self._txn_error or e
            raise

    def commit_transaction(self, timeout: float | None = None) -> None:
        """Flush every pending send, then EndTxn(commit): returns once the transaction's records are in their
        topics and its offsets committed.  If a send of the transaction failed, raises that error and the
        transaction must be aborted; a retriable failure (timeout) may be retried by calling this again."""
        self._require_txn("commit_transaction")
        deadline = self._deadline(timeout)
        with self._cv:
            self._ending = True  # from here on send() is refused: a later record would miss the commit
        try:
            self.flush(max(0.0, deadline - time.monotonic()))
            if self._fatal is not None:
                raise self._fatal
            if self._txn_error is not None:
                e = self._txn_error
                raise type(e)(f"the transaction cannot commit (abort_transaction() it): a write failed: "
                              f"{e.message}")
            if self._txn_started:
                self._txn_call("commit", {"producer_id": self._producer_id, "producer_epoch": self._epoch}, deadline)
            with self._cv:
                self._in_txn = False
        finally:
            with self._cv:
                self._ending = False

    def abort_transaction(self, timeout: float | None = None) -> None:
        """Drop the records not sent yet (their futures fail with :class:`TransactionAborted`), wait for the
        requests in flight, then EndTxn(abort): nothing of the transaction is ever visible.  A new transaction
        may begin afterwards."""
        self._require_txn("abort_transaction")
        deadline = self._deadline(timeout)
        with self._cv:
            self._ending = True
            dropped = [b for q in self._queues.values() for b in q]
            for q in self._queues.values():
                q.clear()
        try:
            for b in dropped:
                self._finish(b, TransactionAborted("the transaction was aborted before the record was sent"),
                             in_flight=False)
            self.flush(max(0.0, deadline - time.monotonic()))  # only requests in flight are left
            if self._fatal is not None:
                raise self._fatal
            producer = {"producer_id": self._producer_id, "producer_epoch": self._epoch}
            if self._txn_bump:
                # a write whose outcome is unknown may still be staged later (a request the front is still
                # serving): a new epoch, which also aborts the open transaction, fences it (Kafka's KIP-360)
                self._init_txn(deadline)
            elif self._txn_started:
                try:
                    self._txn_call("abort", producer, deadline)
                except InvalidTxnState:
                    pass  # the front holds no open transaction (no write reached it): nothing to abort
            with self._cv:
                self._in_txn, self._txn_error, self._txn_bump = False, None, False
        finally:
            with self._cv:
                self._ending = False

    # -- the sender thread ----------------------------------------------------------------
    def _ready(self, now: float) -> tuple[list[_Batch], float]:
        """Batches to send now (head of each partition queue with nothing in flight), and the next wake-up."""
        ready, wake = [], now + 1.0
        for tp, queue in self._queues.items():
            if not queue or tp in self._in_flight:
                continue
            b = queue[0]
            due = max(b.next_attempt, b.created + self.linger_s)
            full = b.size >= self.batch_size or len(queue) > 1
            if b.next_attempt > now:
                wake = min(wake, b.next_attempt)
            elif full or self._flushing or self._closed or due <= now:
                ready.append(b)
            else:
                wake = min(wake, due)
        return ready, wake

    def _run(self) -> None:
        try:
            self._loop()
        except Exception as e:  # a bug must not leave futures hanging forever
            self._fail_everything(KafkaError(f"the producer's sender thread failed: {type(e).__name__}: {e}"))

    def _loop(self) -> None:
        while True:
            with self._cv:
                while True:
                    if self._closed and self._pending == 0:
                        return
                    now = time.monotonic()
                    ready, wake = self._ready(now)
                    if ready and self._requests < self.max_in_flight:
                        break
                    self._cv.wait(max(0.001, wake - now) if ready == [] else 0.05)
            try:
                self._ensure_producer_id()
            except KafkaError as e:
                self._on_init_failure(e)
                continue
            except Exception as e:  # an unreadable answer: treat like a retriable failure
                self._on_init_failure(RequestTimedOut(f"init producer id: {type(e).__name__}: {e}"))
                continue
            with self._cv:
                requests = self._drain(ready)
            for topic, batches in requests:
                self._pool.submit(self._send, topic, batches)

    def _drain(self, ready: list[_Batch]) -> list[tuple[str, list[_Batch]]]:
        """Mark ``ready`` in flight, give new batches their sequences, group them into requests per topic."""
        by_topic: dict[str, list[_Batch]] = {}
        out = []
        for b in ready:
            tp = (b.topic, b.partition)
            queue = self._queues[tp]
            if tp in self._in_flight or not queue or queue[0] is not b:  # failed or re-queued meanwhile
                continue
            queue.popleft()
            self._in_flight.add(tp)
            b.closed = True
            if self.transactional_id is not None:
                self._txn_started = True  # the front begins the transaction with this write
            if self.idempotent and (b.base_sequence is None or b.producer_id != self._producer_id):
                seq = self._sequences.get(tp, 0)
                b.base_sequence, b.producer_id = seq, self._producer_id
                self._sequences[tp] = (seq + len(b.records)) % (INT32_MAX + 1)
            if b.solo:
                out.append((b.topic, [b]))
            else:
                by_topic.setdefault(b.topic, []).append(b)
        for topic, batches in by_topic.items():
            chunk, size = [], 0
            for b in batches:
                if chunk and size + b.size > self.max_request_size:
                    out.append((topic, chunk))
                    chunk, size = [], 0
                chunk.append(b)
                size += b.size
            out.append((topic, chunk))
        self._requests += len(out)
        return out

    def _ensure_producer_id(self) -> None:
        if not self.idempotent or self._producer_id >= 0:
            return
        if self.transactional_id is not None:  # send() refuses records before init_transactions: a bug
            raise InvalidTxnState("a transactional producer takes its producer id from init_transactions()")
        body = {"transactional_id": self.transactional_id} if self.transactional_id else {}
        out = self.transport.json("POST", "/v1/producers", json=body)
        with self._cv:
            self._producer_id, self._epoch = out["producer_id"], out["producer_epoch"]
            self._sequences.clear()

    def _on_init_failure(self, error: KafkaError) -> None:
        if not error.retriable:
            self._fail_everything(error)
            return
        now = time.monotonic()
        with self._cv:
            expired = []
            for queue in self._queues.values():
                while queue and queue[0].deadline <= now:
                    expired.append(queue.popleft())
        for b in expired:
            self._finish(b, RequestTimedOut(f"delivery_timeout_ms expired for {len(b.futures)} records of "
                                            f"{b.topic}-{b.partition} while no producer id could be obtained: "
                                            f"{error}"), in_flight=False)
        time.sleep(self.backoff_s)

    def _body(self, batches: list[_Batch]) -> dict:
        if self.idempotent:
            return {"producer_id": self._producer_id, "producer_epoch": self._epoch, "encoding": "base64",
                    "batches": [{"partition": b.partition, "base_sequence": b.base_sequence, "records": b.records}
                                for b in batches]}
        records = []
        for b in batches:
            records.extend(dict(r, partition=b.partition) for r in b.records)
        return {"records": records, "encoding": "base64"}

    def _send(self, topic: str, batches: list[_Batch]) -> None:
        """One produce request (a pool thread); every outcome ends in _complete or _retry per batch."""
        try:
            try:
                data = json.dumps(self._body(batches)).encode()
                prefix = f"{self._txn_path}/topics" if self.transactional_id is not None else "/v1/topics"
                response = self.transport.request("POST", f"{prefix}/{quote(topic, safe='')}/records",
                                                  content=data, headers={"Content-Type": "application/json"})
                results = {r["partition"]: r for r in response.json()["results"]}
            except KafkaError as e:
                if len(batches) > 1 and not e.retriable:
                    # refused as a whole: resend each batch alone so only the offending one fails
                    for b in batches:
                        b.solo = True
                        self._requeue(b, time.monotonic())
                    return
                for b in batches:
                    self._retry_or_fail(b, e, ambiguous=e.retriable)
                return
            for b in batches:
                r = results.get(b.partition)
                if r is None:
                    self._retry_or_fail(b, InvalidRequest(f"no result for partition {b.partition}"), ambiguous=True)
                elif r["error_code"] == 0:
                    self._complete(b, r)
                else:
                    err = error_for_code(r["error_code"], r.get("message") or "")
                    self._retry_or_fail(b, err, ambiguous=err.retriable)
        except Exception as e:  # never leave futures hanging
            for b in batches:
                if not all(f.done() for f in b.futures):
                    self._finish(b, error=KafkaError(f"{type(e).__name__}: {e}"))
        finally:
            with self._cv:
                self._requests -= 1
                self._cv.notify_all()

    def _complete(self, b: _Batch, result: dict) -> None:
        base, append_time = result["base_offset"], result.get("log_append_time", -1)
        for i, f in enumerate(b.futures):
            # a transactional batch is staged, not appended: -1 until the commit assigns offsets
            f.set_result(RecordMetadata(b.topic, b.partition, base + i if base >= 0 else -1, append_time))
        self._finish(b)

    def _finish(self, b: _Batch, error: KafkaError | None = None, *, in_flight: bool = True) -> None:
        if error is not None:
            for f in b.futures:
                if not f.done():
                    f.set_exception(error)
        with self._cv:
            if in_flight:
                self._in_flight.discard((b.topic, b.partition))
            self._buffered -= b.size
            self._pending -= len(b.futures)
            self._cv.notify_all()

    def _retry_or_fail(self, b: _Batch, error: KafkaError, *, ambiguous: bool) -> None:
        now = time.monotonic()
        b.attempts += 1
        backoff = min(self.backoff_s * (2 ** (b.attempts - 1)), self.backoff_max_s)
        if error.retriable and now + backoff < b.deadline and self._fatal is None:
            self._requeue(b, now + backoff)
            return
        final = error if not error.retriable else RequestTimedOut(
            f"delivery_timeout_ms expired for {len(b.futures)} records of {b.topic}-{b.partition} after "
            f"{b.attempts} attempts; last error: {error}")
        with self._cv:
            if isinstance(error, ProducerFenced) or (self.transactional_id is not None
                                                     and isinstance(error, _TXN_FATAL)):
                self._fatal = error
            elif self.transactional_id is not None:
                # the transaction cannot commit any more (Kafka's abortable error); the producer id stays
                self._txn_error = self._txn_error or final
                if ambiguous:
                    self._txn_bump = True
                elif b.base_sequence is not None:
                    self._sequences[(b.topic, b.partition)] = b.base_sequence
            elif self.idempotent and (ambiguous or isinstance(error, _RESET_ERRORS)):
                # the batch may have landed, or our sequence state is not the front's: take a new
                # producer id so no later batch can be mistaken for (or blocked by) this one
                self._producer_id = -1
                for queue in self._queues.values():
                    for other in queue:
                        other.base_sequence = None
            elif self.idempotent and b.base_sequence is not None:
                # nothing of the batch was written: the next batch reuses its sequence
                self._sequences[(b.topic, b.partition)] = b.base_sequence
        self._finish(b, final)
        if self._fatal is not None:
            self._fail_everything(self._fatal)

    def _requeue(self, b: _Batch, at: float) -> None:
        """Put an in-flight batch back at the head of its partition queue (order is kept: nothing passed it)."""
        b.next_attempt = at
        with self._cv:
            self._queues[(b.topic, b.partition)].appendleft(b)
            self._in_flight.discard((b.topic, b.partition))
            self._cv.notify_all()

    def _fail_everything(self, error: KafkaError) -> None:
        with self._cv:
            self._fatal = self._fatal or error
            batches = [b for q in self._queues.values() for b in q]
            for q in self._queues.values():
                q.clear()
        for b in batches:
            for f in b.futures:
                if not f.done():
                    f.set_exception(error)
            with self._cv:
                self._buffered -= b.size
                self._pending -= len(b.futures)
                self._cv.notify_all()
