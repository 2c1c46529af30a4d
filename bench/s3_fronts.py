"""Two fronts against one on a shared S3 root, S3 Standard latency: does a second front add throughput?

One root on moto behind :class:`bench.s3_proxy.S3FaultProxy` with the ``s3-standard`` profile; a 16-partition
topic; ``lakelog serve --node-id N --kafka-listener ...`` fronts (one, then two, fresh each repeat and
interleaved), partition leases balanced between them before the load starts; with two, the holder of
partition 0's lease makes the topic's commits and the other hands it its own (writer/commit_handoff.py).  The
load: ``PRODUCERS`` librdkafka producer processes (idempotent, lz4, linger.ms 5, acks=all), bootstrapped with
every front, so each sends every partition's records to its leader.  Records/s from the first produce to the
last flush, median of the repeats; the ratio two/one is the figure, for each of :data:`LOADS`.

The machine has 2 cores that the fronts, moto, the proxy and the producers share: the profile's latency,
not the CPU, must be what limits one front for the comparison to mean anything (the goal's load is the
latency-bound one); the CPU of the fronts, the moto server, the latency proxy (this process's threads), the
producers and the whole machine is reported so a reader can check.
"""

from __future__ import annotations

import multiprocessing
import os
import time

from bench import BenchContext, BenchResult, Goal, md_table, median

TITLE = "Several fronts on one S3 root: two fronts vs one (S3 Standard latency)"
PARTITIONS = 16
PRODUCERS = 4
GOAL_RATIO = 1.6


# The loads: name -> librdkafka settings over bench.kafka_produce's. "latency-bound" lets each producer keep one
# request in flight per front, so what one front acknowledges per second is its acknowledgement latency's
# inverse times what a request carries, not what the 2 shared cores can parse: the goal's load.
# "defaults" is librdkafka's 5 requests in flight, which here runs out of CPU first (the producers' Python
# loops take about three quarters of a core), shown for comparison.
LOADS = {"latency-bound": {"max.in.flight.requests.per.connection": 1}, "defaults": {}}
GOAL_LOAD = "latency-bound"


def _settings(config: dict) -> str:
    return ", ".join(f"{c}={v}" for c, v in config.items()) or "librdkafka defaults"


def _produce(bootstrap: str, topic: str, n: int, config: dict, out) -> None:
    from bench.kafka_produce import _own_cpu, confluent_produce

    started = time.monotonic()  # CLOCK_MONOTONIC: comparable between the producer processes
    confluent_produce(bootstrap, topic, n, config=config)
    out.put((started, time.monotonic(), _own_cpu()))


