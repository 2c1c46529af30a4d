"""Helpers of the maintenance-job tests: segment builders, brute-force models of Kafka's rules, table checks."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from spark_cluster import SPARK_ENV  # noqa: F401  (re-exported to this directory's tests)

REPO = Path(__file__).resolve().parents[2]
T0 = 1_700_000_000_000  # epoch ms of the first record in most histories


def seg(base: int, last: int | None = None, *, records: int | None = None, bytes: int = 100, max_ts_ms: int = T0,
        min_ts_ms: int | None = None, partition: int = 0, mtime: int = 0, path: str | None = None):
    """A Segment for planner tests (timestamps in ms, stored in µs as the index does)."""
    from lakelog.storage.segment_index import Segment

    last = base if last is None else last
    n = last - base + 1 if records is None else records
    return Segment(partition, base, last, n, bytes, (min_ts_ms if min_ts_ms is not None else max_ts_ms) * 1000,
                   max_ts_ms * 1000, path or f"partition={partition}/{base:020d}-x.parquet", mtime)


@dataclass
class Rec:
    offset: int
    key: bytes | None
    value: bytes | None
    ts: int = T0


@dataclass
class PartitionModel:
    """Kafka's cleaner rules applied by brute force to one partition's history.

    ``batches``: the appended batches (each became one segment); ``stamps``:
    offset -> time of the pass that first cleaned the tombstone there.
    """

    records: list[Rec] = field(default_factory=list)
    segment_bases: list[int] = field(default_factory=list)
    checkpoint: int | None = None
    stamps: dict[int, int] = field(default_factory=dict)
    log_start: int = 0
    next_offset: int = 0

    def append(self, batch: list[tuple[bytes | None, bytes | None, int]]) -> None:
        self.segment_bases.append(self.next_offset)
        for i, (k, v, ts) in enumerate(batch):
            self.records.append(Rec(self.next_offset + i, k, v, ts))
        self.next_offset += len(batch)

    def clean(self, now_ms: int, delete_retention_ms: int) -> None:
        """One pass (as the job runs it with every dirty partition selected)."""
        if len(self.segment_bases) < 2:
            return
        end = self.segment_bases[-1]
        first_dirty = self.checkpoint if self.checkpoint is not None and self.log_start <= self.checkpoint <= end \
            else self.log_start
        if end <= first_dirty:
            return  # nothing dirty: no pass
        in_range = [r for r in self.records if self.log_start <= r.offset < end]
        latest: dict[bytes, int] = {}
        for r in in_range:
            if r.key is not None:
                latest[r.key] = max(latest.get(r.key, -1), r.offset)
        kept = []
        for r in self.records:
            if not self.log_start <= r.offset < end:
                kept.append(r)
                continue
            if r.key is None or latest[r.key] != r.offset:
                self.stamps.pop(r.offset, None)
                continue
            if r.value is None:
                stamp = self.stamps.get(r.offset)
                if stamp is not None and stamp + delete_retention_ms <= now_ms:
                    self.stamps.pop(r.offset)
                    continue
                self.stamps.setdefault(r.offset, now_ms)
            kept.append(r)
        self.records = kept
        self.checkpoint = end

    def rows(self) -> list[tuple[int, bytes | None, bytes | None]]:
        return [(r.offset, r.key, r.value) for r in self.records]


def table_rows(log, topic: str, partition: int) -> list[tuple[int, bytes | None, bytes | None]]:
    """Every record of a partition through the library, as (offset, key, value)."""
    return [(r["offset"], r["key"], r["value"]) for r in log.read(topic, partition).to_pylist()]


def check_contiguous(snapshot) -> None:
    """Segments of each partition never overlap and are in offset order; the newest ends at the high watermark."""
    for p in range(snapshot.partition_count):
        segs = snapshot.index.segments(p)
        for a, b in zip(segs, segs[1:]):
            assert a.base_offset < b.base_offset and a.last_offset < b.base_offset, (a, b)
        if segs:
            assert segs[-1].last_offset + 1 == snapshot.high_watermark(p)
