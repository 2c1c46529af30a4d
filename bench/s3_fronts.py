"""Two fronts against one on a shared S3 root, S3 Standard latency: does a second front add throughput?

One root on moto behind :class:`bench.s3_proxy.S3FaultProxy` with the ``s3-standard`` profile; a 16-partition
topic; ``lakelog serve --node-id N --kafka-listener ...`` fronts (one, then two, fresh each repeat and
interleaved), partition leases balanced between them before the load starts; with two, the holder of partition
0's lease makes the topic's commits and the other hands it its own (writer/commit_handoff.py). The load: each
load's librdkafka producer processes (two or four; idempotent, lz4, linger.ms 5, acks=all), bootstrapped with every
front, so each sends every partition's records to its leader. The figure is the steady state's records/s
(:data:`STEADY`, :mod:`bench.steady_state`: a window from the producers' acknowledged counts, the fronts'
committed records over it at the slower front's pace), and beside it the whole run's, from the first timed
produce to the last flush, the producers' clocks started together once each is connected, has a leader for every
partition and its producer id, and has had a record acknowledged by every partition's leader (as the paced runs
of bench/kafka_produce.py are warmed up); the fronts' counters and every process's CPU are read over that timed
part only. Median of the repeats (2 x repeats - 1 for the goal's load); the ratio two/one in the steady state is
the figure, for each of :data:`LOADS`.

The machine has 2 cores that the fronts, moto, the proxy and the producers share: the profile's latency,
not the CPU, must be what limits the fronts for the comparison to mean anything (the goal's load is the
latency-bound one with 1 KB records and two producers; every load moves the same bytes per run); the CPU of the
fronts, the moto server, the latency proxy (this process's threads), the producers and the whole machine is
reported so a reader can check.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from bench import BenchContext, BenchResult, Goal, md_table, median
from bench.steady_state import rate_over, window

TITLE = "Several fronts on one S3 root: two fronts vs one (S3 Standard latency)"
PARTITIONS = 16
GOAL_RATIO = 1.6


# The loads: name -> (librdkafka settings over bench.kafka_produce's, bytes per record value, producer processes).
# "latency-bound" lets each producer keep one request in flight per front, so what one front acknowledges per
# second is its acknowledgement latency's inverse times what a request carries (here one partition's batch of up
# to batch.size, 1 MB), not what the 2 shared cores can parse. With 100-byte records the cores are still about 70%
# busy with two fronts (the producers' Python loops and librdkafka, the fronts' per-record work, moto), and the
# waits for them lengthen every stage; 1 KB records carry the same bytes in a tenth of the records. Of those, the
# fewer requests in flight, the less the shared cores and the topic's one commit sequence wait in every stage of
# a two-front run: with two producers the profile's latency is what limits (two fronts' Produce latency about
# 1.15 times one front's, under half the cores busy), the goal's load; with four, more (the table's other rows),
# and with six or eight the ratio is lower still. "defaults" is librdkafka's 5 requests in flight, which here
# runs out of CPU first, shown for comparison.
LATENCY_BOUND = {"max.in.flight.requests.per.connection": 1}
LOADS = {"latency-bound, 1 KB records, 2 producers": (LATENCY_BOUND, 1000, 2),
         "latency-bound, 1 KB records, 4 producers": (LATENCY_BOUND, 1000, 4),
         "latency-bound, 100 B records, 4 producers": (LATENCY_BOUND, 100, 4),
         "defaults, 100 B records, 4 producers": ({}, 100, 4)}
# Every load: records spread over the partitions one by one, not librdkafka's sticky batches of
# sticky.partitioning.linger.ms (10 ms). A run is a fixed count of records: in sticky batches one front's
# partitions get several percent more of them than the other's, and the run ends with that front alone at work,
# which makes two fronts look slower than they are
PRODUCER = {"sticky.partitioning.linger.ms": 0}
GOAL_LOAD = "latency-bound, 1 KB records, 2 producers"
# Record values per run: 6,000,000 of 100 bytes, 600,000 of 1 KB. Long enough for a steady state: with 1 KB records
# each of four producers sends a partition nine full batches before its last, partial one (each of two, 18). At a
# third of this (four requests per partition and producer, one of them a batch a fifth full) the requests carry
# fewer records, and the end of the run, with fewer requests in flight, weighs more in the two-front runs, which
# are shorter, so the ratio reads low
RUN_BYTES = 600_000_000
# The steady state: from this share of the run's records acknowledged to that one (bench/steady_state.py)
STEADY = (0.2, 0.8)
# How often each front's committed records are read in a run (a /metrics request to each front)
POLL_S = 0.5


def _settings(config: dict) -> str:
    return ", ".join(f"{c}={v}" for c, v in config.items()) or "librdkafka defaults"


def _produce(bootstrap: str, topic: str, n: int, config: dict, value_bytes: int, ready, go, out) -> None:
    """One producer process: warms up, says it is ready, waits for ``go``, produces ``n`` records; puts (clock
    start, end, CPU seconds between, (time, records acknowledged) samples) on ``out``, in CLOCK_MONOTONIC, which
    is comparable between processes."""
    from bench.kafka_produce import _own_cpu, confluent_produce

    marks, progress = [], []

    def start() -> None:
        ready.put(None)
        go.wait()
        marks.append((time.monotonic(), _own_cpu()))

    confluent_produce(bootstrap, topic, n, config={**PRODUCER, **config}, warm_up=True, on_start=start,
                      value_bytes=value_bytes, progress=progress)
    out.put((marks[0][0], time.monotonic(), _own_cpu() - marks[0][1], progress))


def _machine_busy_s() -> float:
    """CPU seconds the whole machine has spent busy (all cores, /proc/stat), for the share left idle."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + fields[4]
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def _produce_requests(front) -> tuple[float, float]:
    """(Produce requests the front answered, their summed latency in s)."""
    return front.histogram("lakelog_kafka_request_duration_seconds", "api").get("Produce", (0.0, 0.0))


