"""The jobs through real ``spark-submit`` on a Spark standalone cluster (a master and a worker on 127.0.0.1,
started and torn down by the test), and the scheduler submitting to it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from lakelog import Log
from lakelog.maintenance.job_lease import JobLease

from maint_support import REPO, T0, check_contiguous, table_rows
from spark_cluster import BIN, cluster_env, standalone  # noqa: F401  (standalone: the fixture)

pytestmark = pytest.mark.slow


def submit(master: str, script: str, *args: str) -> dict:
    cmd = [str(BIN / "spark-submit"), "--master", master, str(REPO / "jobs" / script), *args, "--json"]
    done = subprocess.run(cmd, env=cluster_env(), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_jobs_on_a_standalone_cluster(standalone, local_root):
    master, logs = standalone
    log = Log(local_root)
    log.create_topic("c", 2, {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01"})
    log.create_topic("d", 1, {"retention.ms": "1000", "file.delete.delay.ms": "0"})
    for i in range(4):
        for p in range(2):
            log.append("c", [{"key": f"k{j}", "value": f"{i}-{j}"} for j in range(3)], partition=p)
        log.append("d", [{"key": "k", "value": f"{i}", "timestamp": T0 + i}])

    report = submit(master, "compact.py", "--root", local_root.uri)
    assert report["spark_master"] == master
    assert report["job"] == "compaction" and report["topics"][0]["segments_removed"] == 4
    for p in range(2):
        assert [v for _, _, v in table_rows(log, "c", p)] == [b"2-0", b"2-1", b"2-2", b"3-0", b"3-1", b"3-2"]
    report = submit(master, "merge_segments.py", "--root", local_root.uri, "--topic", "c")
    assert report["topics"][0]["segments_written"] == 2
    assert [len(log.segments("c", p)) for p in range(2)] == [2, 2]  # merged up to the cleaner checkpoint
    check_contiguous(log.snapshot("c"))
    assert len(list((logs / "work").glob("app-*"))) >= 2  # the worker ran executors for both jobs

    # the scheduler submits retention, then vacuum, to the same cluster
    cmd = [sys.executable, "-m", "lakelog.cli", "--root", local_root.uri, "maintain", "--once", "--topic", "d",
           "--master", master, "--json"]
    done = subprocess.run(cmd, env=cluster_env(), capture_output=True, text=True, timeout=600, cwd=REPO)
    assert done.returncode == 0, done.stderr[-4000:]
    runs = {r["job"]: r for r in json.loads(done.stdout)}
    assert runs["retention"]["exit_code"] == 0 and "segments removed 3" in runs["retention"]["summary"]
    assert runs["vacuum"]["exit_code"] == 0
    assert "run retention on d" in done.stderr and "spark-submit" in done.stderr  # every run is logged
    assert table_rows(log, "d", 0) == [(3, b"k", b"3")]
    assert JobLease(local_root, "d", "retention").current().status == "ok"
    again = subprocess.run(cmd[:-1], env=cluster_env(), capture_output=True, text=True, timeout=300, cwd=REPO)
    assert again.returncode == 0 and again.stdout.strip() == "nothing due"  # spaced by the last runs
