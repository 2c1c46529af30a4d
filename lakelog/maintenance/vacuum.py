"""The vacuum job: physically delete segment files that left the table (see :mod:`lakelog.maintenance.vacuum_plan`).

Per topic:

1. list the segment files (``partition=P/*.parquet``) -- *before* loading the
   snapshot, so a file committed meanwhile is seen as live, never as an orphan;
2. load the snapshot; its Arrow index is the set of live files;
3. learn when each file was removed: the Delta log's ``remove`` actions, read
   incrementally from a cursor kept in ``<topic>/_lakelog/vacuum.json``
   (``{"version": V, "removed": {path: deletionTimestamp}}``; a cache: if it is
   lost the log is read from the start, and if that was cleaned up, unknown
   unreferenced files count as removed when first seen);
4. delete what :func:`~lakelog.maintenance.vacuum_plan.plan_vacuum` allows, after
   checking once more against the newest snapshot that none became live.

Runs on the driver (listing and deleting, a thread pool for object stores); no
Spark work.  Safe to run concurrently with writers, readers and itself:
deleting a file twice is harmless, and a job killed half-way leaves files
that the next run deletes.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Sequence

from lakelog.storage.catalog import Catalog
from lakelog.maintenance import crash_points
from lakelog.maintenance.job_report import JobReport, TopicReport
from lakelog.maintenance.topic_selection import select_topics
from lakelog.maintenance.vacuum_plan import StoredFile, VacuumPlan, plan_vacuum
from lakelog.storage.delta_log import LogTailGone, read_tail
from lakelog.storage.segment_index import SEGMENT_NAME
from lakelog.storage.storage_root import StorageRoot
from lakelog.storage.topic_config import FILE_DELETE_DELAY_MS, TopicConfig
from lakelog.storage.topic_snapshot import advance

log = logging.getLogger(__name__)

STATE_FILE = "_lakelog/vacuum.json"
DEFAULT_ORPHAN_MIN_AGE_MS = 3_600_000  # an hour: far longer than any writer holds a file before committing it


def run_vacuum(root: StorageRoot, topics: Sequence[str] | None = None, *, dry_run: bool = False,
               now_ms: int | None = None, orphan_min_age_ms: int = DEFAULT_ORPHAN_MIN_AGE_MS) -> JobReport:
    """Delete removed and orphan segment files of ``topics`` (default: every topic) that are old enough."""
    if orphan_min_age_ms < 0:
        from lakelog.errors import InvalidRequest

        raise InvalidRequest(f"orphan minimum age must be >= 0 ms, got {orphan_min_age_ms}")
    started = time.monotonic()
    report = JobReport("vacuum", root.uri, dry_run)
    for snap in select_topics(root, topics, policy=None, job="vacuum"):
        report.topics.append(vacuum_topic(root, snap.topic, dry_run=dry_run, now_ms=now_ms,
                                          orphan_min_age_ms=orphan_min_age_ms))
    report.duration_s = time.monotonic() - started
    return report


def list_segment_files(root: StorageRoot, topic: str) -> list[StoredFile]:
    """Every segment file under the topic's ``partition=P/`` directories."""
    from pyarrow.fs import FileSelector, FileType

    fs = root.filesystem
    table = root.path_for("topics", topic)
    out = []
    for d in fs.get_file_info(FileSelector(table, allow_not_found=True)):
        if d.type != FileType.Directory or not d.base_name.startswith("partition="):
            continue
        for f in fs.get_file_info(FileSelector(d.path, allow_not_found=True)):
            rel = f"{d.base_name}/{f.base_name}"
            if f.type == FileType.File and SEGMENT_NAME.match(rel):
                mtime = int(f.mtime.timestamp() * 1000) if f.mtime is not None else 0
                out.append(StoredFile(rel, int(f.size or 0), mtime))
    return out


def _load_state(root: StorageRoot, topic: str) -> tuple[int, dict[str, int]]:
    try:
        with root.filesystem.open_input_stream(root.path_for("topics", topic, STATE_FILE)) as f:
            doc = json.loads(f.read().decode())
        return int(doc["version"]), {str(k): int(v) for k, v in doc["removed"].items()}
    except (FileNotFoundError, KeyError, ValueError, TypeError):
        return -1, {}
    except OSError as e:
        if "NoSuchKey" in str(e) or "does not exist" in str(e) or "not found" in str(e).lower():
            return -1, {}
        raise


