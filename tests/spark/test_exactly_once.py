"""A streaming query killed with SIGKILL mid-run and restarted from its checkpoint delivers every record once.

The query reads through the JVM source (LakelogMicroBatchStream); the job prints which source read.

The query runs in its own process (its own SparkSession, started outside the repository with no
registration call, so it also proves PySpark finds the installed ``pyspark_lakelog``) while a producer keeps
appending.  The Parquet sink is read back through Spark, which honours the sink's commit log.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from lakelog import Log
from lakelog.storage.storage_root import StorageRoot

from spark_support import SPARK_ENV, produce

JOB = Path(__file__).with_name("stream_job.py")


class StreamJob:
    def __init__(self, tmp: Path, root: str) -> None:
        self.tmp, self.root = tmp, root
        self.checkpoint, self.sink, self.stop_file = tmp / "ck", tmp / "sink", tmp / "stop"
        self.proc: subprocess.Popen | None = None
        self.runs = 0

    def start(self) -> None:
        self.runs += 1
        out = open(self.tmp / f"job-{self.runs}.log", "wb")
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        self.proc = subprocess.Popen([sys.executable, str(JOB), self.root, str(self.checkpoint), str(self.sink),
                                      str(self.stop_file)], cwd=self.tmp, env={**env, **SPARK_ENV},
                                     stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        out.close()

    def log(self, run: int | None = None) -> str:
        """The end of the current run's output, or all of run ``run``'s."""
        text = (self.tmp / f"job-{run or self.runs}.log").read_text(errors="replace")
        return text if run else text[-3000:]

    def committed_batches(self) -> int:
        meta = self.sink / "_spark_metadata"
        return len([p for p in meta.iterdir() if p.name.isdigit()]) if meta.exists() else 0

    def kill(self) -> None:
        os.killpg(self.proc.pid, signal.SIGKILL)  # the job and its JVM: no chance to clean up
        self.proc.wait(30)

    def stop(self) -> None:
        self.stop_file.touch()
        try:
            self.proc.wait(180)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            raise


def wait_until(predicate, what: str, job: StreamJob, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert job.proc.poll() is None, f"the job exited while waiting for {what}:\n{job.log()}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}:\n{job.log()}"
        time.sleep(0.5)


@pytest.mark.slow
def test_killed_and_restarted_query_delivers_every_record_once(spark, tmp_path):
    root = str(tmp_path / "root")
    log = Log(StorageRoot.resolve(root))
    log.create_topic("orders", 2)
    for p in range(2):
        produce(log, "orders", p, 300)
    stop = threading.Event()
    errors: list[BaseException] = []

    def producer():
        i = 0
        try:
            while not stop.is_set():
                produce(log, "orders", i % 2, 10, prefix=f"p{i}-")
                i += 1
                time.sleep(0.25)
        except BaseException as e:  # surfaced by the assertion below
            errors.append(e)

    thread = threading.Thread(target=producer, daemon=True)
    thread.start()
    job = StreamJob(tmp_path, root)
    try:
        job.start()
        wait_until(lambda: job.committed_batches() >= 2, "two committed micro-batches", job)
        job.kill()
        killed_at = job.committed_batches()
        job.start()
        wait_until(lambda: job.committed_batches() > killed_at, "a batch after the restart", job)
        stop.set()
        thread.join(60)
        assert not errors, errors
        hw = {p: log.describe_topic("orders").partitions[p].high_watermark for p in range(2)}
        wait_until(lambda: spark.read.parquet(str(job.sink)).count() >= sum(hw.values()), "the sink to catch up", job)
        job.stop()
    finally:
        stop.set()
        if job.proc is not None and job.proc.poll() is None:
            os.killpg(job.proc.pid, signal.SIGKILL)
    rows = spark.read.parquet(str(job.sink)).select("partition", "offset").collect()
    got = sorted((r.partition, r.offset) for r in rows)
    assert got == [(p, o) for p in range(2) for o in range(hw[p])]  # every offset once: no loss, no duplicate
    assert job.runs == 2 and "started" in job.log()
    for run in (1, 2):  # both runs read through the JVM source, not the Python one it can fall back to
        assert "source: LakelogMicroBatchStream[subscribe=orders" in job.log(run), job.log(run)


def test_pyspark_lookup_finds_the_installed_module(tmp_path):
    """PySpark's lookup (every ``pyspark_*`` module on sys.path with a DefaultSource) sees lakelog from any cwd."""
    code = ("from pkgutil import iter_modules; from importlib import import_module\n"
            "from pyspark.sql.datasource import DataSource\n"
            "found = {m.name: import_module(m.name) for m in iter_modules() if m.name.startswith('pyspark_')}\n"
            "src = found['pyspark_lakelog'].DefaultSource\n"
            "assert issubclass(src, DataSource) and src.name() == 'lakelog'\n"
            "print(src.__module__, src.name())\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["pyspark_lakelog", "lakelog"]
