"""The retention job: remove expired segments and move log start offsets, one fenced commit per topic.

Metadata only: it plans from the Arrow index (:mod:`lakelog.maintenance.retention_plan`),
never reads a segment, and runs entirely on the driver (no Spark work to
distribute).  Per topic one commit removes the planned segments
(``dataChange=true``) and sets ``lakelog.lso.<P>`` to each changed partition's
new log start offset, so a reader below it gets ``OFFSET_OUT_OF_RANGE`` from
the same version on.  The files stay until vacuum deletes them after
``file.delete.delay.ms``.  A commit lost to another maintenance job (or a
concurrent delete-records) is replanned from the new snapshot.
"""

from __future__ import annotations

import time
from typing import Sequence

from lakelog.maintenance.job_report import JobReport, TopicReport
from lakelog.maintenance.retention_plan import plan_retention
from lakelog.maintenance.rewrite import commit_rewrite, replan_on_conflict
from lakelog.maintenance.topic_selection import select_topics
from lakelog.storage.storage_root import StorageRoot
from lakelog.storage.topic_snapshot import lso_app

MAX_ATTEMPTS = 5


def run_retention(root: StorageRoot, topics: Sequence[str] | None = None, *, dry_run: bool = False,
                  now_ms: int | None = None) -> JobReport:
    """Apply retention to ``topics`` (default: every topic whose cleanup.policy contains 'delete')."""
    started = time.monotonic()
    report = JobReport("retention", root.uri, dry_run)
    for snap in select_topics(root, topics, policy="delete", job="retention"):
        report.topics.append(_retain_topic(root, snap, dry_run, now_ms))
    report.duration_s = time.monotonic() - started
    return report


def _retain_topic(root: StorageRoot, snap, dry_run: bool, now_ms: int | None) -> TopicReport:
    return replan_on_conflict(root, snap, "retention", MAX_ATTEMPTS,
                              lambda snap: _retain_once(root, snap, dry_run, now_ms))


def _retain_once(root: StorageRoot, snap, dry_run: bool, now_ms: int | None) -> TopicReport:
    now = now_ms if now_ms is not None else int(time.time() * 1000)
    plan = plan_retention(snap, now)
    rep = TopicReport(snap.topic, version_before=snap.version, partitions_examined=len(plan.partitions))
    for p in plan.partitions:
        rep.records_before += p.records_before
        rep.bytes_before += p.bytes_before
    rep.records_after, rep.bytes_after = rep.records_before, rep.bytes_before
    changed = [p for p in plan.partitions if p.removed]
    for p in changed:
        rep.record_removed(p.removed)
        if p.new_log_start_offset != p.log_start_offset:
            rep.log_start_offsets[p.partition] = (p.log_start_offset, p.new_log_start_offset)
        reasons = {r: p.reasons.count(r) for r in dict.fromkeys(p.reasons)}
        rep.plan.append(f"partition {p.partition}: remove {len(p.removed)} of {len(p.segments)} segments "
                        f"[{p.removed[0].base_offset}, {p.removed[-1].last_offset}] "
                        f"({', '.join(f'{n} by {r}' for r, n in reasons.items())}); log start offset "
                        f"{p.log_start_offset} -> {p.new_log_start_offset}")
    rep.partitions_changed = len(changed)
    if dry_run or not changed:
        return rep
    txns = {lso_app(p.partition): p.new_log_start_floor for p in changed
            if p.new_log_start_floor > p.log_start_floor}
    after = commit_rewrite(root, snap, operation="retention", removed=plan.removed, txns=txns,
                           data_change=True, metadata={"lakelog.retention": {
                               str(p.partition): [p.log_start_offset, p.new_log_start_offset]
                               for p in changed}})
    rep.version_after = after.version
    return rep
