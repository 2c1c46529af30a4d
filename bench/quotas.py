"""Client quotas: an unlimited producer's rate beside one held at its quota (KIP-13: a tenant at its quota never
slows another).

One ``lakelog serve --kafka-listener``; confluent-kafka producers in processes of their own (no shared GIL),
10 KB records, ``acks=all``, with different client ids: ``slow`` has a ``producer_byte_rate`` quota of 100 KB/s,
is offered five times that (paced, so its own process leaves the CPUs to the front) and starts 6 s early, so its
first quota windows' allowance is spent before the measured window, as after any busy spell; ``fast`` has no
quota.  Each repeat runs ``fast`` alone, then both, for the same window; ``fast``'s acknowledged bytes/s beside
``slow`` over its rate alone is the ratio (medians of interleaved repeats).  The throttle and mute are per
connection, so what ``slow`` still costs ``fast`` is the CPU its throttled requests take on a 2-core machine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

from bench import BenchContext, BenchResult, Goal, md_table, median
from bench.http_produce import FrontProcess, _create_topic, _free_port

TITLE = "Client quotas: an unlimited producer beside one at its quota"
QUOTA = 100_000.0  # bytes/s
OFFERED = 5 * QUOTA
LEAD_S = 6.0
GOAL_RATIO = 0.8
RECORD_BYTES = 10_000  # bench/_quota_producer.py's record size
REPO = Path(__file__).resolve().parent.parent


def _alter_quota(bootstrap: str, client_id: str, rate: float) -> None:
    """The client id's producer byte rate, set with Kafka's own ``kafka-configs`` (the reference artifacts)."""
    from reference.kafka import run_tool

    run_tool("kafka-configs", "--bootstrap-server", bootstrap, "--alter", "--entity-type", "clients",
             "--entity-name", client_id, "--add-config", f"producer_byte_rate={rate:.0f}")


def _produce(bootstrap: str, topic: str, clients: list[str], seconds: float, offered: dict[str, float],
             lead: dict[str, float]) -> dict[str, dict]:
    """Each client's producer in its own process, all ending together after ``seconds`` (plus a client's lead);
    each one's report, its times counted from the common start."""
    start = time.time() + 5.0  # after every child has connected
    procs = {c: subprocess.Popen([sys.executable, "-m", "bench._quota_producer", json.dumps({
        "bootstrap": bootstrap, "topic": topic, "client_id": c, "seconds": seconds + lead.get(c, 0.0),
        "start": start - lead.get(c, 0.0), "offered": offered.get(c)})],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=str(REPO), env={**os.environ, "PYTHONPATH": str(REPO)})
        for c in clients}
    out = {}
    for c, p in procs.items():
        stdout, _ = p.communicate(timeout=300)
        report = json.loads(stdout.decode().strip().splitlines()[-1])
        shift = lead.get(c, 0.0)
        out[c] = {k: [t - shift for t in v] for k, v in report.items()}
    return out


def _rate(report: dict, seconds: float) -> float:
    """Acknowledged bytes per second over the common window [0, seconds)."""
    return sum(1 for t in report["acks"] if 0 <= t < seconds) * RECORD_BYTES / seconds


def run(ctx: BenchContext) -> BenchResult:
    seconds, lead = (2.0, 1.0) if ctx.quick else (10.0, LEAD_S)
    repeats = 1 if ctx.quick else ctx.repeats
    bootstrap = f"127.0.0.1:{_free_port()}"
    front = FrontProcess(str(ctx.workdir / "root"), ctx.workdir, args=("--kafka-listener", bootstrap))
    alone, beside, held, fast_throttled, slow_throttled = [], [], [], 0, 0
    try:
        topic = _create_topic(front.url)
        slow, fast = f"slow-{uuid.uuid4().hex[:6]}", f"fast-{uuid.uuid4().hex[:6]}"
        _alter_quota(bootstrap, slow, QUOTA)
        for i in range(repeats):
            ctx.progress(f"repeat {i + 1}/{repeats}")
            solo = _produce(bootstrap, topic, [fast], seconds, {}, {})[fast]
            both = _produce(bootstrap, topic, [fast, slow], seconds, {slow: OFFERED}, {slow: lead})
            fast_throttled += len(solo["throttles"]) + len(both[fast]["throttles"])
            slow_throttled += sum(1 for t in both[slow]["throttles"] if 0 <= t < seconds)
            alone.append(_rate(solo, seconds))
            beside.append(_rate(both[fast], seconds))
            held.append(_rate(both[slow], seconds))
    finally:
        front.close()
    ratio = median(beside) / median(alone) if median(alone) else float("nan")  # nan: nothing acknowledged alone
    rows = [["fast, alone", f"{median(alone):,.0f}", "none", 0],
            ["fast, beside slow", f"{median(beside):,.0f}", "none", fast_throttled],
            ["slow, beside fast", f"{median(held):,.0f}", f"{QUOTA:,.0f}", slow_throttled]]
    markdown = "\n\n".join([
        f"{seconds:.0f} s windows, {repeats} interleaved repeats, medians; `slow` offered {OFFERED:,.0f} B/s.",
        md_table(["producer", "acknowledged B/s", "quota B/s", "throttled answers"], rows),
        f"`fast` beside `slow`: **{ratio:.2f}x** its rate alone."])
    return BenchResult(
        markdown=markdown,
        summary=[f"fast beside slow {ratio:.2f}x alone; slow held at {median(held):,.0f} B/s (quota {QUOTA:,.0f})"],
        metrics={"ratio": ratio, "slow_rate": median(held), "fast_alone": median(alone)},
        goals=[Goal("an unlimited producer keeps its rate beside one at its quota", ratio >= GOAL_RATIO and
                    fast_throttled == 0, f"{ratio:.2f}x (goal >= {GOAL_RATIO}), {fast_throttled} throttled answers"),
               Goal("the producer at its quota is held near it", median(held) < 2 * QUOTA,
                    f"{median(held):,.0f} B/s against {QUOTA:,.0f}")])
