"""The benchmark harness and the storage benchmarks (append, seek) run end to end in quick mode with
tiny sizes, so bench code cannot rot.  Other benchmarks bring their own smoke tests.

Numbers are not asserted against goals here: performance is judged by ``make bench``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_quick_run_produces_numbers_and_sections(tmp_path):
    out = tmp_path / "BENCHMARKS.md"
    out.write_text("# notes kept\n\nhand-written findings\n")
    proc = subprocess.run(
        [sys.executable, "-m", "bench.run", "append", "seek", "--quick", "--scale", "0.2", "--output", str(out),
         "--workdir", str(tmp_path)],
        cwd=REPO, capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(r"lakelog +[\d,]+ rec/s", proc.stdout), proc.stdout
    assert re.search(r"lakelog warm p50 [\d.]+ ms", proc.stdout), proc.stdout
    text = out.read_text()
    assert text.startswith("# notes kept\n\nhand-written findings\n")
    for name in ("append", "seek"):
        body = re.search(rf"<!-- bench:{name} -->(.*?)<!-- /bench:{name} -->", text, re.S)
        assert body, f"no {name} section in\n{text}"
        assert re.search(r"\| [\d,]+ \| [\d,]+ \|", body.group(1)) or re.search(r"\| \d+\.\d{3} \|", body.group(1))
    assert "deltalake" in text and "CPUs" in text  # the environment line
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("lakelog-bench-")], "scratch dirs left behind"


def test_rerunning_one_benchmark_replaces_only_its_section():
    from bench.run import replace_section

    text = "intro\n\n<!-- bench:append -->\nold append\n<!-- /bench:append -->\n\nmiddle\n\n" \
           "<!-- bench:seek -->\nold seek\n<!-- /bench:seek -->\n"
    new = replace_section(text, "seek", "<!-- bench:seek -->\nnew seek\n<!-- /bench:seek -->")
    assert "old append" in new and "middle" in new and "new seek" in new and "old seek" not in new
    added = replace_section(new, "later", "<!-- bench:later -->\nx\n<!-- /bench:later -->")
    assert added.startswith(new.rstrip("\n")) and added.endswith("<!-- /bench:later -->\n")


def test_arrow_validation_and_s3_produce_run_end_to_end(tmp_path):
    """The validation-cost benchmark, and produce over the S3 latency proxy (its request counts included)."""
    out = tmp_path / "BENCHMARKS.md"
    proc = subprocess.run(
        [sys.executable, "-m", "bench.run", "arrow_validation", "s3_produce", "--quick", "--scale", "0.2",
         "--output", str(out), "--workdir", str(tmp_path)],
        cwd=REPO, capture_output=True, text=True, timeout=600, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    text = out.read_text()
    validation = re.search(r"<!-- bench:arrow_validation -->(.*?)<!-- /bench:arrow_validation -->", text, re.S)
    assert validation and re.search(r"\| plain \| [\d,]+ \| \d+\.\d{3} \|", validation.group(1))
    s3 = re.search(r"<!-- bench:s3_produce -->(.*?)<!-- /bench:s3_produce -->", text, re.S)
    assert s3, text
    for root in ("local", "moto", "s3-express", "s3-standard"):
        for body in ("JSON", "ARROW", "KAFKA"):  # the maximum rate, then the paced run's rate, p50 and p99
            assert re.search(rf"\| {root} \| {body} \| [\d,]+ \| \d+\.\d \| [\d,]+ \| \d+\.\d \| \d+\.\d \|",
                             s3.group(1)), (root, body, s3.group(1))
    for root in ("moto", "s3-express", "s3-standard"):  # librdkafka again with the settings advised on object stores
        assert re.search(rf"\| {root} \| KAFKA, S3 settings \| [\d,]+ \| \d+\.\d \| [\d,]+ \| \d+\.\d \| \d+\.\d \|"
                         rf" PUT \d+", s3.group(1)), (root, s3.group(1))
    assert re.search(r"\| s3-standard \| JSON \|.*PUT \d+", s3.group(1)), "the proxy counted no PUTs"
    # where the half-rate runs' group commits spent their time, from the front's stage histogram
    for body in ("JSON", "ARROW"):
        assert re.search(rf"\| local \| {body} \| \d+\.\d \| - \| - \| - \| \d+\.\d \|", s3.group(1)), body
        for root in ("moto", "s3-express", "s3-standard"):
            assert re.search(rf"\| {root} \| {body} \|( \d+\.\d \|){{5}}", s3.group(1)), (root, body, s3.group(1))
            # the floor under the half-rate run, from the PUT times the proxy measured in it (no hedging, hedged,
            # every commit PUT sent twice), and the PUTs per request of each
            pair, puts = r"\d+\.\d / \d+\.\d", r"\d+\.\d\d / \d+\.\d\d / \d+\.\d\d"
            assert re.search(rf"\| {root} \| {body} \|( {pair} \|){{5}} {puts} \|", s3.group(1)), (
                root, body, s3.group(1))


def bench_section(tmp_path, name: str, timeout: int) -> str:
    """Run one benchmark in quick mode into a scratch BENCHMARKS.md; its section's text."""
    out = tmp_path / "BENCHMARKS.md"
    proc = subprocess.run(
        [sys.executable, "-m", "bench.run", name, "--quick", "--output", str(out), "--workdir", str(tmp_path)],
        cwd=REPO, capture_output=True, text=True, timeout=timeout, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    section = re.search(rf"<!-- bench:{name} -->(.*?)<!-- /bench:{name} -->", out.read_text(), re.S)
    assert section, out.read_text()
    return section.group(1)


def test_s3_consume_runs_end_to_end(tmp_path):
    """A sequential consumer over the S3 latency proxy: every root reports a rate and the GETs it made."""
    section = bench_section(tmp_path, "s3_consume", 600)
    for root in ("local", "moto", "s3-express", "s3-standard"):
        for reader in ("Consumer", "HTTP fetch"):
            assert re.search(rf"\| {root} \| {reader} \| [\d,]+ \| [\d,]+ \| \d+\.\d \|", section), section
    assert re.search(r"\| s3-standard \| Consumer \|.*\| \d+% \| \d+ \|", section), "no share or GET count"


def test_s3_jobs_runs_end_to_end(tmp_path):
    """The Spark scan, retention and compaction over the S3 latency proxy, each with its request counts."""
    section = bench_section(tmp_path, "s3_jobs", 900)
    for root in ("local", "moto", "s3-express", "s3-standard"):
        for op in ("Spark scan", "retention", "compaction"):
            assert re.search(rf"\| {root} \| {op} \| \d+\.\d\d \| [\d,]+ \| \d+\.\d \|", section), (root, op, section)
    assert re.search(r"\| s3-standard \| Spark scan \|.*GET \d+.*\| \$\d+\.\d{3} \|", section), "no GETs or cost"


def test_s3_fronts_runs_end_to_end(tmp_path):
    """One front, then two, on an S3 root behind the latency proxy, under each load: both rows and the ratio."""
    section = bench_section(tmp_path, "s3_fronts", 600)
    for name in ("latency-bound, 1 KB records", "latency-bound, 100 B records", "defaults, 100 B records"):
        load = re.escape(name)
        # the steady state's records/s, MB/s and ratio, then the whole run's records/s and ratio
        assert re.search(rf"\| {load} \| 1 front \| [\d,]+ \| \d+\.\d \| 1\.00x \| [\d,]+ \| 1\.00x \|",
                         section), section
        assert re.search(rf"\| {load} \| 2 fronts \| [\d,]+ \| \d+\.\d \| \d+\.\d\dx \| [\d,]+ \| \d+\.\d\dx \|",
                         section), section
        # Little's law's factors, from the fronts' own Produce latency: in flight, records per request, latency
        assert re.search(rf"\| {load} \| 1 front \| \d+\.\d\d \| [\d,]+ \| \d+ \| - \|", section), section
        assert re.search(rf"\| {load} \| 2 fronts \| \d+\.\d\d \| [\d,]+ \| \d+ \(\d+ / \d+\) \| "
                         rf"\d+\.\d\d x \d+\.\d\d x \d+\.\d\d \|", section), section
        # each front's stage means: queue, upload, commit wait, then its own commit PUT or the handoff (a front
        # may have done both if partition 0's lease moved during the run)
        assert re.search(rf"\| {load} \| one front \|( \d+\.\d \|){{4}} - \|", section), section
        assert re.search(rf"\| {load} \| committer front \|( \d+\.\d \|){{4}} (-|\d+\.\d) \|", section), section
        assert re.search(rf"\| {load} \| other front \|( \d+\.\d \|){{3}} (-|\d+\.\d) \| \d+\.\d \|", section), section
