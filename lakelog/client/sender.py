"""The producer's sender (Kafka's ``Sender``): one thread that drains ready batches into produce requests, one
request per topic, up to ``max_in_flight_requests`` at a time on a small pool, and settles every batch's outcome.

Retriable failures (connection errors, 429/503 back-pressure, storage errors) are retried with exponential
back-off until the batch's delivery timeout; the front answers a retry of a committed batch with its original
offsets (``duplicate``), so nothing is written twice. A request refused as a whole is split: each batch is sent
alone, so only the offending one fails.

Thread-safe: its request count is guarded by the accumulator's condition.
"""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from urllib.parse import quote

from lakelog.client.record_accumulator import ProducerBatch, RecordAccumulator
from lakelog.client.transaction_manager import TransactionManager
from lakelog.client.transport import Transport
from lakelog.errors import InvalidRequest, KafkaError, RequestTimedOut, error_for_code


@dataclass(frozen=True)
class RecordMetadata:
    """Where a record landed."""

    topic: str
    partition: int
    offset: int
    log_append_time: int = -1  # epoch ms when the topic stamps LogAppendTime, else -1


class Sender:
    """Sends what ``accumulator`` has ready, as ``txn`` (producer id, sequences) says."""

    def __init__(self, transport: Transport, accumulator: RecordAccumulator, txn: TransactionManager, *,
                 max_in_flight: int, backoff_s: float, backoff_max_s: float) -> None:
        self.transport, self.accumulator, self.txn = transport, accumulator, txn
        self.cv = accumulator.cv
        self.max_in_flight = max_in_flight
        self.backoff_s, self.backoff_max_s = backoff_s, backoff_max_s
        self._requests = 0  # produce requests in flight
        self._pool = ThreadPoolExecutor(max_workers=max_in_flight, thread_name_prefix="lakelog-request")
        self._thread = threading.Thread(target=self._run, name="lakelog-producer-sender", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop once everything appended is settled (the accumulator is closed), and wait for the requests."""
        self._thread.join(timeout=5)
        self._pool.shutdown(wait=True)

    def _run(self) -> None:
        try:
            self._loop()
        except Exception as e:  # a bug must not leave futures hanging forever
            self.txn.fail_everything(KafkaError(f"the producer's sender thread failed: {type(e).__name__}: {e}"))

    def _loop(self) -> None:
        acc = self.accumulator
        while True:
            with self.cv:
                while True:
                    if acc.closed and acc.pending == 0:
                        return
                    now = time.monotonic()
                    ready, wake = acc.ready(now)
                    if ready and self._requests < self.max_in_flight:
                        break
                    self.cv.wait(max(0.001, wake - now) if ready == [] else 0.05)
            try:
                self.txn.ensure_producer_id()
            except KafkaError as e:
                self._on_init_failure(e)
                continue
            except Exception as e:  # an unreadable answer: treat like a retriable failure
                self._on_init_failure(RequestTimedOut(f"init producer id: {type(e).__name__}: {e}"))
                continue
            with self.cv:
                requests = acc.drain(ready, self.txn.prepare)
                self._requests += len(requests)
            for topic, batches in requests:
                self._pool.submit(self._send, topic, batches)

    def _on_init_failure(self, error: KafkaError) -> None:
        if not error.retriable:
            self.txn.fail_everything(error)
            return
        for b in self.accumulator.take_expired(time.monotonic()):
            self.accumulator.finish(b, RequestTimedOut(
                f"delivery_timeout_ms expired for {len(b.futures)} records of {b.topic}-{b.partition} while no "
                f"producer id could be obtained: {error}"), in_flight=False)
        time.sleep(self.backoff_s)

    def _body(self, batches: list[ProducerBatch]) -> dict:
        if self.txn.idempotent:
            return {"producer_id": self.txn.producer_id, "producer_epoch": self.txn.epoch, "encoding": "base64",
                    "batches": [{"partition": b.partition, "base_sequence": b.base_sequence, "records": b.records}
                                for b in batches]}
        records = []
        for b in batches:
            records.extend(dict(r, partition=b.partition) for r in b.records)
        return {"records": records, "encoding": "base64"}

    def _send(self, topic: str, batches: list[ProducerBatch]) -> None:
        """One produce request (a pool thread); every outcome ends in _complete or _retry_or_fail per batch."""
        try:
            try:
                data = json.dumps(self._body(batches)).encode()
                prefix = f"{self.txn.path}/topics" if self.txn.transactional_id is not None else "/v1/topics"
                response = self.transport.request("POST", f"{prefix}/{quote(topic, safe='')}/records",
                                                  content=data, headers={"Content-Type": "application/json"})
                results = {r["partition"]: r for r in response.json()["results"]}
            except KafkaError as e:
                if len(batches) > 1 and not e.retriable:
                    # refused as a whole: resend each batch alone so only the offending one fails
                    for b in batches:
                        b.solo = True
                        self.accumulator.requeue(b, time.monotonic())
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
                    self.accumulator.finish(b, error=KafkaError(f"{type(e).__name__}: {e}"))
        finally:
            with self.cv:
                self._requests -= 1
                self.cv.notify_all()

    def _complete(self, b: ProducerBatch, result: dict) -> None:
        base, append_time = result["base_offset"], result.get("log_append_time", -1)
        for i, f in enumerate(b.futures):
            # a transactional batch is staged, not appended: -1 until the commit assigns offsets
            f.set_result(RecordMetadata(b.topic, b.partition, base + i if base >= 0 else -1, append_time))
        self.accumulator.finish(b)

    def _retry_or_fail(self, b: ProducerBatch, error: KafkaError, *, ambiguous: bool) -> None:
        now = time.monotonic()
        b.attempts += 1
        backoff = min(self.backoff_s * (2 ** (b.attempts - 1)), self.backoff_max_s)
        if error.retriable and now + backoff < b.deadline and self.txn.fatal is None:
            self.accumulator.requeue(b, now + backoff)
            return
        final = error if not error.retriable else RequestTimedOut(
            f"delivery_timeout_ms expired for {len(b.futures)} records of {b.topic}-{b.partition} after "
            f"{b.attempts} attempts; last error: {error}")
        with self.cv:
            self.txn.failed(b, error, final, ambiguous=ambiguous)
        self.accumulator.finish(b, final)
        if self.txn.fatal is not None:
            self.txn.fail_everything(self.txn.fatal)
