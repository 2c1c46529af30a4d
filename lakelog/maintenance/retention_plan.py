"""Retention planning: which whole segments a partition loses, as Kafka's ``LogManager`` decides.

Pure functions over the Arrow index (:class:`~lakelog.storage.segment_index.Segment`);
no data is read and nothing is written here (the retention job commits the
plan, :mod:`lakelog.maintenance.retention`).

Kafka's ``UnifiedLog.deleteOldSegments`` applies three rules, in this order,
each to the oldest segments first and stopping at the first segment that does
not qualify:

* ``retention.ms`` (``cleanup.policy`` contains ``delete``): a segment goes
  when ``now - its largest timestamp > retention.ms`` (an empty segment, which
  has no timestamp, uses the time its file was committed, as Kafka falls back
  to the file's last-modified time);
* ``retention.bytes`` (``delete``): while the partition is larger than
  ``retention.bytes``, the oldest segment goes if the partition stays at or
  above the limit without it (``size - limit >= segment size``);
* the log start offset (every policy): a segment goes when the next segment
  starts at or below the delete-records floor (``lakelog.lso.<P>``).

The newest segment of a partition is never removed (it is Kafka's active
segment; lakelog cannot roll an empty one), so the log start offset always
stays at a segment boundary or at the delete-records offset.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from lakelog.storage.segment_index import Segment
from lakelog.storage.topic_config import RETENTION_BYTES, RETENTION_MS, TopicConfig

BY_TIME = "retention.ms"
BY_SIZE = "retention.bytes"
BY_LOG_START = "log-start-offset"


NO_TIMESTAMP = 2**63 - 1  # a segment whose add carried no timestamp statistics


def segment_time_ms(seg: Segment) -> int:
    """The timestamp retention.ms compares: the largest timestamp in the segment's statistics (an empty segment
    left by compaction keeps the time range of the records it replaced), else the time its file was committed."""
    return seg.max_timestamp // 1000 if seg.max_timestamp != NO_TIMESTAMP else seg.modification_time


@dataclass(frozen=True)
class PartitionRetention:
    """What retention removes from one partition, and the resulting log start offset."""

    partition: int
    segments: tuple[Segment, ...]  # every live segment, offset order, before
    removed: tuple[Segment, ...]  # the oldest ones that go, offset order
    reasons: tuple[str, ...]  # one per removed segment: BY_TIME, BY_SIZE or BY_LOG_START
    log_start_offset: int  # before
    new_log_start_offset: int
    log_start_floor: int = 0  # the delete-records floor (lakelog.lso.<P>) before
    high_watermark: int = 0

    @property
    def kept(self) -> tuple[Segment, ...]:
        return self.segments[len(self.removed):]

    @property
    def records_before(self) -> int:
        return sum(s.records for s in self.segments)

    @property
    def bytes_before(self) -> int:
        return sum(s.bytes for s in self.segments)

    @property
    def records_after(self) -> int:
        return sum(s.records for s in self.kept)

    @property
    def bytes_after(self) -> int:
        return sum(s.bytes for s in self.kept)

    @property
    def new_log_start_floor(self) -> int:
        """The ``lakelog.lso.<P>`` value to commit: never lower than before."""
        return max(self.log_start_floor, self.new_log_start_offset)


@dataclass(frozen=True)
class RetentionPlan:
    """Retention of one topic at one Delta version."""

    topic: str
    version: int
    now_ms: int
    partitions: list[PartitionRetention] = field(default_factory=list)

    @property
    def removed(self) -> list[Segment]:
        return [s for p in self.partitions for s in p.removed]

    @property
    def empty(self) -> bool:
        return not any(p.removed for p in self.partitions)


def plan_partition_retention(segments: Sequence[Segment], *, partition: int, log_start_floor: int,
                             high_watermark: int, now_ms: int, retention_ms: int, retention_bytes: int,
                             delete_policy: bool = True) -> PartitionRetention:
    """Plan retention for one partition's ``segments`` (offset order).

    ``retention_ms`` / ``retention_bytes`` of -1 mean no limit; they only apply
    with ``delete_policy``.  The log-start-offset rule always applies.
    """
    segs = tuple(segments)
    n = len(segs)
    removed = 0
    reasons: list[str] = []
    limit = n - 1  # never the newest segment

    if delete_policy and retention_ms >= 0:
        while removed < limit and now_ms - segment_time_ms(segs[removed]) > retention_ms:
            reasons.append(BY_TIME)
            removed += 1
    if delete_policy and retention_bytes >= 0:
        diff = sum(s.bytes for s in segs[removed:]) - retention_bytes
        while removed < limit and diff - segs[removed].bytes >= 0:
            diff -= segs[removed].bytes
            reasons.append(BY_SIZE)
            removed += 1
    while removed < limit and segs[removed + 1].base_offset <= log_start_floor:
        reasons.append(BY_LOG_START)
        removed += 1

    first_base = segs[0].base_offset if segs else high_watermark
    before = min(max(log_start_floor, first_base), high_watermark)
    new_first = segs[removed].base_offset if removed < n else high_watermark
    after = min(max(log_start_floor, new_first), high_watermark)
    return PartitionRetention(partition, segs, segs[:removed], tuple(reasons), before, after, log_start_floor,
                              high_watermark)


def plan_retention(snapshot, now_ms: int, *, partitions: Sequence[int] | None = None) -> RetentionPlan:
    """Plan retention for every partition of a :class:`~lakelog.storage.topic_snapshot.TopicSnapshot`."""
    from lakelog.storage.topic_snapshot import lso_app

    config = TopicConfig(snapshot.configuration)
    delete = "delete" in config.cleanup_policy
    retention_ms = int(config.get(RETENTION_MS))
    retention_bytes = int(config.get(RETENTION_BYTES))
    plan = RetentionPlan(snapshot.topic, snapshot.version, now_ms)
    for p in (partitions if partitions is not None else range(snapshot.partition_count)):
        plan.partitions.append(plan_partition_retention(
            snapshot.index.segments(p), partition=p, log_start_floor=snapshot.txns.get(lso_app(p), 0),
            high_watermark=snapshot.high_watermark(p), now_ms=now_ms, retention_ms=retention_ms,
            retention_bytes=retention_bytes, delete_policy=delete))
    return plan
