"""The merge job (Spark) and the vacuum job: records and offsets unchanged, dataChange=false, stamps carried over;
removed and orphan files deleted only after their delay, live files never."""

from __future__ import annotations

import json
import os
import time

import pyarrow.parquet as pq

from lakelog import Log
from lakelog.maintenance.cleaner import run_compaction
from lakelog.maintenance.segment_merge import run_merge
from lakelog.maintenance.tombstone_horizon import TombstoneStamps
from lakelog.maintenance.vacuum import list_segment_files, run_vacuum

from maint_support import T0, check_contiguous, table_rows


def test_merge_joins_small_segments_without_changing_records(spark, log, root):
    log.create_topic("t", 2, {"internal.segment.bytes": "100000"})  # below segment.bytes' 1 MiB floor: Kafka's testing key
    for i in range(6):
        for p in range(2):
            log.append("t", [{"key": f"k{j}", "value": f"v{i}-{j}", "timestamp": T0 + i} for j in range(4)],
                       partition=p)
    before = {p: table_rows(log, "t", p) for p in range(2)}
    bases = {p: [s.base_offset for s in log.segments("t", p)] for p in range(2)}
    report = run_merge(spark, root, ["t"])
    t = report.topics[0]
    assert t.records_before == t.records_after == 48 and t.segments_written == 2
    snap = log.snapshot("t")
    for p in range(2):
        assert table_rows(log, "t", p) == before[p]
        assert [s.base_offset for s in snap.index.segments(p)] == [bases[p][0]]
    check_contiguous(snap)
    commit = root.filesystem.open_input_stream(
        root.path_for("topics", "t", "_delta_log", f"{snap.version:020d}.json")).read().decode()
    actions = [json.loads(line) for line in commit.splitlines()]
    assert {a.get("add", a.get("remove", {})).get("dataChange") for a in actions if "add" in a or "remove" in a} \
        == {False}
    assert next(a["commitInfo"] for a in actions if "commitInfo" in a)["lakelog.operation"] == "merge"
    # a dry run plans, a second run has nothing left to join
    assert run_merge(spark, root, ["t"]).topics[0].segments_written == 0


def test_merge_respects_segment_bytes_and_keeps_tombstone_stamps(spark, local_root):
    log = Log(local_root)
    log.create_topic("c", 1, {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01",
                              "delete.retention.ms": "100000"})
    log.append("c", [{"key": "a", "value": "1"}, {"key": "b", "value": None}])
    log.append("c", [{"key": "c", "value": None}])
    log.append("c", [{"key": "a", "value": "2"}])
    log.append("c", [{"key": "z", "value": "z"}])
    run_compaction(spark, local_root, ["c"], now_ms=T0)  # stamps b and c at T0
    seg_bytes = max(s.bytes for s in log.segments("c", 0))
    log.alter_topic("c", {"internal.segment.bytes": str(10 * seg_bytes)})
    for i in range(3):
        log.append("c", [{"key": f"n{i}", "value": "n"}])
    run_merge(spark, local_root, ["c"], segment_ms=10**12)
    segs = log.segments("c", 0)
    assert [s.base_offset for s in segs] == [0, 4]  # never across the cleaner checkpoint (4)
    md = pq.ParquetFile(local_root.path_for("topics", "c", segs[0].path)).schema_arrow.metadata
    stamps = TombstoneStamps.from_metadata(md)
    assert stamps.count == 2 and stamps.pass_times([1, 2]) == [T0, T0]
    # the merged tombstones still expire by their first pass, not by the merge
    log.append("c", [{"key": "late", "value": "x"}])
    run_compaction(spark, local_root, ["c"], now_ms=T0 + 100_000)
    assert [k for _, k, v in table_rows(log, "c", 0) if v is None] == []
    # small segment.bytes: groups stay under it
    log2 = Log(local_root)
    log2.create_topic("s", 1)
    for i in range(6):
        log2.append("s", [{"key": "k", "value": "x" * 50}])
    one = log2.segments("s", 0)[0].bytes
    run_merge(spark, local_root, ["s"], segment_bytes=int(one * 2.5))
    assert [s.base_offset for s in log2.segments("s", 0)] == [0, 2, 4]


def test_vacuum_deletes_removed_files_after_the_delay_and_orphans_after_their_age(log, root):
    log.create_topic("t", 1, {"retention.ms": "1000", "file.delete.delay.ms": "60000"})
    for i in range(3):
        log.append("t", [{"key": "k", "value": f"{i}", "timestamp": T0 + i}])
    from lakelog.maintenance.retention import run_retention
    from lakelog.writer.segment_writer import write_segment

    run_retention(root, ["t"], now_ms=T0 + 10_000)
    live = {s.path for s in log.snapshot("t").index}
    assert len(live) == 1
    orphan = write_segment(root, "t", 0, log.read("t", 0))  # written, never committed
    removed_at = int(time.time() * 1000)

    early = run_vacuum(root, ["t"], now_ms=removed_at + 30_000, orphan_min_age_ms=3_600_000)
    assert early.topics[0].files_deleted == 0 and len(list_segment_files(root, "t")) == 4
    dry = run_vacuum(root, ["t"], dry_run=True, now_ms=removed_at + 61_000)
    assert len(dry.topics[0].plan) == 2 and len(list_segment_files(root, "t")) == 4
    done = run_vacuum(root, ["t"], now_ms=removed_at + 61_000, orphan_min_age_ms=3_600_000)
    assert done.topics[0].files_deleted == 2
    assert {f.path for f in list_segment_files(root, "t")} == live | {orphan.path}
    swept = run_vacuum(root, ["t"], now_ms=removed_at + 3_700_000, orphan_min_age_ms=3_600_000)
    assert swept.topics[0].files_deleted == 1
    assert {f.path for f in list_segment_files(root, "t")} == live  # never a live file, whatever its age
    assert [r["value"] for r in log.read("t", 0).to_pylist()] == [b"2"]
    nothing = run_vacuum(root, ["t"], now_ms=removed_at + 10**10, orphan_min_age_ms=0)
    assert nothing.topics[0].files_deleted == 0


def test_vacuum_rebuilds_its_cursor_when_its_state_is_lost(local_root):
    log = Log(local_root)
    log.create_topic("t", 1, {"retention.ms": "1000", "file.delete.delay.ms": "60000"})
    for i in range(3):
        log.append("t", [{"key": "k", "value": f"{i}", "timestamp": T0 + i}])
    from lakelog.maintenance.retention import run_retention

    run_retention(local_root, ["t"], now_ms=T0 + 10_000)
    assert run_vacuum(local_root, ["t"]).topics[0].files_deleted == 0  # too early; the cursor is saved
    state = local_root.path_for("topics", "t", "_lakelog", "vacuum.json")
    assert len(json.load(open(state))["removed"]) == 2
    os.remove(state)
    report = run_vacuum(local_root, ["t"], now_ms=int(time.time() * 1000) + 61_000)
    assert report.topics[0].files_deleted == 2
    assert json.load(open(state))["version"] == log.snapshot("t").version
