"""Compaction planning: what the cleaner may clean, as Kafka's ``LogCleanerManager`` decides.

Pure functions over the Arrow index; the compaction job
(:mod:`lakelog.maintenance.cleaner`) reads and rewrites what is planned here.

For each partition of a compacted topic (``cleanup.policy`` contains ``compact``):

* the **cleanable range** is ``[log start offset, first uncleanable offset)``;
  the first uncleanable offset is the base of the newest segment (Kafka's
  active segment), lowered to the base of the first dirty segment whose
  largest timestamp is younger than ``min.compaction.lag.ms``;
* the **cleaner checkpoint** (``txn`` app id ``lakelog.cleaner.<P>``, Kafka's
  ``cleaner-offset-checkpoint``) is how far the last pass cleaned; records at
  or above it (and below the first uncleanable offset) are **dirty**.  A
  checkpoint below the log start offset or past the newest segment resets to
  the log start offset, as in Kafka;
* a segment is clean if its whole range lies below the first dirty offset,
  dirty otherwise; **dirty ratio** = dirty bytes / (clean + dirty bytes), and a
  partition is cleaned when it exceeds ``min.cleanable.dirty.ratio``;
* segments wholly below the log start offset (delete-records) are removed, as
  Kafka does for compacted logs.

After the job has found which segments lose records (:class:`SegmentOutcome`),
:func:`group_rewrites` joins runs of adjacent losing segments into rewrite
groups of about ``segment.bytes``; each group becomes one segment whose base is
the group's first base, so it covers exactly the offsets of the segments it
replaces and the partition stays offset-contiguous.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from lakelog.storage.segment_index import Segment
from lakelog.storage.topic_config import (DELETE_RETENTION_MS, MIN_CLEANABLE_DIRTY_RATIO, MIN_COMPACTION_LAG_MS,
                                          TopicConfig)
from lakelog.storage.topic_snapshot import CHECKPOINT_APP


def checkpoint_app(partition: int) -> str:
    """The ``txn`` app id holding a partition's cleaner checkpoint."""
    return f"{CHECKPOINT_APP}{partition}"


@dataclass(frozen=True)
class CleanerConfig:
    """The topic configs the cleaner uses."""

    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    delete_retention_ms: int = 86_400_000
    segment_bytes: int = 1 << 30
    segment_codec: str | None = None  # the rewritten segments' (compression.type; None: the root's default)

    @classmethod
    def of(cls, config: TopicConfig) -> "CleanerConfig":
        return cls(float(config.get(MIN_CLEANABLE_DIRTY_RATIO)), int(config.get(MIN_COMPACTION_LAG_MS)),
                   int(config.get(DELETE_RETENTION_MS)), config.segment_bytes, config.segment_codec)


@dataclass(frozen=True)
class PartitionCleaning:
    """One partition's cleanable range and its clean/dirty segments."""

    partition: int
    log_start_offset: int
    checkpoint: int | None  # as stored; None if the partition was never cleaned
    first_dirty_offset: int
    first_uncleanable_offset: int
    below_start: tuple[Segment, ...]  # wholly below the log start offset: removed
    clean: tuple[Segment, ...]  # within the range, wholly below the first dirty offset
    dirty: tuple[Segment, ...]  # within the range, holding dirty records

    @property
    def clean_bytes(self) -> int:
        return sum(s.bytes for s in self.clean)

    @property
    def dirty_bytes(self) -> int:
        return sum(s.bytes for s in self.dirty)

    @property
    def dirty_ratio(self) -> float:
        total = self.clean_bytes + self.dirty_bytes
        return self.dirty_bytes / total if total else 0.0

    @property
    def cleanable(self) -> tuple[Segment, ...]:
        """Clean then dirty segments, offset order: everything a pass may rewrite."""
        return self.clean + self.dirty

    def needs_cleaning(self, min_cleanable_dirty_ratio: float) -> bool:
        """Kafka's rule: some dirty bytes and a dirty ratio above ``min.cleanable.dirty.ratio``."""
        return self.dirty_bytes > 0 and self.dirty_ratio > min_cleanable_dirty_ratio


