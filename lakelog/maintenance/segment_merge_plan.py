"""Merge planning: joining adjacent small segments, lakelog's counterpart of Kafka's segment roll.

Every append commit writes one small file per partition; Kafka instead keeps
appending to the active segment until it reaches ``segment.bytes`` or spans
``segment.ms``, then rolls.  The merge job gets to the same shape after the
fact: it joins runs of adjacent segments of a partition, in offset order, into
one segment each, cutting a run before it would exceed ``segment.bytes`` or
span more than ``segment.ms`` between its oldest and newest record.

A run never crosses a *boundary* offset (the cleaner checkpoint), so clean
and dirty segments stay apart and the dirty ratio stays exact.  A merged
segment's base is the run's first base, so it covers exactly the offsets of
the segments it replaces.  Pure functions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Sequence

from lakelog.storage.segment_index import Segment
from lakelog.storage.topic_config import SEGMENT_MS, TopicConfig


@dataclass(frozen=True)
class MergeGroup:
    """Adjacent segments of one partition to be joined into one."""

    partition: int
    segments: tuple[Segment, ...]

    @property
    def base_offset(self) -> int:
        return self.segments[0].base_offset

    @property
    def bytes(self) -> int:
        return sum(s.bytes for s in self.segments)

    @property
    def records(self) -> int:
        return sum(s.records for s in self.segments)


def _span_ms(min_ts_us: int, max_ts_us: int) -> int:
    return max(0, max_ts_us // 1000 - min_ts_us // 1000)


def plan_partition_merge(segments: Sequence[Segment], *, partition: int, segment_bytes: int, segment_ms: int,
                         boundaries: Iterable[int] = ()) -> list[MergeGroup]:
    """Groups of two or more adjacent ``segments`` (offset order) to merge."""
    cuts = set(boundaries)
    groups: list[MergeGroup] = []
    run: list[Segment] = []
    size = 0
    lo = hi = 0

    def close() -> None:
        if len(run) >= 2:
            groups.append(MergeGroup(partition, tuple(run)))

    none = (2**63 - 1, -(2**63))  # (min, max) of a run without timestamps
    for s in segments:
        if s.bytes >= segment_bytes:  # already full size: stays as it is
            close()
            run, size = [], 0
            continue
        ts = (s.min_timestamp, s.max_timestamp) if s.records > 0 else none
        if run:
            new_lo, new_hi = min(lo, ts[0]), max(hi, ts[1])
            too_long = new_lo <= new_hi and _span_ms(new_lo, new_hi) > segment_ms
            if size + s.bytes > segment_bytes or too_long or s.base_offset in cuts:
                close()
                run, size = [], 0
        if run:
            lo, hi = min(lo, ts[0]), max(hi, ts[1])
        else:
            lo, hi = ts
        run.append(s)
        size += s.bytes
    close()
    return groups


@dataclass(frozen=True)
class MergePlan:
    """Merging of one topic at one Delta version."""

    topic: str
    version: int
    segment_bytes: int
    segment_ms: int
    groups: list[MergeGroup] = field(default_factory=list)
    partitions_examined: int = 0

    @property
    def segments(self) -> int:
        return sum(len(g.segments) for g in self.groups)


def plan_merge(snapshot, *, partitions: Sequence[int] | None = None, segment_bytes: int | None = None,
               segment_ms: int | None = None) -> MergePlan:
    """Plan merging for a :class:`~lakelog.storage.topic_snapshot.TopicSnapshot` (overrides for the topic's configs)."""
    from lakelog.maintenance.cleaner_plan import checkpoint_app

    config = TopicConfig(snapshot.configuration)
    sb = config.segment_bytes if segment_bytes is None else segment_bytes
    sm = int(config.get(SEGMENT_MS)) if segment_ms is None else segment_ms
    parts = list(partitions if partitions is not None else range(snapshot.partition_count))
    plan = MergePlan(snapshot.topic, snapshot.version, sb, sm, partitions_examined=len(parts))
    for p in parts:
        checkpoint = snapshot.txns.get(checkpoint_app(p))
        plan.groups.extend(plan_partition_merge(snapshot.index.segments(p), partition=p, segment_bytes=sb,
                                                segment_ms=sm, boundaries=[checkpoint] if checkpoint else []))
    return plan