def _machine_busy_s() -> float:
    """CPU seconds the whole machine has spent busy (all cores, /proc/stat), for the share left idle."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + fields[4]
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def _balanced(bootstrap: str, topic: str, nodes: int) -> bool:
    from confluent_kafka.admin import AdminClient

    try:
        md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    except Exception:
        return False
    leaders = [p.leader for p in md.topics[topic].partitions.values()]
    counts = [leaders.count(n) for n in range(1, nodes + 1)]
    return len(leaders) == PARTITIONS and min(counts) >= PARTITIONS // nodes


def _one_run(ctx: BenchContext, moto, proxy_url: str, fronts_n: int, records: int, config: dict, tag: str) -> dict:
    from bench.http_produce import FrontProcess, _free_port
    from bench.kafka_produce import _cpu_seconds, _own_cpu

    env = {**moto.env, "AWS_ENDPOINT_URL": proxy_url, "LAKELOG_FRONT_SESSION_TIMEOUT_MS": "5000"}
    root = f"s3://{moto.BUCKET}/fronts-{tag}"
    fronts, addresses = [], []
    try:
        for node in range(1, fronts_n + 1):
            address = f"127.0.0.1:{_free_port()}"
            fronts.append(FrontProcess(root, ctx.workdir, env=env,
                                       args=("--node-id", str(node), "--kafka-listener", address)))
            addresses.append(address)
        import httpx

        r = httpx.post(f"{fronts[0].url}/v1/topics", json={"name": "load", "partitions": PARTITIONS}, timeout=60)
        assert r.status_code == 201, r.text
        bootstrap = ",".join(addresses)
        deadline = time.monotonic() + 60
        while not _balanced(bootstrap, "load", fronts_n):
            assert time.monotonic() < deadline, "partition leases did not settle"
            time.sleep(0.5)
        cpu0 = [_cpu_seconds(f.proc.pid) for f in fronts]
        moto0, bench0, machine0 = _cpu_seconds(moto.proc.pid), _own_cpu(), _machine_busy_s()
        spawn = multiprocessing.get_context("spawn")
        out = spawn.Queue()
        per = records // PRODUCERS
        procs = [spawn.Process(target=_produce, args=(bootstrap, "load", per, config, out)) for _ in range(PRODUCERS)]
        spawned = time.perf_counter()
        for p in procs:
            p.start()
        for p in procs:
            p.join(600)
        wall = time.perf_counter() - spawned
        assert all(p.exitcode == 0 for p in procs), [p.exitcode for p in procs]
        cpu = sum(_cpu_seconds(f.proc.pid) - c for f, c in zip(fronts, cpu0))
        reports = [out.get(timeout=10) for _ in procs]
        # From the first producer's first record to the last one's flush: not the processes' start-up (imports)
        span = max(r[1] for r in reports) - min(r[0] for r in reports)
        producers_cpu = sum(r[2] for r in reports)
        return {"records_per_s": per * PRODUCERS / span, "front_cpu_s": cpu, "wall_s": wall,
                "moto_cpu_s": _cpu_seconds(moto.proc.pid) - moto0, "proxy_cpu_s": _own_cpu() - bench0,
                "producers_cpu_s": producers_cpu, "machine_cpu_s": _machine_busy_s() - machine0}
    finally:
        for f in fronts:
            f.close()


def run(ctx: BenchContext) -> BenchResult:
    from bench.http_produce import MotoProcess
    from bench.s3_proxy import PROFILES, S3FaultProxy

    records = ctx.size(2_000_000, 8_000)
    series: dict[tuple[str, int], list[dict]] = {(load, n): [] for load in LOADS for n in (1, 2)}
    moto = MotoProcess()
    proxy = S3FaultProxy(moto.endpoint, latency=PROFILES["s3-standard"]).start()
    try:
        for i in range(ctx.repeats):
            for load, config in LOADS.items():
                for n in (1, 2):
                    ctx.progress(f"repeat {i + 1}/{ctx.repeats}: {load}, {n} front(s)")
                    series[(load, n)].append(_one_run(ctx, moto, proxy.url, n, records, config, f"{i}-{load}-{n}"))
    finally:
        proxy.stop()
        moto.close()

    def med(key: str, load: str, n: int) -> float:
        runs = series[(load, n)]
        if key == "records_per_s":
            return median([r[key] for r in runs])
        return median([r[key] / r["wall_s"] for r in runs])

    rows, ratios = [], {}
    for load in LOADS:
        one = med("records_per_s", load, 1)
        ratios[load] = med("records_per_s", load, 2) / one if one else 0.0
        for n in (1, 2):
            rate = med("records_per_s", load, n)
            rows.append([load, f"{n} front{'s' if n > 1 else ''}", f"{rate:,.0f}", f"{rate * 100 / 1e6:.1f}",
                         f"{rate / one:.2f}x" if one else "-",
                         *(f"{med(k, load, n):.2f}" for k in ("front_cpu_s", "moto_cpu_s", "proxy_cpu_s",
                                                              "producers_cpu_s")),
                         f"{med('machine_cpu_s', load, n):.2f} of 2"])
    text = (f"{PRODUCERS} librdkafka producer processes, {records:,} 100-byte records per run, a "
            f"{PARTITIONS}-partition topic on one moto root behind the s3-standard latency profile; median of "
            f"{ctx.repeats} interleaved runs; records/s from the first producer's first record to the last "
            f"one's flush. Loads: " + "; ".join(f"{k} ({_settings(config)})" for k, config in LOADS.items())
            + ".\n\n"
            + md_table(["load", "fronts", "records/s", "MB/s", "vs one front", "front CPU cores busy (sum)",
                        "moto CPU cores busy", "proxy (bench process) CPU cores busy",
                        "producers CPU cores busy", "machine CPU cores busy"], rows))
    ratio = ratios[GOAL_LOAD]
    goals = [Goal(f"two fronts >= {GOAL_RATIO}x one front (s3-standard, {GOAL_LOAD} load)", ratio >= GOAL_RATIO,
                  f"{ratio:.2f}x")]
    lines = [f"{load}: 1 front {med('records_per_s', load, 1):,.0f} rec/s, 2 fronts "
             f"{med('records_per_s', load, 2):,.0f} rec/s: {ratios[load]:.2f}x; machine CPU cores busy "
             f"{med('machine_cpu_s', load, 1):.2f} / {med('machine_cpu_s', load, 2):.2f}" for load in LOADS]
    return BenchResult(text, lines, {"ratio": ratio, **{f"ratio_{k}": v for k, v in ratios.items()}}, goals)
