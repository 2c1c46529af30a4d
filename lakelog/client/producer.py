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
from dataclasses import dataclass, field
from urllib.parse import quote

from lakelog.errors import (InvalidProducerEpoch, InvalidRequest, KafkaError, OutOfOrderSequenceNumber,
                            ProducerFenced, RequestTimedOut, UnknownProducerId, UnknownTopicOrPartition,
                            error_for_code)
from lakelog.writer.partitioner import StickyPartitioner, partition_for_key
from lakelog.storage.record_fields import as_bytes
from lakelog.storage.producer_state import INT32_MAX
from lakelog.client.transport import Transport

_RESET_ERRORS = (OutOfOrderSequenceNumber, InvalidProducerEpoch, UnknownProducerId)
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


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


class Producer:
    """An (idempotent by default) producer for one front."""

    def __init__(self, bootstrap: str, *, token: str | None = None, linger_ms: float = 5.0,
                 batch_size: int = 16384, enable_idempotence: bool = True, transactional_id: str | None = None,
                 delivery_timeout_ms: int = 120_000, request_timeout_ms: int = 30_000,
                 retry_backoff_ms: int = 100, retry_backoff_max_ms: int = 1000, max_in_flight_requests: int = 5,
                 max_request_size: int = 1 << 20, buffer_memory: int = 32 << 20, max_block_ms: int = 60_000,
                 metadata_max_age_ms: int = 60_000) -> None:
        self.transport = Transport(bootstrap, token=token, timeout=request_timeout_ms / 1000.0,
                                   max_connections=max_in_flight_requests + 2)
        self.linger_s = linger_ms / 1000.0
        self.batch_size = batch_size
        self.idempotent = enable_idempotence or transactional_id is not None
        self.transactional_id = transactional_id
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
        """Queue one record; the future resolves once it is committed (or fails)."""
        if self._fatal is not None:
            raise self._fatal
        if self._closed:
            raise InvalidRequest("the producer is closed")
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
        """Flush, then stop the sender and release connections."""
        try:
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
                response = self.transport.request("POST", f"/v1/topics/{quote(topic, safe='')}/records",
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
            f.set_result(RecordMetadata(b.topic, b.partition, base + i, append_time))
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
        with self._cv:
            if isinstance(error, ProducerFenced):
                self._fatal = error
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
        if error.retriable:
            error = RequestTimedOut(f"delivery_timeout_ms expired for {len(b.futures)} records of "
                                    f"{b.topic}-{b.partition} after {b.attempts} attempts; last error: {error}")
        self._finish(b, error)
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
