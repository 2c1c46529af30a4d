"""``bench/kafka_produce.py`` runs end to end in quick mode (numbers are judged by ``make bench``, not here)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_kafka_bench_quick_run(tmp_path):
    out = tmp_path / "BENCHMARKS.md"
    proc = subprocess.run([sys.executable, "-m", "bench.run", "kafka_produce", "--quick", "--scale", "0.5",
                           "--details", str(out), "--workdir", str(tmp_path)], cwd=REPO, capture_output=True,
                          text=True, timeout=600, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    body = re.search(r"<!-- bench:kafka_produce -->(.*?)<!-- /bench:kafka_produce -->", out.read_text(), re.S)
    assert body, out.read_text()
    assert re.search(r"\| confluent-kafka producer .*\| [\d,]+ \| [\d.]+x \|", body.group(1))
    assert re.search(r"record batch decode \(with CRC check\) \| [\d,]+ records/s", body.group(1))
    p99 = (r"p99 ack latency at half the confluent-kafka rate \([\d,]+ records/s, the paced producer keeping "
           r"[\d,]+ records/s with its flush\): \*\*\d+\.\d ms\*\* with the front's default `linger.ms` 5; "
           r"\d+\.\d ms against a front started with `--linger-ms 1` \(kept [\d,]+ records/s\)")
    assert re.search(p99, body.group(1)), body.group(1)


def test_transactions_bench_quick_run(tmp_path):
    out = tmp_path / "BENCHMARKS.md"
    proc = subprocess.run([sys.executable, "-m", "bench.run", "transactions", "--quick", "--scale", "0.5",
                           "--details", str(out), "--workdir", str(tmp_path)], cwd=REPO, capture_output=True,
                          text=True, timeout=600, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stdout + proc.stderr  # unmet goals are findings (bench.run returns 0)
    body = re.search(r"<!-- bench:transactions -->(.*?)<!-- /bench:transactions -->", out.read_text(), re.S)
    assert body, out.read_text()
    assert re.search(r"\| transactional producer, 100 ms transactions .*\| [\d,]+ \| [\d.]+x \|", body.group(1))
    assert re.search(r"\| Spark scan, kafka.isolation.level=read_committed \| [\d,]+ \| [\d.]+x \|", body.group(1))
    assert re.search(r"\| transactional \| [\d.]+ \| [\d.]+ \|", body.group(1))  # CPU-µs per record


def test_quotas_bench_quick_run(tmp_path):
    """bench/quotas.py runs end to end: a row per producer with its acknowledged rate (one short window)."""
    out = tmp_path / "BENCHMARKS.md"
    proc = subprocess.run([sys.executable, "-m", "bench.run", "quotas", "--quick", "--output", str(out),
                           "--workdir", str(tmp_path)], cwd=REPO, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stdout + proc.stderr  # unmet goals are findings (bench.run returns 0)
    body = re.search(r"<!-- bench:quotas -->(.*?)<!-- /bench:quotas -->", out.read_text(), re.S)
    assert body, out.read_text()
    assert re.search(r"\| fast, beside slow \| [\d,]+ \| none \| 0 \|", body.group(1)), body.group(1)
    assert re.search(r"\| slow, beside fast \| [\d,]+ \| 100,000 \| \d+ \|", body.group(1)), body.group(1)


def test_kafka_checks_bench_quick_run(tmp_path):
    """bench/kafka_checks.py: both fronts (this checkout and the code before the checks, from git) answer, and
    the section has both rows with a ratio."""
    out = tmp_path / "BENCHMARKS.md"
    proc = subprocess.run([sys.executable, "-m", "bench.run", "kafka_checks", "--quick", "--scale", "0.5",
                           "--output", str(out), "--workdir", str(tmp_path)], cwd=REPO, capture_output=True,
                          text=True, timeout=600, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    body = re.search(r"<!-- bench:kafka_checks -->(.*?)<!-- /bench:kafka_checks -->", out.read_text(), re.S)
    assert body, out.read_text()
    for load in ("confluent-kafka produce", "confluent-kafka fetch"):
        assert re.search(rf"\| {load} .*\| [\d,]+ \| [\d,]+ \| [\d.]+x \|", body.group(1)), body.group(1)