class _CommittedPoller(threading.Thread):
    """Samples each front's records committed to the load's topic (``lakelog_records_in_total``, its own appends,
    handed-over ones included) into ``curves`` every :data:`POLL_S` until :meth:`finish`, which samples once more
    and raises what stopped the sampling, if anything did (a run's figure must not come from a curve cut short)."""

    def __init__(self, fronts) -> None:
        super().__init__(daemon=True)
        self.fronts = fronts
        self.curves: list[list[tuple[float, float]]] = [[] for _ in fronts]
        self.error: BaseException | None = None
        self._halt = threading.Event()

    def run(self) -> None:
        import httpx

        try:
            with httpx.Client(timeout=30) as http:
                while True:
                    for front, curve in zip(self.fronts, self.curves):
                        t = time.monotonic()
                        value = front.counter(http, "lakelog_records_in", topic="load")
                        curve.append(((t + time.monotonic()) / 2, value))
                    if self._halt.is_set():
                        return
                    self._halt.wait(POLL_S)
        except BaseException as e:
            self.error = e

    def finish(self) -> list[list[tuple[float, float]]]:
        self._halt.set()
        self.join()
        if self.error is not None:
            raise RuntimeError("reading the fronts' committed records failed") from self.error
        return self.curves


def _balanced(bootstrap: str, topic: str, nodes: int) -> bool:
    from confluent_kafka.admin import AdminClient

    try:
        md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    except Exception:
        return False
    leaders = [p.leader for p in md.topics[topic].partitions.values()]
    counts = [leaders.count(n) for n in range(1, nodes + 1)]
    return len(leaders) == PARTITIONS and min(counts) >= PARTITIONS // nodes


