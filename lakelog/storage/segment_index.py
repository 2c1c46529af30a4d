"""The Arrow index: every live segment of a topic, per partition, in offset order.

A segment is one Parquet file ``partition=P/<20-digit base offset>-<unique>.parquet``
holding records of one partition in offset order.  A segment *covers* the
offsets [base_offset, next segment's base_offset); after key compaction it may
hold fewer records than that (gaps are legal), so ``last_offset`` is the last
offset actually present.  Segments of a partition never overlap.

Lookups are O(log segments): bisection over base offsets for an offset, and over
the running maximum of segments' max timestamps for a time (timestamps need not
be monotonic; the first segment whose max timestamp >= T holds the first offset
whose timestamp >= T).

Not thread-safe: mutate from one thread; readers take :meth:`copy` or an
immutable snapshot.
"""

from __future__ import annotations

import bisect
import itertools
import re
from dataclasses import dataclass
from typing import Iterable, Iterator

import pyarrow as pa

SEGMENT_NAME = re.compile(r"^partition=(-?\d+)/(\d{20})-[^/]+\.parquet$")

INDEX_SCHEMA = pa.schema(
    [
        ("partition", pa.int32()),
        ("base_offset", pa.int64()),
        ("last_offset", pa.int64()),
        ("records", pa.int64()),
        ("bytes", pa.int64()),
        ("min_timestamp", pa.int64()),  # epoch microseconds
        ("max_timestamp", pa.int64()),
        ("path", pa.string()),
        ("modification_time", pa.int64()),  # epoch ms the file was committed
    ]
)


@dataclass(frozen=True)
class Segment:
    """One segment file (a Delta add action) as the index sees it."""

    partition: int
    base_offset: int
    last_offset: int
    records: int
    bytes: int
    min_timestamp: int
    max_timestamp: int
    path: str
    modification_time: int = 0


def segment_file_name(partition: int, base_offset: int, unique: str) -> str:
    """Table-relative path of a new segment file."""
    return f"partition={partition}/{base_offset:020d}-{unique}.parquet"


class _PartitionSegments:
    __slots__ = ("segments", "bases", "max_ts_prefix")

    def __init__(self) -> None:
        self.segments: list[Segment] = []
        self.bases: list[int] = []
        self.max_ts_prefix: list[int] = []

    def rebuild(self) -> None:
        self.segments.sort(key=lambda s: s.base_offset)
        self.bases = [s.base_offset for s in self.segments]
        self.max_ts_prefix = list(itertools.accumulate((s.max_timestamp for s in self.segments), max))

    def copy(self) -> "_PartitionSegments":
        other = _PartitionSegments()
        other.segments, other.bases, other.max_ts_prefix = (list(self.segments), list(self.bases),
                                                             list(self.max_ts_prefix))
        return other


