"""The Kafka listener's produce and fetch rates with its hostile-input checks, against the code before them.

What the checks cost on the hot paths: every request frame walked against its schema before kio reads it
(``kafka_front/frame_check.py``), record batches decoded in windows from decompression on demand, the
connection's byte accounting, Fetch's limits applied as Kafka's ``readFromLog``.  Two fronts run side by
side on this machine, one from this checkout ("after") and one from a checkout of the code before the checks
("before": ``git archive`` of ``LAKELOG_BENCH_BEFORE_REF``, default :data:`BEFORE_REF`, into the scratch
directory), the same Python environment, each on a root of its own.  Each repeat runs every load against both,
in alternating order, so a noisy stretch of the machine hits both alike:

* **produce** -- the confluent-kafka producer of ``bench.kafka_produce`` (100-byte values, ``linger.ms`` 5,
  lz4, ``acks=all``, idempotent) into a fresh 8-partition topic, records/s from the first ``produce()`` to the
  end of ``flush()``;
* **fetch** -- a confluent-kafka consumer draining an 8-partition topic from offset 0 (``assign``, no group,
  ``fetch.queue.backoff.ms`` 10), records/s.

Reported: medians over the repeats, after/before, and the front's CPU per record.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import httpx

from bench import BenchContext, BenchResult, Goal, md_table, median
from bench.http_produce import FrontProcess, _free_port
from bench.kafka_produce import Cpu, confluent_drain, confluent_produce

TITLE = "Kafka listener: produce and fetch with the hostile-input checks, against the code before them"
REPO = Path(__file__).resolve().parent.parent
BEFORE_REF = "902ce4b"  # main before the checks (and the rest of the work that landed with them)
PARTITIONS = 8
GOAL_RATIO = 0.95


class _Front(FrontProcess):
    """``lakelog serve --kafka-listener`` from the checkout at ``repo``."""

    def __init__(self, repo: Path, root: Path, workdir: Path) -> None:
        self.bootstrap = f"127.0.0.1:{_free_port()}"
        super().__init__(str(root), workdir, args=("--kafka-listener", self.bootstrap), repo=repo)

    def topic(self) -> str:
        name = f"perf-{time.monotonic_ns():x}"
        r = httpx.post(f"{self.url}/v1/topics", json={"name": name, "partitions": PARTITIONS}, timeout=60)
        r.raise_for_status()
        return name


def _checkout_before(workdir: Path) -> Path:
    ref = os.environ.get("LAKELOG_BENCH_BEFORE_REF", BEFORE_REF)
    out = workdir / "before"
    out.mkdir()
    archive = subprocess.run(["git", "-C", str(REPO), "archive", ref], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(out)], input=archive, check=True)
    return out


def run(ctx: BenchContext) -> BenchResult:
    n_produce = ctx.size(1_000_000, 5_000)
    n_drain = ctx.size(2_000_000, 5_000)
    fronts = {"after": _Front(REPO, ctx.workdir / "root-after", ctx.workdir)}
    try:
        fronts["before"] = _Front(_checkout_before(ctx.workdir), ctx.workdir / "root-before", ctx.workdir)
        rates: dict[tuple[str, str], list[float]] = {(s, k): [] for s in fronts for k in ("produce", "fetch")}
        cpu: dict[tuple[str, str], list[float]] = {key: [] for key in rates}
        drain_topics = {}
        for side, front in fronts.items():
            ctx.progress(f"{side}: filling the fetch topic with {n_drain:,} records")
            drain_topics[side] = front.topic()
            confluent_produce(front.bootstrap, drain_topics[side], n_drain)
        for i in range(ctx.repeats):
            ctx.progress(f"repeat {i + 1}/{ctx.repeats}")
            for side in (("after", "before") if i % 2 == 0 else ("before", "after")):
                front = fronts[side]
                loads = {"produce": (n_produce, lambda: confluent_produce(front.bootstrap, front.topic(),
                                                                          n_produce)[0]),
                         "fetch": (n_drain, lambda: confluent_drain(front.bootstrap, drain_topics[side], PARTITIONS,
                                                                    n_drain, **{"fetch.queue.backoff.ms": 10}))}
                for kind, (records, load) in loads.items():
                    with Cpu(front.proc.pid) as used:
                        rates[(side, kind)].append(load())
                    cpu[(side, kind)].append(used.server / records * 1e6)
    finally:
        for front in fronts.values():
            front.close()
    m = {key: median(v) for key, v in rates.items()}
    c = {key: median(v) for key, v in cpu.items()}
    ratio = {k: m[("after", k)] / m[("before", k)] for k in ("produce", "fetch")}
    rows = [[name, f"{m[('before', k)]:,.0f}", f"{m[('after', k)]:,.0f}", f"{ratio[k]:.2f}x",
             f"{c[('before', k)]:.2f}", f"{c[('after', k)]:.2f}"]
            for name, k in (("confluent-kafka produce (lz4, linger.ms 5, acks=all, idempotent)", "produce"),
                            ("confluent-kafka fetch (drain from offset 0)", "fetch"))]
    table = md_table(["load", "before (records/s)", "after (records/s)", "after / before",
                     "front CPU-µs per record, before", "after"], rows)
    spread = "; ".join(f"{side} {kind}: " + ", ".join(f"{v:,.0f}" for v in rates[(side, kind)])
                       for side in fronts for kind in ("produce", "fetch"))
    markdown = "\n".join([
        f"`python -m bench.run kafka_checks` ({ctx.repeats} interleaved repeats, medians; before = "
        f"`{os.environ.get('LAKELOG_BENCH_BEFORE_REF', BEFORE_REF)}`, {n_produce:,} records produced and "
        f"{n_drain:,} fetched per run)", "", table, "", f"Every run: {spread}."])
    goals = [Goal(f"{k} rate >= {GOAL_RATIO}x the code before the checks", ratio[k] >= GOAL_RATIO,
                  f"{ratio[k]:.2f}x ({m[('after', k)]:,.0f} against {m[('before', k)]:,.0f} records/s)")
             for k in ("produce", "fetch")]
    return BenchResult(markdown=markdown, summary=[f"{r[0]}: {r[1]} -> {r[2]} records/s ({r[3]})" for r in rows],
                       metrics={f"{k}_ratio": v for k, v in ratio.items()}, goals=goals)
