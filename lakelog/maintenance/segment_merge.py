"""The merge job: join adjacent small segments into segments of about ``segment.bytes``.

The driver plans (:mod:`lakelog.maintenance.segment_merge_plan`) and commits; each merge
group is one Spark task that reads its files and writes one segment on an
executor (:mod:`lakelog.maintenance.segment_rewrite`), keeping every record,
its offset and its tombstone stamps.  A merge of at most
:data:`~lakelog.maintenance.spark_session.DRIVER_WORK_BYTES` whose session
allows it (a local master) rewrites its groups on the driver instead, as a
small compaction does: Spark's start-up would be nearly all of its time.  One commit per topic replaces the groups'
files with ``dataChange=false`` on both the removes and the adds, so streaming
readers do not read the data twice; it is fenced against other maintenance
jobs on the same partitions (:mod:`lakelog.maintenance.rewrite`) and replanned
if it loses.
"""

from __future__ import annotations

import logging
import time
from typing import Iterator, Sequence

import pyarrow as pa

from lakelog.maintenance.job_report import JobReport, TopicReport
from lakelog.maintenance.segment_merge_plan import MergePlan, plan_merge
from lakelog.maintenance.rewrite import commit_rewrite, replan_on_conflict
from lakelog.maintenance.segment_rewrite import (ADD_FIELDS_DDL, ADD_FIELDS_SCHEMA, RewriteGroup, add_action,
                                               rewrite_group)
from lakelog.maintenance.segment_scan import assign_slices, slice_count
from lakelog.maintenance.spark_session import DRIVER_WORK_BYTES
from lakelog.maintenance.topic_selection import select_topics
from lakelog.errors import ConcurrentTransactions
from lakelog.storage.storage_root import StorageRoot
from lakelog.storage.orphan_files import delete_quietly

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 3


def run_merge(spark, root: StorageRoot, topics: Sequence[str] | None = None, *, dry_run: bool = False,
              segment_bytes: int | None = None, segment_ms: int | None = None) -> JobReport:
    """Merge small segments of ``topics`` (default: every topic); overrides for segment.bytes / segment.ms."""
    started = time.monotonic()
    report = JobReport("merge", root.uri, dry_run)
    for snap in select_topics(root, topics, policy=None, job="merge"):
        report.topics.append(_merge_topic(spark, root, snap, dry_run, segment_bytes, segment_ms))
    report.duration_s = time.monotonic() - started
    return report


def _merge_topic(spark, root: StorageRoot, snap, dry_run: bool, segment_bytes: int | None,
                 segment_ms: int | None) -> TopicReport:
    return replan_on_conflict(root, snap, "merge", MAX_ATTEMPTS,
                              lambda snap: _merge_once(spark, root, snap, dry_run, segment_bytes, segment_ms))


def _merge_once(spark, root: StorageRoot, snap, dry_run: bool, segment_bytes: int | None,
                segment_ms: int | None) -> TopicReport:
    plan = plan_merge(snap, segment_bytes=segment_bytes, segment_ms=segment_ms)
    rep = TopicReport(snap.topic, version_before=snap.version, partitions_examined=plan.partitions_examined)
    for g in plan.groups:
        rep.records_before += g.records
        rep.bytes_before += g.bytes
        rep.plan.append(f"partition {g.partition}: merge {len(g.segments)} segments [{g.base_offset}, "
                        f"{g.segments[-1].last_offset}] ({g.bytes} B) into one")
    rep.records_after, rep.bytes_after = rep.records_before, rep.bytes_before
    rep.partitions_changed = len({g.partition for g in plan.groups})
    if dry_run or not plan.groups:
        return rep
    return _merge(spark, root, snap, plan, rep)


def _merge(spark, root: StorageRoot, snap, plan: MergePlan, rep: TopicReport) -> TopicReport:
    firsts = {snap.index.segments(p)[0].path for p in {g.partition for g in plan.groups}}
    groups = [RewriteGroup(i, g.partition, g.segments, starts_partition=g.segments[0].path in firsts)
              for i, g in enumerate(plan.groups)]
    weights = [(g, sum(s.bytes for s in g.segments)) for g in groups]
    topic, codec = snap.topic, snap.config.segment_codec
    work = sum(w for _, w in weights)
    if work <= DRIVER_WORK_BYTES and getattr(spark, "driver_may_run", False):
        results = [r for r in (rewrite_group(root, topic, g, codec=codec) for g in groups) if r]
    else:
        slices = assign_slices(weights, slice_count(spark, work))

        def merge(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            for b in batches:
                for k in b.column(0).to_pylist():
                    rows = [rewrite_group(root, topic, g, codec=codec) for g in slices[k]]
                    yield pa.RecordBatch.from_pylist([r for r in rows if r], schema=ADD_FIELDS_SCHEMA)

        results = [r.asDict() for r in
                   spark.range(len(slices), numPartitions=len(slices)).mapInArrow(merge, ADD_FIELDS_DDL).collect()]
    added = [add_action(r) for r in results]
    removed = [s for g in groups for s in g.segments]
    rep.record_removed(removed)
    for r in results:
        rep.record_written(int(r["records"]), int(r["size"]))
    try:
        after = commit_rewrite(root, snap, operation="merge", removed=removed, added=added, data_change=False)
    except ConcurrentTransactions:
        delete_quietly(root, topic, [a.path for a in added])
        raise
    rep.version_after = after.version
    return rep

