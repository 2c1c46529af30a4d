"""The maintenance scheduler: which jobs are due on which topic, and running them as ``spark-submit`` subprocesses.

Kafka runs retention from the log manager every
``log.retention.check.interval.ms`` (5 minutes) and the log cleaner whenever a
log's dirty ratio passes ``min.cleanable.dirty.ratio``.  ``lakelog maintain``
does the same for every topic of a root, checking on each tick (cheap:
metadata only, from the Arrow index):

=========== ================================================================
job         due when
=========== ================================================================
retention   ``cleanup.policy`` has ``delete``, some segment is past
            ``retention.ms`` / ``retention.bytes`` / the log start offset, and
            the last run started ``log.retention.check.interval.ms`` ago
compaction  ``cleanup.policy`` has ``compact``, some partition's dirty ratio
            exceeds ``min.cleanable.dirty.ratio`` (or its log start offset
            passed whole segments), and the last run started 15 s ago
            (Kafka's ``log.cleaner.backoff.ms``)
merge       at least ``merge_min_segments`` small segments of the topic would be
            joined, and the last run started a check interval ago
vacuum      a retention/compaction/merge run finished since the last vacuum and
            ``file.delete.delay.ms`` has passed since, or ``vacuum_interval_ms``
            (orphan sweep) passed since the last vacuum
=========== ================================================================

Each due job runs as ``spark-submit jobs/<job>.py --root ROOT --topic T --json``
under the (topic, job) lease (:mod:`lakelog.maintenance.job_lease`), so two
schedulers -- or a scheduler and a cron line -- never run the same job on the
same topic at once; the lease file records the run's status for spacing.
Every run is logged (topic, job, reason, exit code, duration, summary).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence

from lakelog.maintenance.job_lease import JobLease, LeaseRecord
from lakelog.maintenance.job_scripts import JOB_ORDER, script_path
from lakelog.storage.storage_root import StorageRoot
from lakelog.storage.topic_config import FILE_DELETE_DELAY_MS, RETENTION_CHECK_INTERVAL_MS, TopicConfig

log = logging.getLogger(__name__)

CLEANER_BACKOFF_MS = 15_000  # Kafka's log.cleaner.backoff.ms: a topic still dirty after a pass waits this long
REWRITING_JOBS = ("retention", "compaction", "merge")


@dataclass(frozen=True)
class SchedulerConfig:
    """Scheduler knobs (topic configs supply the rest)."""

    merge_min_segments: int = 10
    vacuum_interval_ms: int = 3_600_000
    lease_ttl_ms: int = 600_000
    job_timeout_s: float = 3600.0
    master: str | None = None
    spark_submit: str | None = None
    storage_options: Mapping[str, str] = field(default_factory=dict)
    extra_job_args: Mapping[str, Sequence[str]] = field(default_factory=dict)  # job -> extra CLI args


@dataclass(frozen=True)
class DueJob:
    """A job to run on a topic, and why."""

    topic: str
    job: str
    reason: str


def due_jobs(snapshot, now_ms: int, history: Mapping[str, LeaseRecord | None],
             config: SchedulerConfig = SchedulerConfig()) -> list[DueJob]:
    """The jobs due on one topic (in :data:`JOB_ORDER`); ``history``: job -> its newest lease record."""
    from lakelog.maintenance.cleaner_plan import plan_cleaning
    from lakelog.maintenance.segment_merge_plan import plan_merge
    from lakelog.maintenance.retention_plan import plan_retention

    topic = snapshot.topic
    cfg = TopicConfig(snapshot.configuration)
    interval = int(cfg.get(RETENTION_CHECK_INTERVAL_MS))
    policies = cfg.cleanup_policy
    out: list[DueJob] = []

    def idle(job: str, spacing: int) -> bool:
        rec = history.get(job)
        if rec is not None and rec.held(now_ms):
            return False  # running somewhere
        return rec is None or now_ms - rec.acquired_ms >= spacing

    if "delete" in policies and idle("retention", interval):
        plan = plan_retention(snapshot, now_ms)
        if not plan.empty:
            out.append(DueJob(topic, "retention", f"{len(plan.removed)} segment(s) past retention"))
    if "compact" in policies and idle("compaction", CLEANER_BACKOFF_MS):
        plan = plan_cleaning(snapshot, now_ms)
        if plan.selected:
            worst = max(p.dirty_ratio for p in plan.selected_partitions())
            out.append(DueJob(topic, "compaction", f"{len(plan.selected)} partition(s) to clean, dirty ratio up to "
                                                   f"{worst:.2f} (min.cleanable.dirty.ratio "
                                                   f"{plan.config.min_cleanable_dirty_ratio})"))
    if idle("merge", interval):
        mplan = plan_merge(snapshot)
        if mplan.segments >= config.merge_min_segments:
            out.append(DueJob(topic, "merge", f"{mplan.segments} small segment(s) in {len(mplan.groups)} group(s)"))
    vac = history.get("vacuum")
    if vac is None or not vac.held(now_ms):
        delay = int(cfg.get(FILE_DELETE_DELAY_MS))
        last_vacuum = vac.acquired_ms if vac is not None else -1
        rewrites = [r.released_ms for j in REWRITING_JOBS if (r := history.get(j)) is not None
                    and r.released_ms is not None and r.released_ms > last_vacuum]
        if rewrites and now_ms - max(rewrites) >= delay:
            out.append(DueJob(topic, "vacuum", "files removed by a maintenance run are past file.delete.delay.ms"))
        elif now_ms - last_vacuum >= config.vacuum_interval_ms:
            out.append(DueJob(topic, "vacuum", "orphan sweep interval"))
    return out


@dataclass
class RunResult:
    """One job run by the scheduler."""

    topic: str
    job: str
    reason: str
    exit_code: int | None  # None: skipped (someone else holds the lease)
    duration_s: float = 0.0
    summary: str = ""


def spark_submit_path(explicit: str | None = None) -> str:
    """``spark-submit`` next to this interpreter (the venv's PySpark), else on PATH."""
    if explicit:
        return explicit
    local = Path(sys.executable).parent / "spark-submit"
    if local.exists():
        return str(local)
    found = shutil.which("spark-submit")
    if not found:
        raise FileNotFoundError("spark-submit not found: install pyspark or pass --spark-submit")
    return found


def job_command(root: StorageRoot, topic: str, job: str, config: SchedulerConfig) -> list[str]:
    """The ``spark-submit`` command line of one job run."""
    script = script_path(job)
    cmd = [spark_submit_path(config.spark_submit)]
    if config.master:
        cmd += ["--master", config.master]
    cmd += [str(script), "--root", root.uri, "--topic", topic, "--json"]
    for k, v in config.storage_options.items():
        cmd += ["--storage-option", f"{k}={v}"]
    cmd += list(config.extra_job_args.get(job, ()))
    return cmd


def job_environment() -> dict[str, str]:
    """The subprocess environment: executors run this interpreter; Spark reads the project's conf/."""
    env = dict(os.environ)
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    env.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    conf = Path(__file__).resolve().parents[2] / "conf"
    if "SPARK_CONF_DIR" not in env and (conf / "spark-defaults.conf").is_file():
        env["SPARK_CONF_DIR"] = str(conf)
    return env


def run_due_job(root: StorageRoot, due: DueJob, config: SchedulerConfig) -> RunResult:
    """Run one due job under its lease; skipped if another scheduler holds the lease."""
    lease = JobLease(root, due.topic, due.job, ttl_ms=config.lease_ttl_ms)
    if not lease.acquire():
        log.info("skip %s on %s: another run holds the lease", due.job, due.topic)
        return RunResult(due.topic, due.job, due.reason, None)
    started = time.monotonic()
    stop = threading.Event()

    def keep_alive() -> None:
        while not stop.wait(config.lease_ttl_ms / 3000):
            try:
                lease.renew()
            except OSError as e:
                log.warning("renewing the lease of %s on %s: %s", due.job, due.topic, e)

    renewer = threading.Thread(target=keep_alive, name=f"lease-{due.topic}-{due.job}", daemon=True)
    renewer.start()
    cmd = job_command(root, due.topic, due.job, config)
    log.info("run %s on %s (%s): %s", due.job, due.topic, due.reason, " ".join(cmd))
    code, summary = None, ""
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=job_environment(), start_new_session=True)
        try:
            out, err = proc.communicate(timeout=config.job_timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            err += f"\nkilled after {config.job_timeout_s} s"
        code = proc.returncode
        summary = _summary(out, err, code)
    finally:
        stop.set()
        renewer.join(timeout=5)
        lease.release("ok" if code == 0 else "failed", summary)
    result = RunResult(due.topic, due.job, due.reason, code, time.monotonic() - started, summary)
    (log.info if code == 0 else log.error)("%s on %s exited %s after %.1f s: %s", due.job, due.topic, code,
                                          result.duration_s, summary)
    return result


def _summary(out: str, err: str, code: int | None) -> str:
    for line in reversed(out.strip().splitlines()):
        if line.startswith("{"):
            try:
                doc = json.loads(line)
            except ValueError:
                continue
            if doc.get("error"):
                return f"error: {doc['error']}"
            parts = []
            for t in doc.get("topics", []):
                parts.append(f"segments removed {t['segments_removed']}, written {t['segments_written']}, "
                             f"records {t['records_before']} -> {t['records_after']}, bytes {t['bytes_before']} -> "
                             f"{t['bytes_after']}" + (f", files deleted {t['files_deleted']}"
                                                      if doc.get("job") == "vacuum" else ""))
            return "; ".join(parts) or "nothing to do"
    tail = [line for line in err.strip().splitlines() if line.strip()][-3:]
    return f"exit {code}: " + " | ".join(tail)


def history_of(root: StorageRoot, topic: str) -> dict[str, LeaseRecord | None]:
    """The newest lease record of every job on ``topic``."""
    return {job: JobLease(root, topic, job).current() for job in JOB_ORDER}


def run_once(root: StorageRoot, config: SchedulerConfig = SchedulerConfig(), *, topics: Sequence[str] | None = None,
             dry_run: bool = False, now_ms: int | None = None,
             on_due: Callable[[DueJob], None] | None = None) -> list[RunResult]:
    """One scheduler tick: find and run (unless ``dry_run``) every due job, topic by topic."""
    from lakelog.maintenance.topic_selection import select_topics

    results = []
    for snap in select_topics(root, topics, policy=None, job="maintain"):
        now = now_ms if now_ms is not None else int(time.time() * 1000)
        for due in due_jobs(snap, now, history_of(root, snap.topic), config):
            if on_due is not None:
                on_due(due)
            if dry_run:
                results.append(RunResult(due.topic, due.job, due.reason, None))
            else:
                results.append(run_due_job(root, due, config))
    return results


def run_forever(root: StorageRoot, config: SchedulerConfig, *, interval_s: float, topics: Sequence[str] | None = None,
                stop: threading.Event | None = None) -> None:
    """Tick every ``interval_s`` until ``stop`` is set (SIGINT/SIGTERM in the CLI)."""
    stop = stop or threading.Event()
    while not stop.is_set():
        try:
            run_once(root, config, topics=topics)
        except Exception as e:  # a bad tick (store down, a topic deleted mid-way) must not end the scheduler
            log.exception("maintenance tick failed: %s", e)
        stop.wait(interval_s)
