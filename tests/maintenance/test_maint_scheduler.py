"""The job command lines (bad input, dry runs), the (topic, job) lease across processes, what the scheduler finds
due, and ``lakelog maintain --dry-run``.  (``lakelog maintain --once`` submitting real jobs: test_maint_cluster.)"""

from __future__ import annotations

import json
import multiprocessing
import subprocess
import sys

import pytest

from lakelog import Log
from lakelog.cli.job_cli import main as job_main
from lakelog.maintenance.job_lease import JobLease
from lakelog.maintenance.scheduler import SchedulerConfig, due_jobs, history_of
from lakelog.storage.storage_root import StorageRoot

from maint_support import REPO, T0

DAY = 86_400_000


@pytest.fixture
def populated(local_root):
    log = Log(local_root)
    log.create_topic("plain", 1, {"retention.ms": "1000"})
    log.create_topic("compacted", 1, {"cleanup.policy": "compact"})
    for i in range(3):
        log.append("plain", [{"key": "k", "value": f"{i}", "timestamp": T0}])
        log.append("compacted", [{"key": "k", "value": f"{i}"}])
    return log


def versions(log):
    return {t: log.snapshot(t).version for t in ("plain", "compacted")}


@pytest.mark.parametrize("job, argv, message", [
    ("retention", ["--topic", "nope"], "UNKNOWN_TOPIC_OR_PARTITION"),
    ("retention", ["--topic", "compacted"], "cleanup.policy contains 'delete'"),
    ("compaction", ["--topic", "plain"], "cleanup.policy contains 'compact'"),
    ("merge", ["--topic", "Bad/Name"], "INVALID_TOPIC"),
    ("vacuum", ["--topic", "plain", "--topic", "nope"], "UNKNOWN_TOPIC_OR_PARTITION"),
])
def test_bad_input_fails_clearly_and_changes_nothing(populated, local_root, capsys, job, argv, message):
    before = versions(populated)
    assert job_main(job, ["--root", local_root.uri, *argv]) == 1
    assert message in capsys.readouterr().err
    assert versions(populated) == before


def test_unknown_root_and_conflicting_flags(tmp_path, local_root, populated, capsys):
    assert job_main("retention", ["--root", str(tmp_path / "nowhere")]) == 1
    assert "not a lakelog storage root" in capsys.readouterr().err
    assert job_main("vacuum", ["--root", "ftp://x/y"]) == 1
    assert "Unsupported storage root" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        job_main("compaction", ["--root", local_root.uri, "--force", "--min-dirty-ratio", "0.2"])
    assert e.value.code == 2 and "not allowed with argument" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        job_main("vacuum", ["--root", local_root.uri, "--orphan-min-age-ms", "-5"])
    assert e.value.code == 2


def test_dry_runs_print_the_plan_and_change_nothing(populated, local_root, capsys):
    before = versions(populated)
    for job in ("retention", "compaction", "merge", "vacuum"):
        assert job_main(job, ["--root", local_root.uri, "--dry-run", "--json"]) == 0
        doc = json.loads(capsys.readouterr().out)
        assert doc["dry_run"] and doc["job"] == job and doc["error"] is None
    assert versions(populated) == before
    assert job_main("retention", ["--root", local_root.uri, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "retention (dry run)" in out and "partition 0: remove 2 of 3 segments" in out


def _grab(args):
    root_uri, barrier = args
    barrier.wait()
    return JobLease(StorageRoot.resolve(root_uri), "t", "compaction").acquire()


def test_the_lease_admits_one_holder_across_processes(local_root):
    local_root.filesystem.create_dir(local_root.path_for("topics"), recursive=True)
    ctx = multiprocessing.get_context("spawn")
    with ctx.Manager() as manager:
        barrier = manager.Barrier(4)
        with ctx.Pool(4) as pool:
            won = pool.map(_grab, [(local_root.uri, barrier)] * 4)
    assert sorted(won) == [False, False, False, True]
    lease = JobLease(local_root, "t", "compaction", ttl_ms=50)
    assert not lease.acquire()  # held (by a process that is gone, until it expires)
    holder = lease.current()
    assert lease.acquire(now_ms=holder.expires_ms + 1)  # expired: taken over
    assert lease.current().owner == lease.owner and lease.renew()
    lease.release("ok", "done")
    rec = lease.current()
    assert rec.status == "ok" and rec.released_ms is not None and not rec.held(rec.released_ms + 1)


def test_maintain_dry_run_lists_due_jobs(populated, local_root):
    cmd = [sys.executable, "-m", "lakelog.cli", "--root", local_root.uri, "maintain", "--once", "--dry-run"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert "plain\tretention\tdue\t2 segment(s) past retention" in done.stdout
    assert "compacted\tcompaction\tdue" in done.stdout
    assert JobLease(local_root, "plain", "retention").current() is None  # a dry run takes no lease


def test_what_is_due(populated, local_root):
    now = T0 + DAY
    snap = populated.snapshot("plain")
    due = due_jobs(snap, now, history_of(local_root, "plain"))
    assert [(d.job, d.reason) for d in due] == [("retention", "2 segment(s) past retention"),
                                                ("vacuum", "orphan sweep interval")]
    cfg = SchedulerConfig(merge_min_segments=3)
    assert [d.job for d in due_jobs(populated.snapshot("compacted"), now, {}, cfg)] == \
        ["compaction", "merge", "vacuum"]
    # a recent run spaces the next one by log.retention.check.interval.ms; a held lease blocks it
    lease = JobLease(local_root, "plain", "retention")
    assert lease.acquire(now_ms=now - 1000)
    assert "retention" not in [d.job for d in due_jobs(snap, now, history_of(local_root, "plain"))]
    lease.release("ok")
    hist = history_of(local_root, "plain")
    assert "retention" not in [d.job for d in due_jobs(snap, now, hist)]
    assert "retention" in [d.job for d in due_jobs(snap, now + 300_000, hist)]
    # vacuum follows a rewriting run once file.delete.delay.ms passed
    v = JobLease(local_root, "plain", "vacuum")
    assert v.acquire(now_ms=now - 5000)
    v.release("ok")
    hist = history_of(local_root, "plain")
    vac = [d for d in due_jobs(snap, hist["retention"].released_ms + 60_000, hist) if d.job == "vacuum"]
    assert vac and "file.delete.delay.ms" in vac[0].reason