def _save_state(root: StorageRoot, topic: str, version: int, removed: dict[str, int]) -> None:
    fs = root.filesystem
    final = root.path_for("topics", topic, STATE_FILE)
    data = json.dumps({"version": version, "removed": removed}, sort_keys=True).encode()
    try:
        if root.is_local:
            fs.create_dir(final.rsplit("/", 1)[0], recursive=True)
            tmp = f"{final}.{uuid.uuid4().hex}.tmp"
            with fs.open_output_stream(tmp) as f:
                f.write(data)
            fs.move(tmp, final)
        else:
            with fs.open_output_stream(final) as f:
                f.write(data)
    except OSError as e:  # a cache: the next run reads the log again
        log.warning("could not save the vacuum state of %s: %s", topic, e)


def _removal_times(root: StorageRoot, topic: str, version: int, unreferenced: set[str],
                   now_ms: int) -> dict[str, int]:
    cursor, removed = _load_state(root, topic)
    if cursor > version:
        cursor, removed = -1, {}
    table = root.path_for("topics", topic)
    try:
        for commit in read_tail(root, table, cursor, until_version=version):
            for rm in commit.removes:
                removed[rm["path"]] = int(rm.get("deletionTimestamp") or commit.commit_info.get("timestamp") or 0)
    except LogTailGone:
        # the removes we missed are gone from the log: an unreferenced file counts as removed when first seen
        for path in unreferenced:
            removed.setdefault(path, now_ms)
    return removed


def vacuum_topic(root: StorageRoot, topic: str, *, dry_run: bool = False, now_ms: int | None = None,
                 orphan_min_age_ms: int = DEFAULT_ORPHAN_MIN_AGE_MS) -> TopicReport:
    files = list_segment_files(root, topic)
    snap = Catalog(root).snapshot(topic)
    now = now_ms if now_ms is not None else int(time.time() * 1000)
    delay = int(TopicConfig(snap.configuration).get(FILE_DELETE_DELAY_MS))
    live = {s.path for s in snap.index}
    unreferenced = {f.path for f in files if f.path not in live}
    removed = _removal_times(root, topic, snap.version, unreferenced, now)
    plan = plan_vacuum(files, live=live, removed_at=removed, now_ms=now, delete_delay_ms=delay,
                       orphan_min_age_ms=orphan_min_age_ms, topic=topic, version=snap.version)
    rep = TopicReport(topic, version_before=snap.version, partitions_examined=snap.partition_count)
    rep.records_before = rep.records_after = sum(s.records for s in snap.index)
    rep.bytes_before = rep.bytes_after = sum(f.size for f in files)
    for d in plan.deletions:
        rep.plan.append(f"delete {d.file.path} ({d.reason}, {d.file.size} B)")
    rep.note = f"{len(plan.deletions)} file(s) to delete, {plan.waiting} waiting for file.delete.delay.ms " \
               f"({delay} ms) or the orphan age, {plan.live} live"
    if not dry_run:
        deleted = _delete(root, snap, plan)
        rep.files_deleted = len(deleted)
        rep.bytes_after -= sum(d.file.size for d in plan.deletions if d.file.path in deleted)
        listed = {f.path for f in files}
        _save_state(root, topic, snap.version,
                    {p: t for p, t in removed.items() if p in listed and p not in deleted and p not in live})
    return rep


def _delete(root: StorageRoot, snap, plan: VacuumPlan) -> set[str]:
    if not plan.deletions:
        return set()
    latest = advance(root, snap.copy())  # a file that became live since (an in-flight commit landed) stays
    targets = [d.file.path for d in plan.deletions if d.file.path not in latest.index]
    fs = root.filesystem

    def delete(rel: str) -> str | None:
        try:
            fs.delete_file(root.path_for("topics", snap.topic, rel))
        except FileNotFoundError:
            pass  # deleted by a concurrent vacuum
        except OSError as e:
            log.warning("vacuum could not delete %s of %s: %s", rel, snap.topic, e)
            return None
        crash_points.reach("deleting")
        return rel

    workers = 1 if root.is_local else 16
    with ThreadPoolExecutor(workers) as pool:
        return {r for r in pool.map(delete, targets) if r is not None}
