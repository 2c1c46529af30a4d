"""Read-ahead of Fetch answers, so the front and a consumer work at the same time.

A Kafka consumer keeps one Fetch in flight per broker (librdkafka, the Java client): without read-ahead
the front reads and encodes a partition's next records only once asked, while the client waits, and the
client decodes them while the front waits.  After a partition is answered up to offset ``o``, the chunk
from ``o`` (same byte budget) is read and encoded on a background thread; the consumer's next Fetch for
``o`` takes it, or joins the read still in progress.  A Kafka broker gets the same overlap from the page
cache and the kernel's read-ahead.

Contract: a chunk holds only committed records, which never change (a later retention or DeleteRecords may
remove them: :meth:`FetchAhead.take` is given the partition's current log start offset and drops a chunk
below it, so an answer never contains records the log has already deleted).  High watermark and log start
in answers come from the current snapshot, not the chunk.  Bounded: at most ``max_bytes`` of encoded
chunks held, a read still in progress counted at its budget, each kept ``ttl_s`` at most, one chunk per
(topic, partition, offset).  Thread-safe.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class Chunk:
    """Encoded record batches of one partition from an offset on."""

    records: bytes
    next_offset: int  # the offset after the last record in ``records``
    high_watermark: int  # at read time: more records are known to exist when next_offset < this
    log_start_offset: int  # at read time


Reader = Callable[[str, int, int, int], Chunk]  # (topic, partition, offset, max_bytes) -> Chunk; may raise


class FetchAhead:
    def __init__(self, read: Reader, *, max_bytes: int = 64 << 20, ttl_s: float = 10.0, workers: int = 1) -> None:
        self._read = read
        self._max_bytes = max_bytes
        self._ttl_s = ttl_s
        self._lock = threading.Lock()
        self._ahead: dict[tuple[str, int, int], tuple[Future, int, float]] = {}  # key -> (chunk, budget, started)
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="kafka-fetch-ahead")
        self.hits = 0  # answers that came from read-ahead (tests and metrics)

    def take(self, topic: str, partition: int, offset: int, max_bytes: int, log_start_offset: int, *,
             min_one: bool = True) -> Chunk | None:
        """The chunk read ahead at ``offset`` if it is an answer a read of ``max_bytes`` could give (a read with
        ``min_one`` may give one record past it) and is still in the log; else None.

        Waits for a read still in progress (it started before this request and reads the same records).
        """
        with self._lock:
            entry = self._ahead.pop((topic, partition, offset), None)
        if entry is None or offset < log_start_offset:
            return None
        future, budget, _ = entry
        try:
            chunk = future.result()
        except Exception:  # the fresh read will raise the error to the client if it still applies
            return None
        # Chunks are read with min_one: past their budget only by one record.  Within max_bytes, a chunk is an
        # answer whatever its budget; past it, only the lone record a read with min_one would give too.
        if len(chunk.records) > max_bytes and not (min_one and budget <= max_bytes):
            return None
        with self._lock:
            self.hits += 1
        return chunk

    def read_ahead(self, topic: str, partition: int, chunk: Chunk, max_bytes: int) -> None:
        """Start reading the chunk after ``chunk`` if records are known to follow it and the bound allows."""
        if chunk.next_offset >= chunk.high_watermark:
            return
        key = (topic, partition, chunk.next_offset)
        now = time.monotonic()
        with self._lock:
            for k, (f, _, started) in list(self._ahead.items()):
                if now - started > self._ttl_s and f.done():
                    del self._ahead[k]
            if key in self._ahead:
                return
            held = sum(self._held_bytes(f, budget) for f, budget, _ in self._ahead.values())
            if held + max_bytes > self._max_bytes:
                return
            self._ahead[key] = (self._pool.submit(self._read, topic, partition, chunk.next_offset, max_bytes),
                                max_bytes, now)

    @staticmethod
    def _held_bytes(future: Future, budget: int) -> int:
        if not future.done():
            return budget  # what the read may still bring
        return 0 if future.exception() is not None else len(future.result().records)

    def close(self) -> None:
        """Cancel the reads not started and wait for the one in progress (it reads the log being closed)."""
        self._pool.shutdown(wait=True, cancel_futures=True)
