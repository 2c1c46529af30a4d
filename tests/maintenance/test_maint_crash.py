"""Crash safety: each job killed with SIGKILL at its crash points (and retention at random instants), then rerun:
the table stays consistent (index = Delta log, segments contiguous, every live file present) and the rerun's
result is the correct one."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time

import pytest

from lakelog import Log
from lakelog.storage.catalog import Catalog
from lakelog.maintenance.cleaner import run_compaction
from lakelog.maintenance.segment_merge import run_merge
from lakelog.maintenance.retention import run_retention
from lakelog.maintenance.vacuum import list_segment_files, run_vacuum
from lakelog.storage.storage_root import StorageRoot
from lakelog.storage.topic_snapshot import rebuild_from_delta

from maint_support import REPO, SPARK_ENV, T0, check_contiguous, table_rows

pytestmark = pytest.mark.slow


def run_job_process(script: str, root, topic: str, *args: str, crash_at: str | None = None,
                    kill_after_s: float | None = None, timeout: float = 600) -> int:
    """Run ``jobs/<script>`` in a child process (own process group); returns its exit code (-9: killed)."""
    env = dict(os.environ, **SPARK_ENV)
    if crash_at:
        env["LAKELOG_CRASH_AT"] = crash_at
    cmd = [sys.executable, str(REPO / "jobs" / script), "--root", root.uri, "--topic", topic, *args]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        if kill_after_s is not None:
            try:
                proc.wait(timeout=kill_after_s)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
        _, err = proc.communicate(timeout=timeout)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # the JVM a PySpark driver started, if it outlived it
        except ProcessLookupError:
            pass
    if proc.returncode not in (0, -signal.SIGKILL):
        raise AssertionError(f"{script} exited {proc.returncode}: {err.decode()[-3000:]}")
    return proc.returncode


def check_consistent(root, topic: str) -> None:
    """The Arrow index agrees with a full Delta snapshot; segments are contiguous; every live file exists."""
    snap = Catalog(root).snapshot(topic)
    full = rebuild_from_delta(root, topic)
    assert {s.path for s in snap.index} == {s.path for s in full.index}
    assert snap.version == full.version
    check_contiguous(snap)
    present = {f.path for f in list_segment_files(root, topic)}
    assert {s.path for s in snap.index} <= present


@pytest.mark.parametrize("point", ["files-written", "committed"])
def test_retention_killed_at_each_point(local_root, point):
    log = Log(local_root)
    log.create_topic("t", 2, {"retention.ms": "1000"})
    for p in range(2):
        for i in range(3):
            log.append("t", [{"key": "k", "value": f"{i}", "timestamp": T0 + i}], partition=p)
    v = log.snapshot("t").version
    assert run_job_process("retention.py", local_root, "t", crash_at=point) == -signal.SIGKILL
    check_consistent(local_root, "t")
    assert Catalog(local_root).snapshot("t").version == (v if point == "files-written" else v + 1)
    run_retention(local_root, ["t"])
    check_consistent(local_root, "t")
    for p in range(2):
        assert table_rows(Log(local_root), "t", p) == [(2, b"k", b"2")]


def test_retention_killed_at_random_instants(local_root, tmp_path):
    log = Log(local_root)
    log.create_topic("t", 4, {"retention.ms": "1000"})
    for i in range(6):
        log.append("t", [{"key": f"k{j}", "value": f"{i}", "timestamp": T0 + i} for j in range(8)])
    expected = {p: [r for r in table_rows(log, "t", p) if r[0] >= log.segments("t", p)[-1].base_offset]
                for p in range(4)}
    started = time.monotonic()
    assert run_job_process("retention.py", local_root, "t", "--dry-run") == 0
    planning = time.monotonic() - started  # start-up and planning: a real run takes longer
    copy = StorageRoot.resolve(str(tmp_path / "copy"))
    shutil.copytree(local_root.uri, copy.uri)
    started = time.monotonic()
    assert run_job_process("retention.py", copy, "t") == 0
    full = time.monotonic() - started  # a whole run, commit included, on an identical copy
    rng = random.Random(5)
    # The first kill lands early in the run (always mid-job: at 0.3-0.6 of the faster of the two timed runs, as
    # the machine's load can change between them -- at 0.5-1.0 of the dry run, a run once finished first); the
    # others anywhere up to the end of a whole run, so they can also hit the files-written and commit steps.
    kill_at = [rng.uniform(0.3, 0.6) * min(planning, full)] + [rng.uniform(planning, full) for _ in range(3)]
    codes = []
    for t in kill_at:
        codes.append(run_job_process("retention.py", local_root, "t", kill_after_s=t))
        check_consistent(local_root, "t")
    assert -signal.SIGKILL in codes, f"no run was killed mid-job (exit codes {codes})"
    run_retention(local_root, ["t"])
    check_consistent(local_root, "t")
    assert {p: table_rows(Log(local_root), "t", p) for p in range(4)} == expected


def test_vacuum_killed_while_deleting(local_root):
    log = Log(local_root)
    log.create_topic("t", 1, {"retention.ms": "1000", "file.delete.delay.ms": "0"})
    for i in range(5):
        log.append("t", [{"key": "k", "value": f"{i}", "timestamp": T0 + i}])
    run_retention(local_root, ["t"])
    assert len(list_segment_files(local_root, "t")) == 5
    assert run_job_process("vacuum.py", local_root, "t", crash_at="deleting") == -signal.SIGKILL
    assert len(list_segment_files(local_root, "t")) == 4  # one deleted, then killed
    check_consistent(local_root, "t")
    run_vacuum(local_root, ["t"])
    assert [f.path for f in list_segment_files(local_root, "t")] == [s.path for s in log.segments("t", 0)]
    assert table_rows(log, "t", 0) == [(4, b"k", b"4")]


def test_compaction_and_merge_killed_then_rerun(spark, local_root):
    log = Log(local_root)
    log.create_topic("c", 1, {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01"})
    for i in range(6):
        log.append("c", [{"key": f"k{j}", "value": f"{i}-{j}"} for j in range(3)])
    before = table_rows(log, "c", 0)
    v = log.snapshot("c").version
    # killed with its new segments written, before the commit: nothing visible changed
    code = run_job_process("compact.py", local_root, "c", "--master", "local[1]", crash_at="files-written")
    assert code == -signal.SIGKILL
    assert Catalog(local_root).snapshot("c").version == v and table_rows(log, "c", 0) == before
    check_consistent(local_root, "c")
    orphans = len(list_segment_files(local_root, "c")) - len(log.segments("c", 0))
    assert orphans > 0
    run_compaction(spark, local_root, ["c"], now_ms=T0)
    check_consistent(local_root, "c")
    expected = [(12 + j, f"k{j}".encode(), f"4-{j}".encode()) for j in range(3)] + \
               [(15 + j, f"k{j}".encode(), f"5-{j}".encode()) for j in range(3)]
    assert table_rows(log, "c", 0) == expected
    # the merge killed right after its commit (the index not yet persisted): the commit stands
    code = run_job_process("merge_segments.py", local_root, "c", "--master", "local[1]", crash_at="committed")
    assert code == -signal.SIGKILL
    check_consistent(local_root, "c")
    assert table_rows(Log(local_root), "c", 0) == expected
    assert run_merge(spark, local_root, ["c"]).topics[0].segments_written == 0  # nothing left to do
    # vacuum removes the dead attempt's orphans and the replaced files, never a live one
    run_vacuum(local_root, ["c"], now_ms=int(time.time() * 1000) + 120_000, orphan_min_age_ms=0)
    assert sorted(f.path for f in list_segment_files(local_root, "c")) == \
        sorted(s.path for s in Catalog(local_root).snapshot("c").index)
    assert table_rows(Log(local_root), "c", 0) == expected