class SegmentIndex:
    """Live segments of one topic, per partition."""

    def __init__(self, segments: Iterable[Segment] = ()) -> None:
        self._parts: dict[int, _PartitionSegments] = {}
        self._by_path: dict[str, Segment] = {}
        self._dirty: set[int] = set()
        for s in segments:
            self.add(s)

    @classmethod
    def _from_distinct(cls, by_path: dict[str, Segment]) -> "SegmentIndex":
        """An index of ``by_path`` (distinct paths) in one pass; each partition is sorted on first lookup."""
        index = cls()
        index._by_path = by_path
        for seg in by_path.values():
            part = index._parts.get(seg.partition)
            if part is None:
                part = index._parts[seg.partition] = _PartitionSegments()
            part.segments.append(seg)
        index._dirty = set(index._parts)
        return index

    # -- mutation -----------------------------------------------------------------
    def add(self, seg: Segment) -> None:
        if seg.path in self._by_path:
            return
        self._by_path[seg.path] = seg
        part = self._parts.setdefault(seg.partition, _PartitionSegments())
        if seg.partition not in self._dirty and (not part.bases or seg.base_offset > part.bases[-1]):
            # the common case, an append at the head: O(1)
            part.segments.append(seg)
            part.bases.append(seg.base_offset)
            prev = part.max_ts_prefix[-1] if part.max_ts_prefix else seg.max_timestamp
            part.max_ts_prefix.append(max(prev, seg.max_timestamp))
        else:
            part.segments.append(seg)
            self._dirty.add(seg.partition)

    def remove(self, path: str) -> None:
        seg = self._by_path.pop(path, None)
        if seg is None:
            return
        # dropped lazily by _part: removing k segments costs one O(n) pass, not k of them
        self._dirty.add(seg.partition)

    def _part(self, partition: int) -> _PartitionSegments | None:
        part = self._parts.get(partition)
        if part is not None and partition in self._dirty:
            part.segments = [s for s in part.segments if self._by_path.get(s.path) is s]
            part.rebuild()
            self._dirty.discard(partition)
        return part

    # -- lookups --------------------------------------------------------------------
    def partitions(self) -> list[int]:
        return sorted(p for p in self._parts if (part := self._part(p)) is not None and part.segments)

    def segments(self, partition: int) -> list[Segment]:
        part = self._part(partition)
        return list(part.segments) if part else []

    def __iter__(self) -> Iterator[Segment]:
        for p in sorted(self._parts):
            yield from self.segments(p)

    def __len__(self) -> int:
        return len(self._by_path)

    def __contains__(self, path: str) -> bool:
        return path in self._by_path

    def get(self, path: str) -> Segment | None:
        return self._by_path.get(path)

    def segment_at(self, partition: int, position: int) -> Segment | None:
        """The segment at ``position`` in :meth:`segments` order (None outside), without copying the list."""
        part = self._part(partition)
        return part.segments[position] if part and 0 <= position < len(part.segments) else None

    def segment_position(self, partition: int, offset: int) -> int:
        """Index (in :meth:`segments` order) of the segment covering ``offset``: the last with base <= offset.

        -1 if ``offset`` is below the first segment.
        """
        part = self._part(partition)
        if not part:
            return -1
        return bisect.bisect_right(part.bases, offset) - 1

    def segment_for_offset(self, partition: int, offset: int) -> Segment | None:
        """The segment covering ``offset`` (its records may start later after compaction)."""
        part = self._part(partition)
        i = self.segment_position(partition, offset)
        return part.segments[i] if part and i >= 0 else None

    def segments_from(self, partition: int, offset: int) -> list[Segment]:
        """Segments holding offsets >= ``offset``, in offset order."""
        part = self._part(partition)
        if not part:
            return []
        i = max(self.segment_position(partition, offset), 0)
        return [s for s in part.segments[i:] if s.last_offset >= offset]

    def first_segment_with_max_timestamp_at_least(self, partition: int, ts_us: int) -> int:
        """Position of the first segment whose max timestamp >= ``ts_us`` (len if none)."""
        part = self._part(partition)
        if not part:
            return 0
        return bisect.bisect_left(part.max_ts_prefix, ts_us)

    def earliest_offset(self, partition: int) -> int | None:
        part = self._part(partition)
        return part.segments[0].base_offset if part and part.segments else None

    def latest_offset(self, partition: int) -> int | None:
        """One past the last offset present in the partition's segments."""
        part = self._part(partition)
        return part.segments[-1].last_offset + 1 if part and part.segments else None

    def size_bytes(self, partition: int) -> int:
        return sum(s.bytes for s in self.segments(partition))

    # -- Arrow ----------------------------------------------------------------------
    def to_arrow(self) -> pa.Table:
        segs = list(self)
        cols = {name: [getattr(s, name) for s in segs] for name in INDEX_SCHEMA.names}
        return pa.table(cols, schema=INDEX_SCHEMA)

    @classmethod
    def from_arrow(cls, table: pa.Table) -> "SegmentIndex":
        # column-wise and positional: INDEX_SCHEMA lists Segment's fields in order
        columns = [table.column(name).to_pylist() for name in INDEX_SCHEMA.names]
        return cls._from_distinct({s.path: s for s in map(Segment, *columns)})

    def copy(self) -> "SegmentIndex":
        """An independent index (segments are immutable and shared): O(segments) list copies, no re-sorting."""
        index = SegmentIndex()
        index._by_path = dict(self._by_path)
        index._parts = {p: part.copy() for p, part in self._parts.items()}
        index._dirty = set(self._dirty)
        return index