def _one_run(ctx: BenchContext, moto, proxy_url: str, fronts_n: int, records: int, config: dict, tag: str,
             value_bytes: int, producers: int) -> dict:
    from bench.http_produce import STAGES, FrontProcess, _free_port, stage_means
    from bench.kafka_produce import _cpu_seconds, _own_cpu

    env = {**moto.env, "AWS_ENDPOINT_URL": proxy_url, "LAKELOG_FRONT_SESSION_TIMEOUT_MS": "5000"}
    root = f"s3://{moto.BUCKET}/fronts-{tag}"
    fronts, addresses = [], []
    while len(addresses) < fronts_n:
        if (address := f"127.0.0.1:{_free_port()}") not in addresses:
            addresses.append(address)
    try:
        with ThreadPoolExecutor(fronts_n) as pool:  # the fronts start together, as a cluster's would
            starting = [pool.submit(FrontProcess, root, ctx.workdir, env=env,
                                    args=("--node-id", str(node), "--kafka-listener", address))
                        for node, address in enumerate(addresses, 1)]
        fronts.extend(f.result() for f in starting if f.exception() is None)
        for f in starting:
            f.result()  # a front that did not start: the others are closed below
        import httpx

        r = httpx.post(f"{fronts[0].url}/v1/topics", json={"name": "load", "partitions": PARTITIONS}, timeout=60)
        assert r.status_code == 201, r.text
        bootstrap = ",".join(addresses)
        deadline = time.monotonic() + 60
        while not _balanced(bootstrap, "load", fronts_n):
            assert time.monotonic() < deadline, "partition leases did not settle"
            time.sleep(0.5)
        spawn = multiprocessing.get_context("spawn")
        ready, go, out = spawn.Queue(), spawn.Event(), spawn.Queue()
        per = records // producers
        procs = [spawn.Process(target=_produce, args=(bootstrap, "load", per, config, value_bytes, ready, go, out))
                 for _ in range(producers)]
        for p in procs:
            p.start()
        for _ in procs:  # every producer warmed up: what follows counts only the timed load
            ready.get(timeout=180)
        requests0 = [_produce_requests(f) for f in fronts]
        stages0 = [f.histogram(STAGES, "stage") for f in fronts]
        cpu0 = [_cpu_seconds(f.proc.pid) for f in fronts]
        moto0, bench0, machine0 = _cpu_seconds(moto.proc.pid), _own_cpu(), _machine_busy_s()
        poller = _CommittedPoller(fronts)
        poller.start()
        started = time.perf_counter()
        go.set()
        # the reports before the joins: a producer's report outgrows a pipe's buffer, and its process cannot end
        # until it is read
        reports = [out.get(timeout=600) for _ in procs]
        for p in procs:
            p.join(600)
        wall = time.perf_counter() - started
        committed = poller.finish()
        assert all(p.exitcode == 0 for p in procs), [p.exitcode for p in procs]
        cpu = sum(_cpu_seconds(f.proc.pid) - c for f, c in zip(fronts, cpu0))
        requests = [tuple(b - a for a, b in zip(r0, _produce_requests(f))) for f, r0 in zip(fronts, requests0)]
        stages1 = [f.histogram(STAGES, "stage") for f in fronts]
        stages = [stage_means(s0, s1) for s0, s1 in zip(stages0, stages1)]

        def made(i: int, stage: str) -> float:
            return stages1[i].get(stage, (0.0, 0.0))[0] - stages0[i].get(stage, (0.0, 0.0))[0]

        # The committer front is the one that made the commits (the holder of partition 0's lease, which can move
        # under load), the other handed its over: judged by what each did, not by who led at the start
        committer = 1 + max(range(fronts_n), key=lambda i: made(i, "commit") - made(i, "handoff"))
        # From the first producer's first timed record to the last one's flush: not the processes' start-up
        # (imports), nor the clients' (connections, metadata, producer id: most of a second under S3 Standard
        # latency, librdkafka's retry timer for the producer id included); they start together
        span = max(r[1] for r in reports) - min(r[0] for r in reports)
        producers_cpu = sum(r[2] for r in reports)
        # Little's law over the fronts' Produce requests: records/s = requests in flight x records per request /
        # latency, so the two-front ratio splits into those three factors (printed with the table)
        count, latency_s = sum(r[0] for r in requests), sum(r[1] for r in requests)
        other = [r for node, r in enumerate(requests, 1) if node != committer]
        # The steady state: the producers' middle, at the slower front's pace -- records spread evenly over the
        # partitions go only as fast as the slower front takes its half (the faster one, ahead in the middle of
        # a fixed-size run, would in a stream empty its share of the producers' buffers and wait)
        start, end = window([r[3] for r in reports], *STEADY)
        fronts_rate = [rate_over(c, start, end) for c in committed]
        return {"records_per_s": per * producers / span, "steady_records_per_s": fronts_n * min(fronts_rate),
                "fronts_spread": max(fronts_rate) / min(fronts_rate),
                "front_cpu_s": cpu, "wall_s": wall,
                "stages": {"one front" if fronts_n == 1 else "committer front" if node == committer else
                           "other front": means for node, means in enumerate(stages, 1)},
                "in_flight": latency_s / span, "records_per_request": per * producers / count,
                "latency_ms": 1000 * latency_s / count,
                "committer_latency_ms": 1000 * requests[committer - 1][1] / requests[committer - 1][0],
                "other_latency_ms": 1000 * sum(r[1] for r in other) / sum(r[0] for r in other) if other else 0.0,
                "moto_cpu_s": _cpu_seconds(moto.proc.pid) - moto0, "proxy_cpu_s": _own_cpu() - bench0,
                "producers_cpu_s": producers_cpu, "machine_cpu_s": _machine_busy_s() - machine0}
    finally:
        for f in fronts:
            f.close()
        moto.clear(f"fronts-{tag}/")


