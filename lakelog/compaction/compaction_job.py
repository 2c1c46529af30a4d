"""The compaction job: Kafka's log cleaner as a Spark job.

Per topic (``cleanup.policy`` contains ``compact``) the driver plans
(:mod:`lakelog.compaction.compaction_plan`) and commits; Spark does the rest:

1. **scan** -- every planned segment of the selected partitions is a task
   (:mod:`lakelog.compaction.segment_scan`): partitions, and the segments of a
   big partition, are read in parallel on the executors;
2. **key map** -- ``group by (partition, key)`` the dirty records, ``max(offset)``:
   Kafka's offset map, built by Spark;
3. **decide** -- each record of the cleanable range is joined to the map; it
   survives if it is the latest for its key (``offset >= latest``) or its key
   has no dirty record, unless it has no key (Kafka's cleaner drops those) or is
   a tombstone whose ``delete.retention.ms`` ran out since the pass that first
   cleaned it.  Surviving tombstones reached for the first time are stamped
   (:mod:`lakelog.compaction.tombstone_horizon`);
4. **rewrite** -- only segments that lose a record or need a stamp are rewritten,
   adjacent ones grouped up to ``segment.bytes``; each group is one executor task
   that reads its files and writes one segment with the original offsets
   (:mod:`lakelog.compaction.segment_rewrite`);
5. **commit** -- one Delta commit per topic removes the replaced files, adds the
   new ones, removes segments wholly below the log start offset and moves each
   cleaned partition's checkpoint ``lakelog.cleaner.<P>`` to its first
   uncleanable offset, fenced against other maintenance jobs
   (:mod:`lakelog.compaction.rewrite`).

A pass is incremental: the map comes from the dirty records only, the clean
section contributes keys and offsets (no values unless it holds tombstones),
and untouched segments are neither rewritten nor re-committed.
"""

from __future__ import annotations

import logging
import time
from typing import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from lakelog.catalog import Catalog
from lakelog.compaction.compaction_plan import (CleaningPlan, SegmentOutcome, checkpoint_app, group_rewrites,
                                                plan_cleaning)
from lakelog.compaction.job_report import JobReport, TopicReport
from lakelog.compaction.rewrite import commit_rewrite
from lakelog.compaction.segment_rewrite import (ADD_FIELDS_DDL, ADD_FIELDS_SCHEMA, RewriteGroup, add_action,
                                               rewrite_group)
from lakelog.compaction.segment_scan import ScanTask, scan_segments
from lakelog.compaction.topic_selection import select_topics
from lakelog.errors import ConcurrentTransactions
from lakelog.storage import StorageRoot
from lakelog.writer.segment_writer import delete_quietly

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 3


def run_compaction(spark, root: StorageRoot, topics: Sequence[str] | None = None, *, dry_run: bool = False,
                   now_ms: int | None = None, min_dirty_ratio: float | None = None) -> JobReport:
    """Clean ``topics`` (default: every compacted topic) whose partitions are dirty enough.

    ``min_dirty_ratio`` overrides ``min.cleanable.dirty.ratio`` (-1: clean any dirt).
    ``spark`` may be None for a dry run.
    """
    started = time.monotonic()
    report = JobReport("compaction", root.uri, dry_run)
    for snap in select_topics(root, topics, policy="compact", job="compaction"):
        report.topics.append(_clean_topic(spark, root, snap, dry_run, now_ms, min_dirty_ratio))
    report.duration_s = time.monotonic() - started
    return report


def _describe(plan: CleaningPlan, rep: TopicReport) -> None:
    chosen = set(plan.selected)
    for part in plan.partitions:
        rep.plan.append(
            f"partition {part.partition}: cleanable [{part.log_start_offset}, {part.first_uncleanable_offset}), first "
            f"dirty {part.first_dirty_offset}, clean {part.clean_bytes} B / dirty {part.dirty_bytes} B, dirty ratio "
            f"{part.dirty_ratio:.3f}" + (f", {len(part.below_start)} segment(s) below the log start offset"
                                       if part.below_start else "")
            + ("; cleaning" if part.partition in chosen else "; skipped"))


def _clean_topic(spark, root: StorageRoot, snap, dry_run: bool, now_ms: int | None,
                 min_dirty_ratio: float | None) -> TopicReport:
    for attempt in range(MAX_ATTEMPTS):
        now = now_ms if now_ms is not None else int(time.time() * 1000)
        plan = plan_cleaning(snap, now, min_dirty_ratio=min_dirty_ratio)
        rep = TopicReport(snap.topic, version_before=snap.version, partitions_examined=len(plan.partitions))
        _describe(plan, rep)
        selected = plan.selected_partitions()
        for part in selected:
            for s in part.below_start + part.cleanable:
                rep.records_before += s.records
                rep.bytes_before += s.bytes
        rep.records_after, rep.bytes_after = rep.records_before, rep.bytes_before
        if dry_run or not selected:
            return rep
        try:
            return _clean(spark, root, snap, plan, rep)
        except ConcurrentTransactions as e:
            log.info("compaction of %s: %s; replanning (attempt %d)", snap.topic, e, attempt + 1)
            snap = Catalog(root).snapshot(snap.topic)
    raise ConcurrentTransactions(f"compaction of topic {snap.topic} lost {MAX_ATTEMPTS} commit races in a row")


