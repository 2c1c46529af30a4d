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

The parts are Kafka's: the :class:`~lakelog.client.record_accumulator.RecordAccumulator` batches, the
:class:`~lakelog.client.sender.Sender` sends, the :class:`~lakelog.client.transaction_manager.TransactionManager`
keeps the producer id, sequences and transactions.
"""

from __future__ import annotations

import base64
import time
from concurrent.futures import Future
from urllib.parse import quote

from lakelog.client.record_accumulator import RecordAccumulator
from lakelog.client.sender import RecordMetadata, Sender
from lakelog.client.transaction_manager import TransactionAborted, TransactionManager
from lakelog.client.transport import Transport
from lakelog.errors import InvalidConfig, InvalidRequest, KafkaError, UnknownTopicOrPartition
from lakelog.storage.record_fields import as_bytes
from lakelog.writer.partitioner import StickyPartitioner, partition_for_key

__all__ = ["Producer", "RecordMetadata", "TransactionAborted"]

_RECORD_OVERHEAD = 70  # JSON framing per record, for batch sizing


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
        self.transactional_id = transactional_id
        self.idempotent = enable_idempotence or transactional_id is not None
        self.max_block_s = max_block_ms / 1000.0
        self.metadata_max_age_s = metadata_max_age_ms / 1000.0
        self.sticky = StickyPartitioner()
        self._partitions: dict[str, tuple[float, int]] = {}
        backoff_s, backoff_max_s = retry_backoff_ms / 1000.0, retry_backoff_max_ms / 1000.0
        self._accumulator = RecordAccumulator(linger_s=linger_ms / 1000.0, batch_size=batch_size,
                                              buffer_memory=buffer_memory, max_request_size=max_request_size,
                                              delivery_timeout_s=delivery_timeout_ms / 1000.0)
        self._txn = TransactionManager(self.transport, self._accumulator, idempotent=self.idempotent,
                                       transactional_id=transactional_id,
                                       transaction_timeout_ms=transaction_timeout_ms, backoff_s=backoff_s,
                                       backoff_max_s=backoff_max_s, max_block_s=self.max_block_s)
        self._sender = Sender(self.transport, self._accumulator, self._txn, max_in_flight=max_in_flight_requests,
                              backoff_s=backoff_s, backoff_max_s=backoff_max_s)

    # -- metadata -------------------------------------------------------------------------
    def partitions_for(self, topic: str, *, refresh: bool = False) -> int:
        """The topic's partition count (cached for ``metadata_max_age_ms``); like Kafka's ``partitionsFor``, the
        lookup waits up to ``max.block.ms``, not ``request.timeout.ms``."""
        cached = self._partitions.get(topic)
        if cached is not None and not refresh and time.monotonic() - cached[0] < self.metadata_max_age_s:
            return cached[1]
        desc = self.transport.json("GET", f"/v1/topics/{quote(topic, safe='')}", timeout=self.max_block_s)
        n = len(desc["partitions"])
        self._partitions[topic] = (time.monotonic(), n)
        return n

    # -- sending --------------------------------------------------------------------------
    def send(self, topic: str, value=None, key=None, *, partition: int | None = None,
             headers: list[tuple[str, bytes | str | None]] | dict | None = None,
             timestamp_ms: int | None = None) -> "Future[RecordMetadata]":
        """Queue one record; the future resolves once it is committed (or fails).  A transactional producer
        sends only inside a transaction, and its records' offsets are -1 (assigned at commit)."""
        if self._txn.fatal is not None:
            raise self._txn.fatal
        if self._accumulator.closed:
            raise InvalidRequest("the producer is closed")
        self._txn.check_can_send()
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
        # Kafka moves the sticky partition per new batch
        sticky = (lambda: self.sticky.on_new_batch(topic, n, p)) if k is None and partition is None else None
        self._accumulator.append(topic, p, record, size, future, self.max_block_s, sticky)
        return future

    def flush(self, timeout: float | None = None) -> None:
        """Send everything queued now and wait until every record sent so far is acknowledged or failed."""
        self._accumulator.flush(timeout)

    def close(self, timeout: float | None = None) -> None:
        """Flush (abort an open transaction, as Kafka's producer does), then stop the sender and release
        connections."""
        try:
            if self._txn.fatal is None and self._txn.in_txn and not self._txn.ending:
                try:
                    self.abort_transaction(timeout)
                except KafkaError:
                    pass  # the coordinator aborts it after transaction_timeout_ms anyway
            if self._txn.fatal is None:
                self.flush(timeout)
        finally:
            self._accumulator.close()
            self._sender.close()
            self.transport.close()

    def __enter__(self) -> "Producer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- transactions ---------------------------------------------------------------------
    def init_transactions(self, timeout: float | None = None) -> None:
        """InitProducerId for the transactional id (``transaction_timeout_ms`` is the coordinator's
        transaction.timeout.ms): takes the id's producer id with a new epoch, fencing any older instance and
        aborting a transaction it left open.  Call once, before the first :meth:`begin_transaction`."""
        self._txn.init_transactions(timeout)

    def begin_transaction(self) -> None:
        """Open a transaction (locally: the front begins it with the first write, as Kafka's coordinator)."""
        self._txn.begin_transaction()

    def send_offsets_to_transaction(self, offsets, group_id, timeout: float | None = None) -> None:
        """Commit consumer offsets with the transaction (committed at its commit, never if it aborts).

        ``offsets``: ``[(topic, partition, offset[, metadata])]`` or ``{(topic, partition): offset}``
        (TopicPartition / OffsetAndMetadata accepted); offsets are those of the next record to consume.
        ``group_id``: the group's id or a consumer's :meth:`group_metadata`.  Flushes pending sends first."""
        self._txn.send_offsets_to_transaction(offsets, group_id, timeout)

    def commit_transaction(self, timeout: float | None = None) -> None:
        """Flush every pending send, then EndTxn(commit): returns once the transaction's records are in their
        topics and its offsets committed.  If a send of the transaction failed, raises that error and the
        transaction must be aborted; a retriable failure (timeout) may be retried by calling this again."""
        self._txn.commit_transaction(timeout)

    def abort_transaction(self, timeout: float | None = None) -> None:
        """Drop the records not sent yet (their futures fail with :class:`TransactionAborted`), wait for the
        requests in flight, then EndTxn(abort): nothing of the transaction is ever visible.  A new transaction
        may begin afterwards."""
        self._txn.abort_transaction(timeout)
