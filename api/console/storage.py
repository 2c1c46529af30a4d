"""Console storage page of a topic: segments per partition on a timeline (offset range against time and size),
the Delta log's recent commits (appends, retention, compaction, merges, alters) from their commit info,
the maintenance jobs due and the last reports of each, and the live-file count.  Describe on the topic."""

from __future__ import annotations

import json
import time

from fastapi import APIRouter, Request
from fastapi.responses import Response

from lakelog.broker.authorizer import TOPIC
from lakelog.maintenance.scheduler import due_jobs, history_of
from lakelog.storage.delta_log import last_checkpoint_version, read_commit
from lakelog.writer.checkpointer import DEFAULT_CHECKPOINT_INTERVAL

from api.console.paths import PREFIX
from api.console.render import page
from api.console.session import PrincipalDep

router = APIRouter(prefix=PREFIX, include_in_schema=False)
COMMITS = 25  # newest commits shown


def by_time(segments: list, width: int = 600, height: int = 40) -> list[dict]:
    """One bar per segment on a time axis: x and width by its records' time range (first to last timestamp,
    over the partition's), height by its size relative to the biggest."""
    if not segments:
        return []
    lo = min(s.min_timestamp for s in segments)
    hi = max(s.max_timestamp for s in segments)
    span = max(hi - lo, 1)
    biggest = max(s.bytes for s in segments) or 1
    inner = width - 4  # room for the last segment's minimum width
    out = []
    for s in segments:
        h = max(height * s.bytes / biggest, 2)
        out.append({"x": (s.min_timestamp - lo) / span * inner,
                    "w": max((s.max_timestamp - s.min_timestamp) / span * inner, 4), "y": height - h, "h": h,
                    "segment": s})
    return out


def timeline(segments: list, width: int = 600, height: int = 16) -> list[dict]:
    """One bar per segment: x and width by offset range over the partition's offsets, shade by size."""
    if not segments:
        return []
    lo, hi = segments[0].base_offset, max(s.last_offset for s in segments) + 1
    span = max(hi - lo, 1)
    biggest = max(s.bytes for s in segments) or 1
    return [{"x": (s.base_offset - lo) / span * width, "w": max((s.last_offset + 1 - s.base_offset) / span * width, 1),
             "h": height, "opacity": 0.3 + 0.7 * s.bytes / biggest, "segment": s} for s in segments]


def _records(add: dict) -> int:
    try:
        return int(json.loads(add["stats"]).get("numRecords", 0)) if isinstance(add.get("stats"), str) else 0
    except (ValueError, TypeError):
        return 0


def _commits(log, topic: str, version: int) -> list[dict]:
    root = log.root
    table = root.path_for("topics", topic)
    out = []
    for v in range(version, max(-1, version - COMMITS), -1):
        try:
            c = read_commit(root, table, v)
        except OSError:
            c = None
        if c is None:
            continue
        info = c.commit_info
        out.append({"version": v, "timestamp": info.get("timestamp"),
                    "operation": info.get("lakelog.operation") or info.get("operation") or "-",
                    "adds": len(c.adds), "removes": len(c.removes),
                    "records": sum(_records(a) for a in c.adds)})
    return out


@router.get("/topics/{topic}/storage")
def storage_page(request: Request, topic: str, principal: PrincipalDep) -> Response:
    state = request.app.state
    state.authorizer.authorize(principal, "Describe", TOPIC, topic)
    log = state.log
    snap = log.snapshot(topic)
    partitions = []
    for p in range(snap.partition_count):
        segs = snap.index.segments(p)
        partitions.append({"partition": p, "segments": segs, "bars": timeline(segs), "time_bars": by_time(segs),
                           "bytes": sum(s.bytes for s in segs)})
    history = history_of(log.root, topic)
    now = int(time.time() * 1000)
    try:
        due = due_jobs(snap, now, history)
    except Exception as e:  # a planner needing what this front cannot provide must not hide the page
        due = []
        due_error = type(e).__name__
    else:
        due_error = None
    interval = int(snap.configuration.get("delta.checkpointInterval", DEFAULT_CHECKPOINT_INTERVAL))
    checkpoint = last_checkpoint_version(log.root, log.root.path_for("topics", topic))
    return page(request, "storage.html", principal=principal.name, topic=topic, version=snap.version,
                partitions=partitions, live_files=sum(len(p["segments"]) for p in partitions),
                checkpoint=checkpoint, checkpoint_interval=interval,
                next_checkpoint=(snap.version // interval + 1) * interval,
                commits=_commits(log, topic, snap.version), due=due, due_error=due_error,
                reports=[(job, rec) for job, rec in history.items()])