def plan_partition_cleaning(segments: Sequence[Segment], *, partition: int, log_start_offset: int,
                            checkpoint: int | None, now_ms: int, min_compaction_lag_ms: int = 0,
                            high_watermark: int | None = None) -> PartitionCleaning:
    """The cleanable range of one partition (``segments`` in offset order)."""
    segs = list(segments)
    if not segs:
        end = high_watermark if high_watermark is not None else log_start_offset
        return PartitionCleaning(partition, log_start_offset, checkpoint, log_start_offset, end, (), (), ())
    newest_base = segs[-1].base_offset
    below = []
    i = 0
    while i < len(segs) - 1 and segs[i + 1].base_offset <= log_start_offset:
        below.append(segs[i])
        i += 1
    live = segs[i:]
    if checkpoint is None or checkpoint < log_start_offset or checkpoint > newest_base:
        first_dirty = log_start_offset
    else:
        first_dirty = checkpoint
    first_uncleanable = newest_base
    if min_compaction_lag_ms > 0:
        for j, s in enumerate(live[:-1]):
            end_j = live[j + 1].base_offset
            if end_j <= first_dirty:
                continue  # clean: the lag only holds back dirty segments
            if s.records > 0 and now_ms - s.max_timestamp // 1000 < min_compaction_lag_ms:
                first_uncleanable = min(first_uncleanable, max(s.base_offset, first_dirty))
                break
    first_dirty = min(first_dirty, first_uncleanable)
    clean, dirty = [], []
    for j, s in enumerate(live[:-1]):
        if s.base_offset >= first_uncleanable:
            break
        end_j = live[j + 1].base_offset
        (clean if end_j <= first_dirty else dirty).append(s)
    return PartitionCleaning(partition, log_start_offset, checkpoint, first_dirty, first_uncleanable,
                             tuple(below), tuple(clean), tuple(dirty))


@dataclass(frozen=True)
class CleaningPlan:
    """Compaction of one topic at one Delta version: the partitions selected for cleaning."""

    topic: str
    version: int
    now_ms: int
    config: CleanerConfig
    partitions: list[PartitionCleaning] = field(default_factory=list)  # every partition examined
    selected: list[int] = field(default_factory=list)  # partitions this pass cleans

    def selected_partitions(self) -> list[PartitionCleaning]:
        chosen = set(self.selected)
        return [p for p in self.partitions if p.partition in chosen]


def plan_cleaning(snapshot, now_ms: int, *, partitions: Sequence[int] | None = None,
                  min_dirty_ratio: float | None = None) -> CleaningPlan:
    """Plan a cleaning pass over a :class:`~lakelog.storage.topic_snapshot.TopicSnapshot`.

    ``min_dirty_ratio`` overrides the topic's ``min.cleanable.dirty.ratio``
    (``-1`` cleans every partition with any dirty bytes).  Partitions whose
    log start offset passed whole segments are selected too, so those segments go.
    """
    config = CleanerConfig.of(TopicConfig(snapshot.configuration))
    threshold = config.min_cleanable_dirty_ratio if min_dirty_ratio is None else min_dirty_ratio
    plan = CleaningPlan(snapshot.topic, snapshot.version, now_ms, config)
    for p in (partitions if partitions is not None else range(snapshot.partition_count)):
        pc = plan_partition_cleaning(
            snapshot.index.segments(p), partition=p, log_start_offset=snapshot.log_start_offset(p),
            checkpoint=snapshot.txns.get(checkpoint_app(p)), now_ms=now_ms,
            min_compaction_lag_ms=config.min_compaction_lag_ms, high_watermark=snapshot.high_watermark(p))
        plan.partitions.append(pc)
        if pc.needs_cleaning(threshold) or pc.below_start:
            plan.selected.append(p)
    return plan


@dataclass(frozen=True)
class SegmentOutcome:
    """What a pass found in one cleanable segment."""

    segment: Segment
    kept: int  # records that survive
    dropped: int  # superseded records, expired tombstones, records without a key
    unstamped: int  # surviving tombstones this pass reaches first (must be stamped)

    @property
    def rewrite(self) -> bool:
        return self.dropped > 0 or self.unstamped > 0

    @property
    def estimated_bytes(self) -> int:
        total = self.kept + self.dropped
        return self.segment.bytes * self.kept // total if total else 0


def group_rewrites(outcomes: Sequence[SegmentOutcome], segment_bytes: int) -> list[tuple[Segment, ...]]:
    """Runs of adjacent segments to rewrite, each at most about ``segment_bytes`` (estimated output).

    ``outcomes`` are one partition's cleanable segments in offset order; a
    segment that loses nothing ends a run, so untouched segments are never rewritten.
    """
    groups: list[tuple[Segment, ...]] = []
    current: list[Segment] = []
    size = 0
    for o in outcomes:
        if not o.rewrite:
            if current:
                groups.append(tuple(current))
            current, size = [], 0
            continue
        est = o.estimated_bytes
        if current and size + est > segment_bytes:
            groups.append(tuple(current))
            current, size = [], 0
        current.append(o.segment)
        size += est
    if current:
        groups.append(tuple(current))
    return groups
