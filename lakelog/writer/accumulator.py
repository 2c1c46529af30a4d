"""Group commit: gather appends, commit them together.

:class:`RecordAccumulator` collects appends per topic and hands them to that
topic's committer in one Delta commit when ``linger.ms`` has passed since the
oldest pending append or ``batch.size`` bytes are pending -- whichever comes
first (Kafka's producer accumulator, moved to the writer side).  While a commit
is in flight new appends keep gathering, so the commit rate adapts to load.  One
commit takes at most ``max_commit_bytes`` of them (default four ``batch.size``):
the time a commit spends writing grows with its size locally, while on an object
store a commit costs about two round trips whatever it carries, so
:meth:`lakelog.log.Log.accumulator` lets it carry more there.

When ``buffer.memory`` bytes are pending, :meth:`append` fails fast with the
retriable ``THROTTLING_QUOTA_EXCEEDED`` instead of blocking or dropping data.

With ``append_pipelined`` (:meth:`lakelog.log.Log.append_pipelined`, which
object stores use), the sender hands a group over and moves on while its
segments upload and its commit PUT is in flight; its appends resolve when the
PUT is concluded, in commit order.  A partition has at most one group
uploading: a group that touches a partition still uploading waits until that
upload is done (and meanwhile keeps gathering), so a partition's segments
grow with the load as they did when the sender waited for every upload, while
groups over other partitions upload at once instead of queueing behind it.
With ``eager_uploads`` an upload holds the next group back only while the
partition's bytes in flight reach ``batch.size``: below that (a group that
lingered, not one that filled) the next group uploads at once, for lower
latency at the cost of more, smaller segments; groups that fill
``batch.size`` (large requests, a partition's backlog) gather as before.

Thread-safe: :meth:`append` may be called from any thread and returns a
``concurrent.futures.Future``; one sender thread per topic does all blocking
I/O (so asyncio callers wrap the future and never block their loop).
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections import deque
from concurrent.futures import Future
from typing import Callable

from lakelog.errors import KafkaError, KafkaStorageError, ThrottlingQuotaExceeded
from lakelog.storage.storage_failure import storage_failure
from lakelog.writer.records import AppendResult, PartitionBatch

log = logging.getLogger(__name__)

# One Delta commit of a topic's batches, one result per batch (``Log.append_batches``). The accumulator takes the
# function rather than the Log so that the writer package does not import the facade that builds on it.
AppendBatches = Callable[[str, list[PartitionBatch]], "list[AppendResult | KafkaError]"]
# The same, returning once the segments' uploads are under way: (a future of its results, the uploads' futures)
# (``Log.append_pipelined``).
AppendPipelined = Callable[[str, list[PartitionBatch]], "tuple[Future[list[AppendResult | KafkaError]], list[Future]]"]

DEFAULT_LINGER_MS = 5
DEFAULT_BATCH_SIZE = 1 << 20
DEFAULT_BUFFER_MEMORY = 64 << 20
# On object stores (Log.accumulator): a commit cycle there is a few hundred ms of PUTs, so 100 MB/s needs tens of
# MB in flight, and 4 MB segments across 16 partitions need commits of 64 MB and more (BENCHMARKS.md, "Produce on
# object storage").
OBJECT_STORE_BUFFER_MEMORY = 256 << 20


class _TopicQueue:
    def __init__(self, lock: threading.Lock) -> None:
        self.items: deque[tuple[list[PartitionBatch], Future, float, int]] = deque()
        self.bytes = 0
        # partition -> items queued for it: kept as items come and go, so the sender's check on every wake-up
        # does not walk the queue (hundreds of items under load)
        self.pending: dict[int, int] = {}
        # partition -> bytes of its groups uploading (a partition is in it while any of them is in flight)
        self.uploading: dict[int, int] = {}
        self.thread: threading.Thread | None = None
        self.ready = threading.Condition(lock)  # this topic's sender waits here, and only it


class RecordAccumulator:
    """Per-topic queues of pending appends and their sender threads."""

    def __init__(self, append_batches: AppendBatches, *, linger_ms: float = DEFAULT_LINGER_MS,
                 batch_size: int = DEFAULT_BATCH_SIZE,
                 buffer_memory: int = DEFAULT_BUFFER_MEMORY, max_commit_bytes: int | None = None,
                 on_commit: Callable[[str, int, int, float], None] | None = None,
                 append_pipelined: AppendPipelined | None = None,
                 on_stages: Callable[[str, dict[str, float]], None] | None = None,
                 eager_uploads: bool = False) -> None:
        self.append_batches = append_batches
        self.append_pipelined = append_pipelined
        self.linger_s = linger_ms / 1000.0
        self.batch_size = batch_size
        self.max_commit_bytes = max_commit_bytes if max_commit_bytes is not None else 4 * batch_size
        self.buffer_memory = buffer_memory
        self.on_commit = on_commit  # (topic, records, bytes, seconds) after each commit, for metrics
        # (topic, {"queue": seconds}) as each group is taken: how long its oldest append waited for it (linger.ms,
        # or a group ahead uploading one of its partitions), for metrics
        self.on_stages = on_stages
        # A partition's uploads hold its next group back from this many bytes in flight (1: any upload holds it)
        self.hold_bytes = batch_size if eager_uploads else 1
        # One lock; a condition per topic for its sender and one for flush(), so an append wakes only its own
        # topic's sender -- and only when that sender must act now -- instead of every thread in the process.
        self._lock = threading.Lock()
        self._drained = threading.Condition(self._lock)
        self._queues: dict[str, _TopicQueue] = {}
        self._buffered = 0
        self._closed = False

    @property
    def buffered_bytes(self) -> int:
        """Bytes appended but not yet committed (the accumulator's fill)."""
        return self._buffered

    def append(self, topic: str, batches: list[PartitionBatch]) -> "Future[list[AppendResult | KafkaError]]":
        """Queue ``batches`` for ``topic``; the future resolves after their commit (one result per batch)."""
        size = sum(b.nbytes for b in batches)
        fut: Future = Future()
        with self._lock:
            if self._closed:
                raise KafkaStorageError("the accumulator is closed")
            if self._buffered + size > self.buffer_memory and (self._buffered > 0 or size > self.buffer_memory):
                raise ThrottlingQuotaExceeded(
                    f"buffer.memory={self.buffer_memory} is full ({self._buffered} bytes pending, "
                    f"append of {size} bytes refused); retry after a short back-off")
            q = self._queues.get(topic)
            if q is None:
                q = self._queues[topic] = _TopicQueue(self._lock)
            was_empty = not q.items
            q.items.append((batches, fut, time.monotonic(), size))
            q.bytes += size
            for b in batches:
                q.pending[b.partition] = q.pending.get(b.partition, 0) + 1
            self._buffered += size
            if q.thread is None:
                q.thread = threading.Thread(target=self._run, args=(topic, q), name=f"lakelog-sender-{topic}",
                                            daemon=True)
                q.thread.start()
            elif was_empty or q.bytes >= self.batch_size:  # otherwise the sender is already timing linger.ms
                q.ready.notify()
        return fut

    def _take(self, q: _TopicQueue) -> list | None:
        with self._lock:
            while True:
                if q.items and any(q.uploading.get(p, 0) >= self.hold_bytes for p in q.pending):
                    q.ready.wait()  # an upload's end notifies; what comes meanwhile joins this group
                    continue
                if q.items:
                    age = time.monotonic() - q.items[0][2]
                    if q.bytes >= self.batch_size or age >= self.linger_s or self._closed:
                        taken, taken_bytes = [], 0
                        while q.items and (not taken or taken_bytes < self.max_commit_bytes):
                            item = q.items.popleft()
                            taken.append(item)
                            taken_bytes += item[3]
                            for b in item[0]:
                                q.pending[b.partition] -= 1
                                if not q.pending[b.partition]:
                                    del q.pending[b.partition]
                        q.bytes -= taken_bytes
                        return taken
                    q.ready.wait(self.linger_s - age)
                elif self._closed:
                    return None
                else:
                    q.ready.wait(1.0)

    def _run(self, topic: str, q: _TopicQueue) -> None:
        last: Future | None = None  # the latest group's results: the sender stops only once it is concluded
        while True:
            taken = self._take(q)
            if taken is None:
                if last is not None:
                    last.exception()
                return
            flat = [b for batches, _, _, _ in taken for b in batches]
            started = time.monotonic()
            if self.on_stages is not None:
                try:
                    self.on_stages(topic, {"queue": started - taken[0][2]})
                except Exception as e:  # a metrics hook must not stop the sender
                    log.warning("reporting the queue time of %s failed: %s", topic, e)
            try:
                if self.append_pipelined is not None:
                    outcome, uploads = self.append_pipelined(topic, flat)
                    self._track_uploads(q, flat, uploads)
                else:
                    outcome = Future()
                    outcome.set_result(self.append_batches(topic, flat))
            except KafkaError as e:
                outcome = Future()
                outcome.set_result([e] * len(flat))
            except Exception as e:  # never let the sender die with futures unresolved
                outcome = Future()
                outcome.set_result([storage_failure(f"append to {topic} failed", e, log)] * len(flat))
            outcome.add_done_callback(functools.partial(self._deliver, topic, taken, started, len(flat)))
            last = outcome

    def _track_uploads(self, q: _TopicQueue, batches: list[PartitionBatch], uploads: list[Future]) -> None:
        """Count the group's ``batches`` as uploading, by partition and bytes, until every one of ``uploads`` is
        done, then wake the sender."""
        if not uploads:
            return
        sizes: dict[int, int] = {}
        for b in batches:  # at least 1 per partition: an empty batch's upload counts as in flight
            sizes[b.partition] = sizes.get(b.partition, 0) + max(b.nbytes, 1)
        left = [len(uploads)]  # only the last callback takes the group's bytes off

        def done(_: Future) -> None:
            with self._lock:
                left[0] -= 1
                if not left[0]:
                    for p, n in sizes.items():
                        q.uploading[p] -= n
                        if not q.uploading[p]:
                            del q.uploading[p]
                    q.ready.notify()

        with self._lock:
            for p, n in sizes.items():
                q.uploading[p] = q.uploading.get(p, 0) + n
        for upload in uploads:
            upload.add_done_callback(done)

    def _deliver(self, topic: str, taken: list, started: float, count: int, outcome: Future) -> None:
        """Resolve a group's appends with its commit's results (on whichever thread concluded the commit)."""
        try:
            results = outcome.result()
        except Exception as e:
            results = [storage_failure(f"append to {topic} failed", e, log)] * count
        elapsed = time.monotonic() - started
        i = 0
        for batches, fut, _, _ in taken:
            fut.set_result(results[i:i + len(batches)])
            i += len(batches)
        taken_bytes = sum(item[3] for item in taken)
        with self._lock:
            self._buffered -= taken_bytes
            self._drained.notify_all()
        if self.on_commit is not None:
            ok = [r for r in results if isinstance(r, AppendResult) and not r.duplicate]
            self.on_commit(topic, sum(r.record_count for r in ok), taken_bytes, elapsed)

    def flush(self, timeout: float | None = None) -> None:
        """Wait until everything appended so far is committed (or failed)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            while self._buffered > 0:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise TimeoutError("flush timed out")
                self._drained.wait(remaining if remaining is not None else 1.0)

    def close(self) -> None:
        """Commit what is pending, then stop the sender threads."""
        with self._lock:
            self._closed = True
            for q in self._queues.values():
                q.ready.notify_all()
            self._drained.notify_all()
            threads = [q.thread for q in self._queues.values() if q.thread]
        for t in threads:
            t.join()