def _clean(spark, root: StorageRoot, snap, plan: CleaningPlan, rep: TopicReport) -> TopicReport:
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    selected = plan.selected_partitions()
    tasks: list[ScanTask] = []
    for part in selected:
        for s in part.cleanable:
            tasks.append(ScanTask(len(tasks), s, part.log_start_offset, part.first_dirty_offset,
                                  part.first_uncleanable_offset))
    outcomes: dict[int, SegmentOutcome] = {}
    decided = None
    if tasks:
        rows = scan_segments(spark, root, snap.topic, tasks)
        offset_map = (rows.where(F.col("dirty") & F.col("key").isNotNull())
                      .groupBy("partition", "key").agg(F.max("offset").alias("latest")))
        drm = plan.config.delete_retention_ms
        expired = (F.col("tombstone") & F.col("stamped_ms").isNotNull()
                   & (F.col("stamped_ms") + F.lit(drm) <= F.lit(plan.now_ms)))
        survives = (F.col("key").isNotNull() & (F.col("latest").isNull() | (F.col("offset") >= F.col("latest")))
                    & ~expired)
        keep = ~F.col("in_range") | survives
        decided = (rows.join(offset_map, ["partition", "key"], "left")
                   .select("segment", "offset", keep.alias("keep"),
                           (F.col("in_range") & survives & F.col("tombstone") & F.col("stamped_ms").isNull())
                           .alias("stamp"))
                   .persist(StorageLevel.MEMORY_AND_DISK))
        counts = (decided.groupBy("segment")
                  .agg(F.sum(F.col("keep").cast("long")).alias("kept"),
                       F.sum((~F.col("keep")).cast("long")).alias("dropped"),
                       F.sum(F.col("stamp").cast("long")).alias("unstamped"))
                  .collect())
        for r in counts:
            t = tasks[r["segment"]]
            outcomes[t.segment_id] = SegmentOutcome(t.segment, int(r["kept"]), int(r["dropped"]),
                                                    int(r["unstamped"]))
    try:
        groups: list[RewriteGroup] = []
        group_of: dict[int, int] = {}
        seg_ids = {t.segment.path: t.segment_id for t in tasks}
        for part in selected:
            per_seg = [outcomes.get(seg_ids[s.path]) or SegmentOutcome(s, s.records, 0, 0) for s in part.cleanable]
            below = {s.path for s in part.below_start}
            first = next((s.path for s in snap.index.segments(part.partition) if s.path not in below), None)
            for segs in group_rewrites(per_seg, plan.config.segment_bytes):
                g = RewriteGroup(len(groups), part.partition, segs, starts_partition=segs[0].path == first)
                groups.append(g)
                for s in segs:
                    group_of[seg_ids[s.path]] = g.group_id
        results = _rewrite(spark, root, snap.topic, groups, group_of, decided, plan.now_ms) if groups else []
    finally:
        if decided is not None:
            decided.unpersist()
    added = [add_action(r) for r in results]
    removed = [s for g in groups for s in g.segments] + [s for part in selected for s in part.below_start]
    txns = {checkpoint_app(part.partition): part.first_uncleanable_offset for part in selected}
    rep.record_removed(removed)
    for r in results:
        rep.record_written(int(r["records"]), int(r["size"]))
    rep.partitions_changed = len({s.partition for s in removed} | {int(r["partition"]) for r in results})
    if not removed and all(snap.txns.get(app) == v for app, v in txns.items()):
        return rep  # nothing lost, checkpoints already there
    try:
        after = commit_rewrite(root, snap, operation="compaction", removed=removed, added=added, txns=txns,
                               partitions=[part.partition for part in selected], data_change=False,
                               metadata={"lakelog.cleanerPass": {
                                   "timeMs": plan.now_ms,
                                   "partitions": {str(part.partition): [part.first_dirty_offset,
                                                                      part.first_uncleanable_offset]
                                                  for part in selected}}})
    except ConcurrentTransactions:
        delete_quietly(root, snap.topic, [a.path for a in added])
        raise
    rep.version_after = after.version
    return rep


def _rewrite(spark, root: StorageRoot, topic: str, groups: list[RewriteGroup], group_of: dict[int, int],
             decided, pass_ms: int) -> list[dict]:
    """Run one executor task per rewrite group; return the new files' add fields."""
    from pyspark.sql import functions as F

    by_id = {g.group_id: g for g in groups}
    seg_group = spark.createDataFrame(list(group_of.items()), "segment int, group_id int")
    kept = (decided.where("keep").join(F.broadcast(seg_group), "segment").select("group_id", "offset"))
    # one marker row per group, so groups that keep nothing still run (and may leave an empty segment)
    markers = spark.createDataFrame([(g.group_id, -1) for g in groups], "group_id int, offset long")

    def rewrite(table: pa.Table) -> pa.Table:
        gid = table.column("group_id")[0].as_py()
        offsets = table.column("offset")
        keep = offsets.filter(pc.greater_equal(offsets, 0)).combine_chunks()
        fields = rewrite_group(root, topic, by_id[gid], keep=keep, pass_ms=pass_ms)
        return pa.Table.from_pylist([fields] if fields else [], schema=ADD_FIELDS_SCHEMA)

    out = kept.unionByName(markers).groupBy("group_id").applyInArrow(rewrite, ADD_FIELDS_DDL)
    return [r.asDict() for r in out.collect()]

