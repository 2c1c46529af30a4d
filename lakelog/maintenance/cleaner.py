"""The compaction job: Kafka's log cleaner as a Spark job.

Per topic (``cleanup.policy`` contains ``compact``) the driver plans
(:mod:`lakelog.maintenance.cleaner_plan`) and commits; the executors do the
reading and writing:

1. **key map** -- Spark scans the dirty records' keys and offsets (one task per
   slice of segments: partitions, and the segments of big partitions, in
   parallel; :mod:`lakelog.maintenance.segment_scan`), groups by
   ``(partition, key)`` and takes ``max(offset)``: Kafka's offset map.  Like
   Kafka's dedupe buffer it is bounded: a partition with more dirty records than
   :data:`~lakelog.maintenance.key_map.MAX_MAP_ENTRIES` is cleaned a prefix at a time;
2. **clean** -- the map is collected (one row per distinct dirty key) and
   broadcast; one executor task per slice of chunks (adjacent cleanable
   segments of a partition, up to 256 MB: big partitions are split) runs
   :func:`clean_chunk`, which applies the cleaner's rule
   (:mod:`lakelog.maintenance.key_map`) to each segment and rewrites only the runs
   of segments that lose a record or need a tombstone stamp, grouped up to
   ``segment.bytes``, with the original offsets
   (:mod:`lakelog.maintenance.segment_rewrite`);
3. **commit** -- one Delta commit per topic removes the replaced files, adds the
   new ones (``dataChange=false``), removes segments wholly below the log start
   offset and moves each cleaned partition's checkpoint ``lakelog.cleaner.<P>``
   to its first uncleanable offset, fenced against other maintenance jobs
   (:mod:`lakelog.maintenance.rewrite`).

A pass is incremental: the map comes from the dirty records only, the clean
section is read on the executors (each segment once, whole, for deciding and
rewriting) but nothing of it moves unless it loses records, and untouched segments are
neither rewritten nor re-committed.  No record passes through the driver or
a shuffle: only keys with their latest offsets do, and the new files' adds.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakelog.maintenance.cleaner_plan import (CleanerConfig, CleaningPlan, PartitionCleaning, SegmentOutcome,
                                                checkpoint_app, group_rewrites, plan_cleaning)
from lakelog.maintenance.job_report import JobReport, TopicReport
from lakelog.maintenance.rewrite import commit_rewrite, replan_on_conflict
from lakelog.maintenance.key_map import MAP_SCHEMA, MAX_MAP_ENTRIES, CleaningRange, KeyMap, decide
from lakelog.maintenance.segment_rewrite import (ADD_FIELDS_DDL, ADD_FIELDS_SCHEMA, RewriteGroup, add_action,
                                               no_file_fields, read_stamped, rewrite_group)
from lakelog.maintenance.segment_scan import (KEYS_SCHEMA, ScanTask, assign_slices, scan_dirty_keys, scan_file,
                                             slice_count)
from lakelog.maintenance.spark_session import DRIVER_WORK_BYTES
from lakelog.maintenance.topic_selection import select_topics
from lakelog.errors import ConcurrentTransactions
from lakelog.storage.storage_root import StorageRoot
from lakelog.storage.orphan_files import delete_quietly

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
    return replan_on_conflict(root, snap, "compaction", MAX_ATTEMPTS,
                              lambda snap: _clean_once(spark, root, snap, dry_run, now_ms, min_dirty_ratio))


def _clean_once(spark, root: StorageRoot, snap, dry_run: bool, now_ms: int | None,
                min_dirty_ratio: float | None) -> TopicReport:
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
    return _clean(spark, root, snap, plan, rep)


def _clean(spark, root: StorageRoot, snap, plan: CleaningPlan, rep: TopicReport) -> TopicReport:
    started = time.monotonic()
    # Kafka's dedupe buffer: a partition whose dirty section may hold more keys than the map takes is
    # cleaned a prefix at a time (bounded by records, which bound the distinct keys)
    selected = [_limit_dirty(part, MAX_MAP_ENTRIES) for part in plan.selected_partitions()]
    chunks = []
    for part in selected:
        below = {s.path for s in part.below_start}
        first = next((s.path for s in snap.index.segments(part.partition) if s.path not in below), None)
        rng = CleaningRange(part.log_start_offset, part.first_uncleanable_offset, plan.now_ms,
                            plan.config.delete_retention_ms)
        for segs in _chunks(part.cleanable, min(plan.config.segment_bytes, CHUNK_BYTES)):
            chunks.append(CleaningChunk(part.partition, segs, rng, segs[0].path == first))
    work = sum(s.bytes for part in selected for s in part.dirty) + sum(s.bytes for c in chunks for s in c.segments)
    on_driver = work <= DRIVER_WORK_BYTES and getattr(spark, "driver_may_run", False)
    if on_driver:  # a small topic: Spark's start-up and scheduling would cost more than the work
        map_table = _key_map_on_driver(root, snap.topic, selected)
        km = KeyMap(map_table)
        map_s = time.monotonic() - started
        results = [row for c in chunks
                   for row in clean_chunk(root, snap.topic, c, km, plan.config, plan.now_ms)]
    else:
        map_table = _key_map(spark, root, snap.topic, selected)
        map_s = time.monotonic() - started
        results = []
        if chunks:
            key_map = spark.sparkContext.broadcast(map_table)
            try:
                results = _clean_chunks(spark, root, snap.topic, chunks, key_map, plan.config, plan.now_ms)
            finally:
                key_map.destroy()
    log.info("compaction of %s: key map of %d keys in %.1f s; %d segment(s) in %d task(s) cleaned in %.1f s",
             snap.topic, map_table.num_rows, map_s, sum(len(c.segments) for c in chunks), len(chunks),
             time.monotonic() - started - map_s)
    by_path = {s.path: s for c in chunks for s in c.segments}
    added = [add_action(r) for r in results if r["path"] is not None]
    removed = [by_path[p] for r in results for p in r["replaced"]] + [s for part in selected for s in part.below_start]
    txns = {checkpoint_app(part.partition): part.first_uncleanable_offset for part in selected}
    rep.record_removed(removed)
    for r in results:
        if r["path"] is not None:
            rep.record_written(int(r["records"]), int(r["size"]))
    rep.partitions_changed = len({s.partition for s in removed})
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


CHUNK_BYTES = 256 << 20  # tasks hold about this much (at most segment.bytes): big partitions split


@dataclass(frozen=True)
class CleaningChunk:
    """Adjacent cleanable segments of one partition: one executor task."""

    partition: int
    segments: tuple
    range: CleaningRange
    starts_partition: bool  # holds the partition's first live segment


def _chunks(segments, target_bytes: int) -> list[tuple]:
    out, current, size = [], [], 0
    for s in segments:
        if current and size + s.bytes > target_bytes:
            out.append(tuple(current))
            current, size = [], 0
        current.append(s)
        size += s.bytes
    if current:
        out.append(tuple(current))
    return out


def clean_chunk(root: StorageRoot, topic: str, chunk: CleaningChunk, key_map: KeyMap, config: CleanerConfig,
                pass_ms: int) -> list[dict]:
    """Assess a chunk's segments, rewrite the runs that lose records; one result row per rewrite group.

    Runs on an executor.  A row carries the new file's add fields (``path`` None
    when the group kept nothing and left no file) and the ``replaced`` paths.
    """
    rng = chunk.range
    outcomes = []
    if not chunk.segments:
        return []
    # the chunk's segments, read once for assessing and rewriting (a chunk is at most CHUNK_BYTES)
    cache = {seg.path: read_stamped(root, topic, seg) for seg in chunk.segments}
    keys = [cache[seg.path][0].column("key").combine_chunks() for seg in chunk.segments]
    latest = key_map.latest(chunk.partition, pa.concat_arrays(keys))  # one lookup: the map's hash set built once
    keeps = {}  # each segment's keep mask: decided once, reused by the rewrite
    at = 0
    for seg, seg_keys in zip(chunk.segments, keys):
        table, stamps = cache[seg.path]
        tombs = pc.is_null(table.column("value")).combine_chunks() if stamps.may_have_tombstones else None
        d = decide(table.column("offset").combine_chunks(), seg_keys, tombs, stamps, key_map, chunk.partition, rng,
                   latest=latest.slice(at, len(seg_keys)))
        at += len(seg_keys)
        keeps[seg.path] = d.keep
        outcomes.append(SegmentOutcome(seg, d.kept, d.dropped, d.unstamped))

    rows = []
    for i, segs in enumerate(group_rewrites(outcomes, config.segment_bytes)):
        group = RewriteGroup(i, chunk.partition, segs,
                             starts_partition=chunk.starts_partition and segs[0] == chunk.segments[0])
        # decide() is per record, and a group's records are its segments' in order: its mask is theirs joined
        keep = np.concatenate([keeps[s.path] for s in segs])
        fields = rewrite_group(root, topic, group, keep=keep, pass_ms=pass_ms, cache=cache, codec=config.segment_codec)
        rows.append({**(fields or no_file_fields(group)), "replaced": [s.path for s in segs]})
    return rows


def _scan_tasks(selected: list[PartitionCleaning]) -> list[ScanTask]:
    return [ScanTask(s, part.first_dirty_offset, part.first_uncleanable_offset)
            for part in selected for s in part.dirty]


def _key_map_on_driver(root: StorageRoot, topic: str, selected: list[PartitionCleaning]) -> pa.Table:
    """:func:`_key_map` without Spark, for a small dirty section: the same scan, grouped by PyArrow."""
    tasks = _scan_tasks(selected)
    if not tasks:
        return MAP_SCHEMA.empty_table()
    keys = pa.Table.from_batches([scan_file(root, topic, t) for t in tasks], schema=KEYS_SCHEMA)
    latest = keys.group_by(["partition", "key"]).aggregate([("offset", "max")])
    return latest.rename_columns({"offset_max": "latest"}).select(MAP_SCHEMA.names).cast(MAP_SCHEMA)


def _key_map(spark, root: StorageRoot, topic: str, selected: list[PartitionCleaning]) -> pa.Table:
    """Spark builds the offset map: ``max(offset)`` per ``(partition, key)`` over the dirty records.

    Collected as Arrow (one row per distinct dirty key, bounded by :func:`_limit_dirty`) to be broadcast.
    """
    from pyspark.sql import functions as F

    tasks = _scan_tasks(selected)
    if not tasks:
        return MAP_SCHEMA.empty_table()
    keys = scan_dirty_keys(spark, root, topic, tasks)
    table = keys.groupBy("partition", "key").agg(F.max("offset").alias("latest")).toArrow()
    return table.select(MAP_SCHEMA.names).cast(MAP_SCHEMA)


def _clean_chunks(spark, root: StorageRoot, topic: str, chunks: list[CleaningChunk], key_map, config: CleanerConfig,
                  pass_ms: int) -> list[dict]:
    """Run :func:`clean_chunk` for every chunk on the executors (``key_map``: the broadcast map table)."""
    weights = [(c, sum(s.bytes for s in c.segments)) for c in chunks]
    slices = assign_slices(weights, slice_count(spark, sum(w for _, w in weights)))

    def clean(batches):
        km = KeyMap(key_map.value)
        for b in batches:
            for k in b.column(0).to_pylist():
                rows = [r for c in slices[k] for r in clean_chunk(root, topic, c, km, config, pass_ms)]
                yield pa.RecordBatch.from_pylist(rows, schema=_RESULT_SCHEMA)

    df = spark.range(len(slices), numPartitions=len(slices)).mapInArrow(clean, _RESULT_DDL)
    return [r.asDict() for r in df.collect()]


_RESULT_DDL = ADD_FIELDS_DDL + ", replaced array<string>"
_RESULT_SCHEMA = ADD_FIELDS_SCHEMA.append(pa.field("replaced", pa.list_(pa.string())))


def _limit_dirty(part: PartitionCleaning, budget: int) -> PartitionCleaning:
    """``part`` with its dirty section cut at a segment boundary to at most ``budget`` records (>= 1 segment)."""
    taken, total = 0, 0
    while taken < len(part.dirty) and (taken == 0 or total + part.dirty[taken].records <= budget):
        total += part.dirty[taken].records
        taken += 1
    if taken == len(part.dirty):
        return part
    return replace(part, dirty=part.dirty[:taken], first_uncleanable_offset=part.dirty[taken].base_offset)
