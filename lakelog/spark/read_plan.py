"""Planning a read: from topic snapshots and offset ranges to picklable read tasks.

Runs on the driver.  Each requested ``[start, end)`` range of a partition is
cut at segment boundaries into :class:`SegmentSlice` s (file path + offset
range); a slice larger than the split size is cut further at row-group
boundaries (segments are written in row groups of a power-of-two number of rows
that divides :data:`~lakelog.writer.segment_writer.ROW_GROUP_SIZE`, and readers skip
row groups by their ``offset`` statistics, so a slice reads only its own row
groups).  Slices are then packed, in offset order, into :class:`ReadTask` s
the way Spark packs files: up to ``max_split_bytes`` each, counting an open
cost per file so thousands of tiny segments don't become thousands of tasks.
``min_partitions`` lowers the split size so the plan has at least that many
tasks when the data allows (the Kafka source's ``minPartitions``).

Pure: no I/O, no Spark.  Plans are deterministic for the same inputs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Mapping

from lakelog.storage.topic_snapshot import TopicSnapshot
from lakelog.writer.segment_writer import ROW_GROUP_SIZE

MAX_SPLIT_BYTES = 128 * 1024 * 1024  # spark.sql.files.maxPartitionBytes
OPEN_COST_BYTES = 4 * 1024 * 1024  # spark.sql.files.openCostInBytes


@dataclass(frozen=True)
class OffsetRange:
    """Offsets ``start <= offset < end`` of one partition."""

    topic: str
    partition: int
    start: int
    end: int


@dataclass(frozen=True)
class SegmentSlice:
    """Records of one segment file (table-relative ``path``) with ``start <= offset < end``."""

    topic: str
    partition: int
    path: str
    start: int
    end: int
    bytes: int  # estimated share of the file's size
    file_bytes: int = 0  # the whole file's size (0: unknown)
    whole: bool = False  # the slice holds every offset of the file: it may be fetched in one request


@dataclass(frozen=True)
class ReadTask:
    """The slices one Spark task reads, in order."""

    slices: tuple[SegmentSlice, ...]


def segment_slices(snap: TopicSnapshot, r: OffsetRange) -> list[SegmentSlice]:
    """The slices of ``r``, one per segment holding offsets in it, in offset order."""
    out: list[SegmentSlice] = []
    if r.start >= r.end:
        return out
    for seg in snap.index.segments_from(r.partition, r.start):
        if seg.base_offset >= r.end:
            break
        lo, hi = max(r.start, seg.base_offset), min(r.end, seg.last_offset + 1)
        if lo >= hi:
            continue
        span = max(1, seg.last_offset + 1 - seg.base_offset)
        out.append(SegmentSlice(r.topic, r.partition, seg.path, lo, hi, max(1, seg.bytes * (hi - lo) // span),
                                seg.bytes, lo <= seg.base_offset and hi > seg.last_offset))
    return out


def split_slice(s: SegmentSlice, max_bytes: int) -> list[SegmentSlice]:
    """``s`` cut into ``ceil(bytes / max_bytes)`` pieces (at most one per offset), at row-group boundaries
    when it spans at least that many row groups."""
    n = s.end - s.start
    pieces = min(n, math.ceil(s.bytes / max_bytes)) if max_bytes > 0 else 1
    if pieces <= 1:
        return [s]
    groups = math.ceil(n / ROW_GROUP_SIZE)
    if groups >= pieces:
        bounds = [min(s.end, s.start + (k * groups // pieces) * ROW_GROUP_SIZE) for k in range(pieces + 1)]
    else:
        bounds = [s.start + k * n // pieces for k in range(pieces + 1)]
    bounds[-1] = s.end
    return [SegmentSlice(s.topic, s.partition, s.path, lo, hi, max(1, s.bytes * (hi - lo) // n), s.file_bytes)
            for lo, hi in zip(bounds, bounds[1:]) if hi > lo]


def plan_reads(snapshots: Mapping[str, TopicSnapshot], ranges: Iterable[OffsetRange], *,
               min_partitions: int | None = None, max_split_bytes: int = MAX_SPLIT_BYTES,
               open_cost_bytes: int = OPEN_COST_BYTES) -> list[ReadTask]:
    """Read tasks covering exactly the records of ``ranges`` (each range of a distinct partition)."""
    slices: list[SegmentSlice] = []
    for r in sorted(ranges, key=lambda r: (r.topic, r.partition)):
        slices.extend(segment_slices(snapshots[r.topic], r))
    if not slices:
        return []
    split = max_split_bytes
    if min_partitions:
        split = max(1, min(split, sum(s.bytes for s in slices) // min_partitions))
    pieces: list[SegmentSlice] = []
    for s in slices:
        pieces.extend(split_slice(s, split) if s.bytes > split else [s])
    tasks = _pack(pieces, split, open_cost_bytes)
    if min_partitions and len(tasks) < min_partitions:
        tasks = [ReadTask((s,)) for s in pieces]  # packing merged too much: one task per piece
    return tasks


def _pack(pieces: list[SegmentSlice], split: int, open_cost_bytes: int) -> list[ReadTask]:
    tasks: list[ReadTask] = []
    current: list[SegmentSlice] = []
    size = 0
    for s in pieces:
        cost = s.bytes + open_cost_bytes
        if current and size + cost > split:
            tasks.append(ReadTask(tuple(current)))
            current, size = [], 0
        current.append(s)
        size += cost
    if current:
        tasks.append(ReadTask(tuple(current)))
    return tasks
