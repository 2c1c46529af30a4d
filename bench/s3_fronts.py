"""Two fronts against one on a shared S3 root, S3 Standard latency: does a second front add throughput?

One root on moto behind :class:`bench.s3_proxy.S3FaultProxy` with the ``s3-standard`` profile; a 16-partition
topic; ``lakelog serve --node-id N --kafka-listener ...`` fronts (one, then two, fresh each repeat and
interleaved), partition leases balanced between them before the load starts.  The load: ``PRODUCERS``
librdkafka producer processes (idempotent, lz4, linger.ms 5, acks=all), bootstrapped with every front, so
each sends every partition's records to its leader.  Records/s from the first produce to the last flush,
median of the repeats; the ratio two/one is the figure.

The machine has 2 cores that the fronts, moto, the proxy and the producers share: the profile's latency,
not the CPU, must be what limits one front for the comparison to mean anything; the CPU of the fronts, of
the moto server and of the latency proxy (this process's threads) is reported so a reader can check.
"""

from __future__ import annotations

import multiprocessing
import time

from bench import BenchContext, BenchResult, Goal, md_table, median

TITLE = "Several fronts on one S3 root: two fronts vs one (S3 Standard latency)"
PARTITIONS = 16
PRODUCERS = 4
GOAL_RATIO = 1.6


def _produce(bootstrap: str, topic: str, n: int, out) -> None:
    from bench.kafka_produce import confluent_produce

    out.put(confluent_produce(bootstrap, topic, n)[0])


def _balanced(bootstrap: str, topic: str, nodes: int) -> bool:
    from confluent_kafka.admin import AdminClient

    try:
        md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    except Exception:
        return False
    leaders = [p.leader for p in md.topics[topic].partitions.values()]
    counts = [leaders.count(n) for n in range(1, nodes + 1)]
    return len(leaders) == PARTITIONS and min(counts) >= PARTITIONS // nodes


def _one_run(ctx: BenchContext, moto, proxy_url: str, fronts_n: int, records: int, tag: str) -> dict:
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
        moto0, bench0 = _cpu_seconds(moto.proc.pid), _own_cpu()
        spawn = multiprocessing.get_context("spawn")
        out = spawn.Queue()
        per = records // PRODUCERS
        procs = [spawn.Process(target=_produce, args=(bootstrap, "load", per, out)) for _ in range(PRODUCERS)]
        started = time.perf_counter()
        for p in procs:
            p.start()
        for p in procs:
            p.join(600)
        wall = time.perf_counter() - started
        assert all(p.exitcode == 0 for p in procs), [p.exitcode for p in procs]
        cpu = sum(_cpu_seconds(f.proc.pid) - c for f, c in zip(fronts, cpu0))
        return {"records_per_s": per * PRODUCERS / wall, "front_cpu_s": cpu, "wall_s": wall,
                "moto_cpu_s": _cpu_seconds(moto.proc.pid) - moto0, "proxy_cpu_s": _own_cpu() - bench0}
    finally:
        for f in fronts:
            f.close()


def run(ctx: BenchContext) -> BenchResult:
    from bench.http_produce import MotoProcess
    from bench.s3_proxy import PROFILES, S3FaultProxy

    records = ctx.size(2_000_000, 8_000)
    series: dict[int, list[dict]] = {1: [], 2: []}
    moto = MotoProcess()
    proxy = S3FaultProxy(moto.endpoint, latency=PROFILES["s3-standard"]).start()
    try:
        for i in range(ctx.repeats):
            for n in (1, 2):
                ctx.progress(f"repeat {i + 1}/{ctx.repeats}: {n} front(s)")
                series[n].append(_one_run(ctx, moto, proxy.url, n, records, f"{i}-{n}"))
    finally:
        proxy.stop()
        moto.close()
    rate = {n: median([r["records_per_s"] for r in runs]) for n, runs in series.items()}
    def busy(key: str) -> dict[int, float]:
        return {n: median([r[key] / r["wall_s"] for r in runs]) for n, runs in series.items()}

    cpu, moto_cpu, proxy_cpu = busy("front_cpu_s"), busy("moto_cpu_s"), busy("proxy_cpu_s")
    ratio = rate[2] / rate[1] if rate[1] else 0.0
    rows = [[f"{n} front{'s' if n > 1 else ''}", f"{rate[n]:,.0f}", f"{rate[n] * 100 / 1e6:.1f}",
             f"{rate[n] / rate[1]:.2f}x", f"{cpu[n]:.2f}", f"{moto_cpu[n]:.2f}", f"{proxy_cpu[n]:.2f}"]
            for n in (1, 2)]
    text = (f"{PRODUCERS} librdkafka producer processes, {records:,} 100-byte records per run, a "
            f"{PARTITIONS}-partition topic on one moto root behind the s3-standard latency profile; median of "
            f"{ctx.repeats} interleaved runs.\n\n"
            + md_table(["fronts", "records/s", "MB/s", "vs one front", "front CPU cores busy (sum)",
                        "moto CPU cores busy", "proxy (bench process) CPU cores busy"], rows))
    goals = [Goal(f"two fronts >= {GOAL_RATIO}x one front (s3-standard)", ratio >= GOAL_RATIO, f"{ratio:.2f}x")]
    return BenchResult(text, [f"1 front {rate[1]:,.0f} rec/s, 2 fronts {rate[2]:,.0f} rec/s: {ratio:.2f}x",
                              f"front CPU cores busy: 1 front {cpu[1]:.2f}, 2 fronts {cpu[2]:.2f}",
                              f"moto CPU cores busy: 1 front {moto_cpu[1]:.2f}, 2 fronts {moto_cpu[2]:.2f}"],
                       {"one": rate[1], "two": rate[2], "ratio": ratio}, goals)