def run(ctx: BenchContext) -> BenchResult:
    from bench.http_produce import STAGE_NAMES, MotoProcess
    from bench.s3_proxy import PROFILES, S3FaultProxy

    # A quick run (the smoke test) takes the goal's load only: the others run the same code with other settings
    loads = {GOAL_LOAD: LOADS[GOAL_LOAD]} if ctx.quick else LOADS
    records = {load: ctx.size(RUN_BYTES // size, 800_000 // size) for load, (_, size, _) in loads.items()}
    # The goal's load runs more often: on this shared 2-core machine the median of three two-front runs of the same
    # code can differ by a quarter between runs
    goal_repeats = 2 * ctx.repeats - 1
    series: dict[tuple[str, int], list[dict]] = {(load, n): [] for load in loads for n in (1, 2)}
    moto = MotoProcess()
    proxy = S3FaultProxy(moto.endpoint, latency=PROFILES["s3-standard"]).start()
    try:
        for i in range(goal_repeats):
            for li, (load, (config, size, producers)) in enumerate(loads.items()):
                repeats = goal_repeats if load == GOAL_LOAD else ctx.repeats
                if i >= repeats:
                    continue
                for n in (1, 2):
                    ctx.progress(f"repeat {i + 1}/{repeats}: {load}, {n} front(s)")
                    series[(load, n)].append(_one_run(ctx, moto, proxy.url, n, records[load], config,
                                                      f"{i}-{li}-{n}", size, producers))
    finally:
        proxy.stop()
        moto.close()

    def med(key: str, load: str, n: int) -> float:
        runs = series[(load, n)]
        if key.endswith("_cpu_s"):  # CPU seconds over the run's wall time: cores busy
            return median([r[key] / r["wall_s"] for r in runs])
        return median([r[key] for r in runs])

    rows, ratios, wholes, little = [], {}, {}, []
    for load in loads:
        one, one_whole = med("steady_records_per_s", load, 1), med("records_per_s", load, 1)
        ratios[load] = med("steady_records_per_s", load, 2) / one if one else 0.0
        wholes[load] = med("records_per_s", load, 2) / one_whole if one_whole else 0.0
        for n in (1, 2):
            rate, whole = med("steady_records_per_s", load, n), med("records_per_s", load, n)
            rows.append([load, f"{n} front{'s' if n > 1 else ''}", f"{rate:,.0f}", f"{rate * loads[load][1] / 1e6:.1f}",
                         f"{rate / one:.2f}x" if one else "-", f"{whole:,.0f}",
                         f"{whole / one_whole:.2f}x" if one_whole else "-",
                         *(f"{med(k, load, n):.2f}" for k in ("front_cpu_s", "moto_cpu_s", "proxy_cpu_s",
                                                              "producers_cpu_s")),
                         f"{med('machine_cpu_s', load, n):.2f} of 2"])
            latency = (f"{med('latency_ms', load, n):.0f}" if n == 1 else
                       f"{med('latency_ms', load, n):.0f} ({med('committer_latency_ms', load, n):.0f} / "
                       f"{med('other_latency_ms', load, n):.0f})")
            factors = "-" if n == 1 else " x ".join(
                f"{med(k, load, 2) / med(k, load, 1):.2f}" for k in ("in_flight", "records_per_request")
            ) + f" x {med('latency_ms', load, 1) / med('latency_ms', load, 2):.2f}"
            little.append([load, f"{n} front{'s' if n > 1 else ''}", f"{med('in_flight', load, n):.2f}",
                           f"{med('records_per_request', load, n):,.0f}", latency, factors])
    per_run = ", ".join(f"{records[load]:,} records of {size:,} B" for load, (_, size, _) in loads.items())
    text = (f"librdkafka producer processes (each load's count); per run, the same bytes of record values in every "
            f"load ({per_run}); a "
            f"{PARTITIONS}-partition topic on one moto root behind the s3-standard latency profile; median of "
            f"{goal_repeats} interleaved runs ({GOAL_LOAD}) and {ctx.repeats} (the others). The figure is the steady "
            f"state: from the moment the producers together have had {STEADY[0]:.0%} of the run's records "
            f"acknowledged to the moment they have had {STEADY[1]:.0%} (bench/steady_state.py, from each "
            f"producer's count of acknowledged records every 20 ms), what the fronts committed (each read every "
            f"{POLL_S} s), at the slower front's pace: the number of fronts times the slower one's records/s, "
            f"since records spread evenly over the partitions go only as fast as the slower front takes its half. "
            f"A fixed-size run also has a start, in which the producer processes fill their queues on the 2 cores "
            f"the fronts use, and an end, in which each partition's last batch is partial; a stream has neither, "
            f"and they cost the shorter two-front run more of its time. The whole run alongside: from the first "
            f"producer's first timed record to the last "
            f"one's flush (the producers start together, each connected, with a leader for every partition and a "
            f"record acknowledged by each; the fronts' counters and the CPU are read over the whole timed part). "
            f"Producers: "
            f"{_settings(PRODUCER)} (records spread one by one). Loads: "
            + "; ".join(f"{k} ({_settings(config)})" for k, (config, _, _) in loads.items())
            + ".\n\n"
            + md_table(["load", "fronts", "records/s (steady state)", "MB/s", "vs one front",
                        "records/s (whole run)", "vs one front (whole run)", "front CPU cores busy (sum)",
                        "moto CPU cores busy", "proxy (bench process) CPU cores busy",
                        "producers CPU cores busy", "machine CPU cores busy"], rows)
            + "\n\nWhere the rate comes from, by Little's law over the fronts' Produce requests (their "
              "`lakelog_kafka_request_duration_seconds`): records/s = requests in flight x records per request / "
              "latency, so two fronts' gain is the product of three factors (of the medians, so only about "
              "the ratio above). The latency is the fronts' mean, and with two fronts that of the committer "
              "front (the one that made the commits) / the other front, which handed its commits over.\n\n"
            + md_table(["load", "fronts", "Produce requests in flight (mean)", "records per request",
                        "Produce latency at the fronts, ms (committer / other)",
                        "two vs one: in flight x records per request x 1/latency"], little))
    stage_rows = []
    for load in loads:
        for n in (1, 2):
            roles = ("one front",) if n == 1 else ("committer front", "other front")
            for role in roles:
                means = [r["stages"].get(role, {}) for r in series[(load, n)]]
                stage_rows.append([load, role, *(
                    f"{median([m[s] for m in means if s in m]):.1f}" if any(s in m for m in means) else "-"
                    for s in STAGE_NAMES)])
    text += ("\n\nWhere the fronts' group commits spend their time (`lakelog_produce_stage_seconds`, mean ms per "
             "group commit, median of the runs): the other front's commit is a handoff, the round trip in which "
             "the committer front carries it in its next commit.\n\n"
             + md_table(["load", "front", *(f"{s.replace('_', ' ')} ms" for s in STAGE_NAMES)], stage_rows))
    pairs = {k: [b[k] / a[k] for a, b in zip(series[(GOAL_LOAD, 1)], series[(GOAL_LOAD, 2)])]
             for k in ("steady_records_per_s", "records_per_s")}
    text += (f"\n\nThe {GOAL_LOAD} load's pairs, two fronts over one front in each interleaved pair, in order: "
             + ", ".join(f"{r:.2f}x" for r in pairs["steady_records_per_s"]) + " in the steady state; "
             + ", ".join(f"{r:.2f}x" for r in pairs["records_per_s"]) + " over the whole run. In the steady state "
             f"the faster of the two fronts committed {med('fronts_spread', GOAL_LOAD, 2) - 1:.1%} more records/s "
             "than the slower (median), which the figure leaves out.")
    ratio, whole = ratios[GOAL_LOAD], wholes[GOAL_LOAD]
    goals = [Goal(f"two fronts >= {GOAL_RATIO}x one front (s3-standard, {GOAL_LOAD} load, steady state)",
                  ratio >= GOAL_RATIO, f"{ratio:.2f}x ({whole:.2f}x over the whole run)")]
    lines = [f"{load}: 1 front {med('steady_records_per_s', load, 1):,.0f} rec/s, 2 fronts "
             f"{med('steady_records_per_s', load, 2):,.0f} rec/s: {ratios[load]:.2f}x in the steady state, "
             f"{wholes[load]:.2f}x over the whole run; machine CPU cores busy "
             f"{med('machine_cpu_s', load, 1):.2f} / {med('machine_cpu_s', load, 2):.2f}" for load in loads]
    return BenchResult(text, lines, {"ratio": ratio, "ratio_whole_run": whole,
                                     **{f"ratio_{k}": v for k, v in ratios.items()}}, goals)
