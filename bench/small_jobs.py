"""Maintenance jobs on a small topic, as a user runs them: ``lakelog job NAME`` from the command line.

A compacted topic of one partition with three small segments (six records, two of them superseded) -- what a
user has after a quick start. Each of the four jobs runs as a subprocess of the installed console script, the
interpreter's start and every import included, on a fresh copy of the root, the jobs taking turns in each
round; the figure is the median wall time. The goal is the one a user notices: merging a few segments takes
no longer than compacting them (both run on the driver when the work is small, without starting Spark).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

from bench import BenchContext, BenchResult, Goal, md_table, median

TITLE = "Maintenance jobs on a small topic: `lakelog job` from the command line"
JOBS = ("retention", "compaction", "merge", "vacuum")
GOAL_MERGE_RATIO = 1.0  # merge's median time over compaction's


def _template(path: Path) -> None:
    from lakelog import Log

    log = Log(str(path))
    log.create_topic("small", 1, {"cleanup.policy": "compact,delete", "min.cleanable.dirty.ratio": "0.01"})
    for i in range(3):  # one commit, one segment each
        log.append("small", [{"key": "k0", "value": f"v{i}"}, {"key": f"k{i + 1}", "value": "v"}])
    log.close()


def _run_job(job: str, root: Path) -> tuple[float, dict]:
    script = Path(sys.executable).parent / "lakelog"
    started = time.monotonic()
    proc = subprocess.run([str(script), "job", job, "--root", str(root), "--topic", "small", "--json"],
                          capture_output=True, text=True, timeout=900)
    elapsed = time.monotonic() - started
    if proc.returncode != 0:
        raise RuntimeError(f"lakelog job {job} exited {proc.returncode}: {proc.stderr[-2000:]}")
    return elapsed, json.loads(proc.stdout)


def run(ctx: BenchContext) -> BenchResult:
    template = ctx.workdir / "template"
    _template(template)
    rounds = 1 if ctx.quick else max(ctx.repeats, 3)
    times: dict[str, list[float]] = {job: [] for job in JOBS}
    effect: dict[str, str] = {}
    for r in range(rounds):
        order = JOBS[r % len(JOBS):] + JOBS[:r % len(JOBS)]  # each job takes each turn
        for job in order:
            root = ctx.workdir / f"round{r}-{job}"
            shutil.copytree(template, root)
            ctx.progress(f"round {r + 1}/{rounds}: lakelog job {job}")
            elapsed, report = _run_job(job, root)
            times[job].append(elapsed)
            topic = report["topics"][0] if report["topics"] else {}
            effect[job] = (f"segments {topic.get('segments_removed', 0)} -> {topic.get('segments_written', 0)}, "
                           f"records {topic.get('records_before', 0)} -> {topic.get('records_after', 0)}"
                           + (", on Spark" if report.get("spark_master") else ""))
            shutil.rmtree(root, ignore_errors=True)
    med = {job: median(ts) for job, ts in times.items()}
    # the goal's ratio: merge over compaction within each round (they ran minutes apart at most), then the median
    ratio = median([m / c for m, c in zip(times["merge"], times["compaction"])])
    rows = [[job, f"{med[job]:.2f}", " / ".join(f"{t:.2f}" for t in times[job]),
             f"{med[job] / med['compaction']:.2f}x", effect[job]] for job in JOBS]
    markdown = "\n\n".join([
        md_table(["job", "seconds (median)", "runs, s", "vs compaction", "what it did"], rows),
        f"One partition, three segments of two records; each job on a fresh copy of the root, {rounds} "
        f"round(s) with the jobs taking turns; wall time of `lakelog job NAME --root ROOT --topic small "
        f"--json`, the interpreter's start included. The goal's ratio is the median of each round's merge time "
        f"over its compaction time: {ratio:.2f}x.",
    ])
    goals = [Goal(f"merge of a few segments <= {GOAL_MERGE_RATIO:.1f}x compaction's time", ratio <= GOAL_MERGE_RATIO,
                  f"{ratio:.2f}x ({med['merge']:.2f} s vs {med['compaction']:.2f} s)")]
    summary = [f"{job}: {med[job]:.2f} s ({effect[job]})" for job in JOBS]
    return BenchResult(markdown=markdown, summary=summary, goals=goals,
                       metrics={f"{job}_s": med[job] for job in JOBS})
