"""The producer's record accumulator (Kafka's ``RecordAccumulator``): batches per partition, bounded by
``buffer_memory``, ready once full or ``linger_ms`` old, drained into requests by the sender.

At most one batch per partition is in flight (the partition is *muted* meanwhile, as Kafka's idempotent producer
with one request in flight per partition): a retried batch goes back to the head of its queue, so nothing passes
it.

Thread-safe: one condition (:attr:`RecordAccumulator.cv`) guards every queue and counter; the producer's other parts
(its sender, its transaction manager) take the same condition for their own state.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Callable, Iterator

from lakelog.errors import KafkaError, RequestTimedOut


@dataclass
class ProducerBatch:
    """Records of one partition sent (and retried) together, with one future per record."""

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


class RecordAccumulator:
    """The producer's queued batches (``linger_s``, ``batch_size``, ``buffer_memory``, ``max_request_size``)."""

    def __init__(self, *, linger_s: float, batch_size: int, buffer_memory: int, max_request_size: int,
                 delivery_timeout_s: float) -> None:
        self.linger_s, self.batch_size = linger_s, batch_size
        self.buffer_memory, self.max_request_size = buffer_memory, max_request_size
        self.delivery_timeout_s = delivery_timeout_s
        self.cv = threading.Condition()
        self._queues: dict[tuple[str, int], deque[ProducerBatch]] = {}
        self._in_flight: set[tuple[str, int]] = set()
        self._buffered = 0
        self.pending = 0  # records appended and not yet completed
        self._flushing = 0
        self.closed = False

    def append(self, topic: str, partition: int, record: dict, size: int, future: Future, max_block_s: float,
               on_new_batch: Callable[[], None] | None = None) -> None:
        """Queue ``record`` (``size`` bytes) in its partition's open batch, or a new one (``on_new_batch`` is
        called then, under the lock); waits up to ``max_block_s`` while ``buffer_memory`` is full."""
        deadline = time.monotonic() + max_block_s
        with self.cv:
            while self._buffered + size > self.buffer_memory and self._buffered > 0:
                if not self.cv.wait(max(0.0, deadline - time.monotonic())):
                    raise RequestTimedOut(f"buffer_memory={self.buffer_memory} stayed full for max_block_ms")
            queue = self._queues.setdefault((topic, partition), deque())
            batch = queue[-1] if queue else None
            if batch is None or batch.closed or (batch.records and batch.size + size > self.batch_size):
                now = time.monotonic()
                batch = ProducerBatch(topic, partition, now, deadline=now + self.delivery_timeout_s)
                queue.append(batch)
                if on_new_batch is not None:
                    on_new_batch()
            batch.records.append(record)
            batch.futures.append(future)
            batch.size += size
            self._buffered += size
            self.pending += 1
            self.cv.notify_all()

    def ready(self, now: float) -> tuple[list[ProducerBatch], float]:
        """Batches to send now (head of each partition queue with nothing in flight), and the next wake-up (lock
        held)."""
        ready, wake = [], now + 1.0
        for tp, queue in self._queues.items():
            if not queue or tp in self._in_flight:
                continue
            b = queue[0]
            due = max(b.next_attempt, b.created + self.linger_s)
            full = b.size >= self.batch_size or len(queue) > 1
            if b.next_attempt > now:
                wake = min(wake, b.next_attempt)
            elif full or self._flushing or self.closed or due <= now:
                ready.append(b)
            else:
                wake = min(wake, due)
        return ready, wake

    def drain(self, ready: list[ProducerBatch],
              prepare: Callable[[ProducerBatch], None]) -> list[tuple[str, list[ProducerBatch]]]:
        """Mark ``ready`` in flight, ``prepare`` each (its sequence), group them into requests per topic of up to
        ``max_request_size`` (lock held)."""
        by_topic: dict[str, list[ProducerBatch]] = {}
        out = []
        for b in ready:
            tp = (b.topic, b.partition)
            queue = self._queues[tp]
            if tp in self._in_flight or not queue or queue[0] is not b:  # failed or re-queued meanwhile
                continue
            queue.popleft()
            self._in_flight.add(tp)
            b.closed = True
            prepare(b)
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
        return out

    def queued(self) -> Iterator[ProducerBatch]:
        """Every batch not in flight (lock held)."""
        for queue in self._queues.values():
            yield from queue

    def take_expired(self, now: float) -> list[ProducerBatch]:
        """Remove the batches at the heads of their queues whose delivery timeout passed."""
        with self.cv:
            expired = []
            for queue in self._queues.values():
                while queue and queue[0].deadline <= now:
                    expired.append(queue.popleft())
        return expired

    def take_all(self) -> list[ProducerBatch]:
        """Remove every batch not in flight (lock held)."""
        dropped = list(self.queued())
        for queue in self._queues.values():
            queue.clear()
        return dropped

    def finish(self, b: ProducerBatch, error: KafkaError | None = None, *, in_flight: bool = True) -> None:
        """``b`` is done: fail its futures still open with ``error``, and release its partition and memory."""
        if error is not None:
            for f in b.futures:
                if not f.done():
                    f.set_exception(error)
        with self.cv:
            if in_flight:
                self._in_flight.discard((b.topic, b.partition))
            self._buffered -= b.size
            self.pending -= len(b.futures)
            self.cv.notify_all()

    def requeue(self, b: ProducerBatch, at: float) -> None:
        """Put an in-flight batch back at the head of its partition queue (order is kept: nothing passed it)."""
        b.next_attempt = at
        with self.cv:
            self._queues[(b.topic, b.partition)].appendleft(b)
            self._in_flight.discard((b.topic, b.partition))
            self.cv.notify_all()

    def flush(self, timeout: float | None = None) -> None:
        """Make every batch ready now and wait until every record appended so far is completed or failed."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self.cv:
            self._flushing += 1
            self.cv.notify_all()
            try:
                while self.pending > 0:
                    remaining = None if deadline is None else deadline - time.monotonic()
                    if remaining is not None and remaining <= 0:
                        raise RequestTimedOut(f"flush timed out with {self.pending} records pending")
                    self.cv.wait(remaining if remaining is not None else 1.0)
            finally:
                self._flushing -= 1

    def close(self) -> None:
        """No more appends: whatever is queued is sent at once."""
        with self.cv:
            self.closed = True
            self.cv.notify_all()
