"""HTTP and Kafka produce of this checkout against another version's, side by side in one run.

A change that must leave speed alone (a refactor) is checked here against the version before it: two fronts
(``lakelog serve --kafka-listener``, each on a local root of its own), one running this checkout's code and one
running the other version's (``LAKELOG_BENCH_REF``, a git ref, ``main`` by default, exported with ``git archive``
into the scratch directory; or ``LAKELOG_BENCH_BEFORE``, a checkout used as it is), both on this interpreter and
its packages. Every repeat runs, on a fresh 8-partition topic each time, and with the two fronts' order
alternating from repeat to repeat (after one unmeasured warm-up of each):

* **HTTP JSON produce** -- :mod:`bench.http_produce`'s load: 8 closed-loop clients, 1,000 records a request;
* **Kafka produce** -- :mod:`bench.kafka_produce`'s confluent-kafka producer: 100-byte values, null keys,
  ``linger.ms=5``, lz4, ``acks=all``, idempotent.

Reported per load: each version's median records/s and records per CPU-second of its front, and the ratios of
this checkout to the other (the median of the per-repeat ratios, with their range as the noise).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from bench import BenchContext, BenchResult, Goal, md_table, median
from bench.http_produce import JSON_RECORDS, REPO, FrontProcess, _create_topic, _free_port, http_load, json_body
from bench.kafka_produce import Cpu, confluent_produce

TITLE = "Produce, this checkout against another version (HTTP and Kafka), side by side"
NOISE = 0.10  # "within noise": the median ratio of rates within 10% of 1 on this shared machine


def other_version(workdir: Path) -> tuple[Path, str]:
    """The checkout to compare against, and how to name it."""
    given = os.environ.get("LAKELOG_BENCH_BEFORE")
    if given:
        return Path(given).resolve(), given
    ref = os.environ.get("LAKELOG_BENCH_REF", "main")
    out = workdir / "before"
    out.mkdir()
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", ref], check=True, capture_output=True,
                            text=True).stdout.strip()
    archive = subprocess.Popen(["git", "-C", str(REPO), "archive", "--format=tar", ref], stdout=subprocess.PIPE)
    subprocess.run(["tar", "-x", "-C", str(out)], stdin=archive.stdout, check=True)
    if archive.wait() != 0:
        raise RuntimeError(f"git archive {ref} failed")
    return out, f"{ref} ({commit})"


def run(ctx: BenchContext) -> BenchResult:
    http_requests = ctx.size(40, 2)  # per client: 320,000 records a run
    kafka_records = ctx.size(1_000_000, 5_000)
    repeats = ctx.repeats if ctx.quick else max(ctx.repeats, 5)
    before_repo, before_name = other_version(ctx.workdir)
    fronts = {}
    for name, repo in (("before", before_repo), ("after", REPO)):
        bootstrap = f"127.0.0.1:{_free_port()}"
        front = FrontProcess(str(ctx.workdir / f"root-{name}"), ctx.workdir, args=("--kafka-listener", bootstrap),
                             repo=repo)
        fronts[name] = (front, bootstrap)
    rates = {(load, name): [] for load in ("http", "kafka") for name in fronts}
    per_cpu = {key: [] for key in rates}
    body = json_body(JSON_RECORDS)
    try:
        for name, (front, bootstrap) in fronts.items():  # warm: imports done, code paths taken once, unmeasured
            ctx.progress(f"warming up {name}")
            http_load(f"{front.url}/v1/topics/{_create_topic(front.url)}/records", body, "application/json",
                      JSON_RECORDS, 2)
            confluent_produce(bootstrap, _create_topic(front.url), ctx.size(50_000, 1_000), warm_up=True)
        for i in range(repeats):
            order = ["before", "after"] if i % 2 == 0 else ["after", "before"]
            ctx.progress(f"repeat {i + 1}/{repeats}: {' then '.join(order)}")
            for load in ("http", "kafka"):
                for name in order:
                    front, bootstrap = fronts[name]
                    topic = _create_topic(front.url)
                    with Cpu(front.proc.pid) as cpu:
                        if load == "http":
                            records = http_requests * 8 * JSON_RECORDS
                            rate = http_load(f"{front.url}/v1/topics/{topic}/records", body, "application/json",
                                             JSON_RECORDS, http_requests).records_per_s
                        else:
                            records = kafka_records
                            rate = confluent_produce(bootstrap, topic, kafka_records, warm_up=True)[0]
                    rates[(load, name)].append(rate)
                    per_cpu[(load, name)].append(records / max(cpu.server, 1e-9))
    finally:
        for front, _ in fronts.values():
            front.close()
    return _report(rates, per_cpu, before_name, repeats)


def _report(rates: dict, per_cpu: dict, before_name: str, repeats: int) -> BenchResult:
    rows, summary, goals, metrics = [], [], [], {}
    for load, label in (("http", "HTTP JSON produce (8 clients, 1,000 records a request)"),
                        ("kafka", "Kafka produce (confluent-kafka, lz4, idempotent)")):
        before, after = rates[(load, "before")], rates[(load, "after")]
        ratios = sorted(a / b for a, b in zip(after, before))
        cpu_ratios = sorted(a / b for a, b in zip(per_cpu[(load, "after")], per_cpu[(load, "before")]))
        ratio = median(ratios)
        rows.append([label, f"{median(before):,.0f}", f"{median(after):,.0f}",
                     f"{ratio:.3f} ({ratios[0]:.2f}-{ratios[-1]:.2f})",
                     f"{median(per_cpu[(load, 'before')]):,.0f}", f"{median(per_cpu[(load, 'after')]):,.0f}",
                     f"{median(cpu_ratios):.3f} ({cpu_ratios[0]:.2f}-{cpu_ratios[-1]:.2f})"])
        summary.append(f"{load}: {median(before):,.0f} -> {median(after):,.0f} records/s (x{ratio:.3f}), "
                       f"per front CPU-s x{median(cpu_ratios):.3f}")
        goals.append(Goal(f"{load} produce within noise of {before_name}", abs(ratio - 1) <= NOISE,
                          f"median ratio {ratio:.3f} of {repeats} interleaved runs (range {ratios[0]:.2f}-"
                          f"{ratios[-1]:.2f})"))
        metrics[load] = {"before": before, "after": after, "ratios": ratios, "cpu_ratios": cpu_ratios}
    table = md_table(["load", "before, records/s", "after, records/s", "after / before (range)",
                      "before, records per front CPU-s", "after, records per front CPU-s",
                      "after / before (range)"], rows)
    text = (f"What: HTTP JSON produce and Kafka produce of two fronts on one machine, one running this checkout "
            f"(after), the other {before_name} (before). How to run: `python -m bench.run produce_vs_ref` "
            f"(`LAKELOG_BENCH_REF=<git ref>`, default `main`; or `LAKELOG_BENCH_BEFORE=<checkout>`). Medians of "
            f"{repeats} runs each, the two fronts taking turns in every repeat (order alternating); a ratio's range "
            f"is that of the per-repeat ratios.\n\n{table}")
    return BenchResult(text, summary=summary, metrics=metrics, goals=goals)
