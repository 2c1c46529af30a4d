"""Beside Apache Kafka on the same machine: produce, consume, end-to-end latency, and Spark reading the same records.

Three systems on loopback, each driven by the same client with the same records, measured in one run:

* **Apache Kafka** -- one KRaft node (:class:`reference.kafka.KafkaBroker`, the pinned ``kafka`` set) with its
  defaults and the JVM settings of its start script (1 GB heap, G1), its log on local disk (page cache, no fsync
  per write, as Kafka runs by default);
* **lakelog, local root** -- ``lakelog serve --kafka-listener`` on a local directory, its defaults;
* **lakelog, S3 Standard** -- the same on a moto S3 server behind :class:`bench.s3_proxy.S3FaultProxy` with the
  S3 Standard latency profile (PUT p50 25 ms, p99 80 ms; GET first byte 15/60 ms), where no broker that needs
  local disks can run.

Every topic has 8 partitions; values are 100 bytes (random hex, which lz4 barely compresses). The sections,
each the median of ``repeats`` runs with the systems interleaved (the order turned by one each run):

1. **produce** -- confluent-kafka, lz4, ``acks=all``, idempotent, ``linger.ms`` 5 and 50
   (:func:`bench.kafka_produce.confluent_produce`, warmed up before the clock starts): the maximum records/s; CPU
   seconds of the broker or front process per million records; then p50/p99 acknowledgement latency
   (librdkafka's, ``produce()`` to acknowledgement) paced at half the slower system's maximum (Kafka's or
   lakelog's on the local root; the S3 root at that rate or half its own maximum, whichever is lower);
2. **consume** -- a 10 M-record topic (keys ``key-000000`` .. ``key-000999`` in turn) drained from offset 0 by a
   confluent-kafka consumer with librdkafka's defaults (:func:`bench.kafka_produce.confluent_drain`): records/s and
   the server's CPU seconds per million records;
3. **end-to-end** -- a producer (the same settings, ``linger.ms`` 5) paced at 10,000 records/s, each value
   carrying its send time (CLOCK_MONOTONIC), and a consumer in another process assigned every partition: the time
   from ``produce()`` to the consumer's ``poll()`` returning the record, p50/p99. On S3 Standard with the floor the
   profile sets: ``linger.ms`` plus a segment PUT then a commit PUT (:func:`bench.commit_floor.serial_commit_floor`
   of the PUT times the proxy measured in that run);
4. **Spark** -- the consume section's topic read by ``local[2]`` Spark (:mod:`bench.vs_kafka_spark`, a process of
   its own): ``spark.read.format("kafka")`` (Spark's own Kafka source, the ``spark-kafka`` set) of Apache Kafka
   against ``spark.read.format("lakelog")`` of the root, the query ``count(*), sum(length(value)),
   count_if(key = 'key-000042')``; Spark's Kafka source pointed at lakelog's listener; and the same three as
   ``readStream`` with ``Trigger.AvailableNow`` into the ``noop`` sink (``select(key, value)``).

Goals (ratios lakelog / Kafka in the same run, on the local root): produce maximum >= 1.0x; p99 at half rate <=
1.5x; CPU per million produced <= 1.5x; consumer drain >= 1.0x; end-to-end p99 <= 2x; Spark format("lakelog") >=
5x format("kafka") over Kafka for the batch read and >= 3x for the AvailableNow stream.

Nothing is fetched: the ``kafka`` and ``spark-kafka`` (and ``hadoop-aws``) sets must be in the reference cache
(``make bench`` runs ``python -m reference fetch`` first); without them the benchmark says so and stops.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import random
import struct
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from bench import BenchContext, BenchResult, Goal, md_table, median, percentile
from bench.vs_kafka_spark import PROGRESS as SPARK_PROGRESS

TITLE = "Beside Apache Kafka: produce, consume, end-to-end latency, Spark's Kafka source"
REPO = Path(__file__).resolve().parent.parent
PARTITIONS = 8
VALUE_BYTES = 100
KEYS = 1000
FILTER_KEY = "key-000042"
LINGERS = (5, 50)
E2E_RATE = 10_000
PACED_S = 10  # each half-rate and end-to-end run: long enough for a p99 of its records (a time: --scale keeps it)
# kafka-run-class.sh's KAFKA_JVM_PERFORMANCE_OPTS, as kafka-server-start.sh starts a broker (its heap, 1 GB, is
# KafkaBroker's default too)
KAFKA_JVM = ("-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:InitiatingHeapOccupancyPercent=35",
             "-XX:+ExplicitGCInvokesConcurrent", "-XX:MaxInlineLevel=15", "-Djava.awt.headless=true")
GOAL_PRODUCE, GOAL_P99, GOAL_CPU, GOAL_DRAIN, GOAL_E2E, GOAL_SPARK_BATCH, GOAL_SPARK_STREAM = (
    1.0, 1.5, 1.5, 1.0, 2.0, 5.0, 3.0)
E2E_HEAD = struct.Struct(">qq")  # send time (CLOCK_MONOTONIC ns), sequence number (-1: warm-up)
SYSTEMS = ("kafka", "local", "s3")
LABELS = {"kafka": "Apache Kafka", "local": "lakelog, local root", "s3": "lakelog, S3 Standard"}


def record_values(count: int = 4096) -> list[bytes]:
    """``count`` distinct 100-byte values of random hex (the same every run): lz4 finds little to compress."""
    rng = random.Random(57)
    return [rng.randbytes(VALUE_BYTES // 2).hex().encode() for _ in range(count)]


@dataclass
class System:
    """One system under test: its Kafka bootstrap server, the process whose CPU is its cost, and what Spark's
    format("lakelog") reads of it (None for Apache Kafka)."""

    key: str
    bootstrap: str
    pid: int
    lakelog: dict | None = None  # {"root": uri, "options": {...}}
    proxy: object | None = None  # the S3 latency proxy, for its request times
    topics: int = 0
    admin: object | None = None

    def topic(self) -> str:
        """A fresh topic of :data:`PARTITIONS` partitions, created through the Kafka protocol."""
        from confluent_kafka.admin import AdminClient, NewTopic

        if self.admin is None:  # one client kept for the run: a client dropped before its answer cancels it
            self.admin = AdminClient({"bootstrap.servers": self.bootstrap})
        self.topics += 1
        name = f"vs-{self.topics}-{random.randrange(1 << 32):x}"
        self.admin.create_topics([NewTopic(name, PARTITIONS, 1)], request_timeout=60)[name].result(60)
        return name


def _cpu(pid: int) -> float:
    from bench.kafka_produce import _cpu_seconds

    return _cpu_seconds(pid)


def _references() -> str:
    """The class path of the Spark run (Spark's Kafka source and hadoop-aws); raises SystemExit naming the fetch
    command when the cache lacks a set (nothing is fetched here)."""
    from reference import maven

    try:
        maven.classpath("kafka")
        return maven.classpath("spark-kafka", "hadoop-aws")
    except maven.ReferenceMissing as e:
        raise SystemExit(f"vs_kafka: the reference artifacts are missing, nothing was measured: {e}") from None


@contextlib.contextmanager
def _systems(ctx: BenchContext, kafka=None):
    """The three systems, started side by side (Kafka, a front on a local root, a front on moto behind the S3
    Standard proxy), stopped on exit; ``kafka``, a running :class:`reference.kafka.KafkaBroker`, is used as it is
    and left running."""
    from concurrent.futures import ThreadPoolExecutor

    from bench.http_produce import FrontProcess, MotoProcess, _free_port
    from bench.s3_proxy import PROFILES, S3FaultProxy
    from reference.kafka import KafkaBroker

    with contextlib.ExitStack() as stack:
        def stopped_on_exit(thing, stop):  # ExitStack's callbacks are a deque: appending is thread-safe
            stack.callback(stop)
            return thing

        def start_kafka() -> System:
            broker = kafka
            if broker is None:
                broker = KafkaBroker(ctx.workdir / "kafka", jvm_opts=KAFKA_JVM)
                # a loaded machine formats the log and starts the JVM slowly
                stopped_on_exit(broker, broker.stop).start(timeout=600)
            return System("kafka", broker.bootstrap, broker.pid)

        def start_local() -> System:
            root, listener = ctx.workdir / "lakelog", f"127.0.0.1:{_free_port()}"
            front = FrontProcess(str(root), ctx.workdir, args=("--kafka-listener", listener))
            stopped_on_exit(front, front.close)
            return System("local", listener, front.proc.pid, {"root": root.as_uri(), "options": {}})

        def start_s3() -> System:
            moto = MotoProcess()
            stopped_on_exit(moto, moto.close)
            proxy = S3FaultProxy(moto.endpoint, latency=PROFILES["s3-standard"]).start()
            stopped_on_exit(proxy, proxy.stop)
            root, listener = f"s3://{MotoProcess.BUCKET}/vs-kafka", f"127.0.0.1:{_free_port()}"
            front = FrontProcess(root, ctx.workdir, env={**moto.env, "AWS_ENDPOINT_URL": proxy.url},
                                 args=("--kafka-listener", listener))
            stopped_on_exit(front, front.close)
            storage = {"storage.aws_endpoint_url": proxy.url, "storage.aws_access_key_id": "bench",
                       "storage.aws_secret_access_key": "bench", "storage.aws_region": "us-east-1",
                       "storage.aws_allow_http": "true"}
            return System("s3", listener, front.proc.pid, {"root": root, "options": storage}, proxy)

        with ThreadPoolExecutor(3) as pool:
            started = [pool.submit(fn) for fn in (start_kafka, start_local, start_s3)]
        systems = {f.result().key: f.result() for f in started}
        ctx.progress("Apache Kafka and both lakelog fronts are up")
        yield systems


def _turns(i: int) -> tuple[str, ...]:
    """The systems' order in repetition ``i``: turned by one each time."""
    k = i % len(SYSTEMS)
    return SYSTEMS[k:] + SYSTEMS[:k]


# -- produce -----------------------------------------------------------------------------------
def produce_max(system: System, n: int, linger: int, values: list[bytes]) -> tuple[float, float]:
    """(records/s, the server's CPU seconds per million records) of one unpaced run on a fresh topic."""
    from bench.kafka_produce import confluent_produce

    start: list[float] = []
    rate, _ = confluent_produce(system.bootstrap, system.topic(), n, config={"linger.ms": linger}, warm_up=True,
                                values=values, on_start=lambda: start.append(_cpu(system.pid)))
    return rate, (_cpu(system.pid) - start[0]) / n * 1e6


def produce_paced(system: System, rate: float, n: int, linger: int, values: list[bytes]) -> tuple[float, float, float]:
    """(p50 ms, p99 ms, records/s kept) of ``n`` records paced at ``rate`` on a fresh topic."""
    from bench.kafka_produce import confluent_produce

    kept, latencies = confluent_produce(system.bootstrap, system.topic(), n, interval_s=1 / rate,
                                        config={"linger.ms": linger}, values=values)
    return percentile(latencies, 50) * 1000, percentile(latencies, 99) * 1000, kept


# -- end to end --------------------------------------------------------------------------------
def _e2e_consumer(bootstrap: str, topic: str, expected: int, ready, conn) -> None:
    """Polls every partition of ``topic`` from offset 0; sets ``ready`` once a warm-up record of each partition
    arrived; sends the list of (poll time - send time) in ns of ``expected`` records through ``conn``."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"e2e-{os.getpid()}", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    warm, latencies, deadline = set(), [], time.monotonic() + 600
    try:
        while len(latencies) < expected and time.monotonic() < deadline:
            m = c.poll(0.1)
            if m is None:
                continue
            now = time.monotonic_ns()
            if m.error() is not None:
                raise RuntimeError(str(m.error()))
            sent, seq = E2E_HEAD.unpack_from(m.value())
            if seq < 0:
                warm.add(m.partition())
                if len(warm) == PARTITIONS:
                    ready.set()
            else:
                latencies.append(now - sent)
    finally:
        c.close()
        conn.send(latencies)


def end_to_end(system: System, n: int, rate: float = E2E_RATE) -> list[float]:
    """Latencies in ms from ``produce()`` to a consumer's ``poll()`` of ``n`` records paced at ``rate``."""
    from confluent_kafka import Producer

    topic = system.topic()
    mp = multiprocessing.get_context("spawn")
    ready = mp.Event()
    receive, send = mp.Pipe(duplex=False)
    consumer = mp.Process(target=_e2e_consumer, args=(system.bootstrap, topic, n, ready, send), daemon=True)
    consumer.start()
    errors: list = []
    p = Producer({"bootstrap.servers": system.bootstrap, "linger.ms": 5, "compression.type": "lz4", "acks": "all",
                  "enable.idempotence": True, "delivery.report.only.error": True})
    pad = record_values(1)[0][E2E_HEAD.size:]

    def failed(err, _msg) -> None:
        if err is not None:
            errors.append(err)

    try:
        for partition in range(PARTITIONS):  # connected, producer id taken, the consumer fetching every partition
            p.produce(topic, E2E_HEAD.pack(0, -1) + pad, partition=partition, on_delivery=failed)
        assert p.flush(60) == 0 and not errors, errors[:3]
        deadline = time.monotonic() + 300
        while not ready.wait(0.5):
            assert consumer.is_alive() and time.monotonic() < deadline, \
                f"{system.key}: the end-to-end consumer saw no warm-up record of some partition"
        started, i = time.perf_counter(), 0
        while i < n:  # every record that is due, then a millisecond's wait (as confluent_produce paces)
            due = min(n, int((time.perf_counter() - started) * rate) + 1)
            if due <= i:
                p.poll(0.001)
                continue
            while i < due:
                p.produce(topic, E2E_HEAD.pack(time.monotonic_ns(), i) + pad, on_delivery=failed)
                i += 1
            p.poll(0)
        assert p.flush(120) == 0 and not errors, errors[:3]
        assert receive.poll(300), "the end-to-end consumer did not report"
        latencies = receive.recv()
    finally:
        consumer.join(30)
        if consumer.is_alive():
            consumer.kill()
    assert len(latencies) == n, f"the consumer polled {len(latencies)} of {n} records"
    return [ns / 1e6 for ns in latencies]


def e2e_floor(stats, rate: float) -> tuple[float, float]:
    """(p50, p99) ms below which no front on this store can deliver a record at ``rate``: the producer's
    ``linger.ms`` (5), then a segment PUT and a commit PUT (drawn from the PUT times ``stats`` measured)."""
    from bench.commit_floor import serial_commit_floor

    upload, commit = stats.service_ms["PUT"], stats.service_ms["COMMIT"]
    if not upload or not commit:
        return float("nan"), float("nan")
    floor = serial_commit_floor(upload, commit, rate)
    return 5 + floor.p50_ms, 5 + floor.p99_ms


# -- consume -----------------------------------------------------------------------------------
def fill(system: System, topic: str, n: int, values: list[bytes]) -> None:
    """``n`` keyed records (key ``key-%06d`` of ``i % KEYS``) through a producer of the produce section's
    settings: the topic the consumer drains and Spark reads."""
    from confluent_kafka import Producer

    errors: list = []
    p = Producer({"bootstrap.servers": system.bootstrap, "linger.ms": 5, "compression.type": "lz4", "acks": "all",
                  "enable.idempotence": True, "queue.buffering.max.messages": 1_000_000, "batch.size": 1_000_000,
                  "delivery.report.only.error": True,
                  "error_cb": lambda err: errors.append(err) if err.fatal() else None})
    keys = [b"key-%06d" % k for k in range(KEYS)]

    def failed(err, _msg) -> None:
        if err is not None:
            errors.append(err)

    for i in range(n):
        while True:
            try:
                p.produce(topic, values[i % len(values)], keys[i % KEYS], on_delivery=failed)
                break
            except BufferError:
                p.poll(0.01)
        if i % 10_000 == 0:
            p.poll(0)
            assert not errors, errors[:3]
    assert p.flush(600) == 0 and not errors, errors[:3]


def key_matches(n: int) -> int:
    """How many of ``n`` records :func:`fill` wrote have the key :data:`FILTER_KEY`."""
    k = int(FILTER_KEY.rsplit("-", 1)[1])
    return n // KEYS + (1 if n % KEYS > k else 0)


def drain(system: System, topic: str, n: int) -> tuple[float, float]:
    """(records/s, the server's CPU seconds per million records) of a confluent-kafka consumer draining ``topic``."""
    from bench.kafka_produce import confluent_drain

    cpu = _cpu(system.pid)
    rate = confluent_drain(system.bootstrap, topic, PARTITIONS, n)
    return rate, (_cpu(system.pid) - cpu) / n * 1e6


# -- Spark -------------------------------------------------------------------------------------
def spark_reads(ctx: BenchContext, systems: dict[str, System], topics: dict[str, str], n: int,
                classpath: str) -> dict[str, list[dict]]:
    """:func:`bench.vs_kafka_spark.measure` of the drained topics, in a Python process of its own."""
    targets = {"kafka": {"format": "kafka", "bootstrap": systems["kafka"].bootstrap, "topic": topics["kafka"],
                         "pid": systems["kafka"].pid}}
    for key in ("local",) if ctx.quick else ("local", "s3"):  # quick: the code paths, not the S3 root again
        s = systems[key]
        targets[f"lakelog@{key}"] = {"format": "lakelog", "topic": topics[key], **s.lakelog}
        targets[f"kafka@{key}"] = {"format": "kafka", "bootstrap": s.bootstrap, "topic": topics[key], "pid": s.pid}
    spec = {"classpath": classpath, "targets": targets, "repeats": ctx.repeats, "warm_up": not ctx.quick,
            "checkpoints": str(ctx.workdir / "spark-checkpoints"), "key": FILTER_KEY,
            "expected": [n, n * VALUE_BYTES, key_matches(n)]}
    path = ctx.workdir / "spark-spec.json"
    path.write_text(json.dumps(spec))
    env = {**os.environ, "PYTHONPATH": str(REPO), "SPARK_CONF_DIR": str(REPO / "conf"), "PYSPARK_PYTHON": sys.executable}
    err = ctx.workdir / "spark-stderr.log"
    with err.open("w+") as stderr:
        proc = subprocess.Popen([sys.executable, "-m", "bench.vs_kafka_spark", str(path)], cwd=REPO, env=env,
                                stdout=subprocess.PIPE, stderr=stderr, text=True)
        try:
            out, _ = proc.communicate(timeout=7200)
        except BaseException:  # a timeout, or the caller interrupted: no Spark left behind
            proc.kill()
            proc.wait()
            raise
        stderr.seek(0)
        log = stderr.read()
    if proc.returncode != 0:
        raise RuntimeError(f"the Spark reads failed ({proc.returncode}):\n{log[-6000:]}")
    for line in log.splitlines():
        if line.startswith(SPARK_PROGRESS):
            ctx.progress(line)
    return json.loads(out.strip().splitlines()[-1])


# -- the run -----------------------------------------------------------------------------------
def _paced(ctx: BenchContext, rate: float, quick: int) -> int:
    """The records of a paced run at ``rate``: :data:`PACED_S` seconds of them whatever ``--scale`` (a latency
    percentile needs the run's length, not the topic's size), ``quick`` (scaled) in quick mode."""
    return ctx.size(0, quick) if ctx.quick else int(rate * PACED_S)


def run(ctx: BenchContext, kafka=None) -> BenchResult:
    """The whole comparison; ``kafka``, a running :class:`reference.kafka.KafkaBroker` or the tests' shared
    ``kafka_reference``, replaces the broker this run would start (with the JVM settings of Kafka's start script)."""
    classpath = _references()
    values = record_values()
    n_produce = ctx.size(2_000_000, 5_000)
    n_drain = ctx.size(10_000_000, 20_000)
    n_e2e = _paced(ctx, E2E_RATE, 3_000)
    prod: dict[tuple[str, int], list[tuple[float, float]]] = {(s, l): [] for s in SYSTEMS for l in LINGERS}
    paced: dict[tuple[str, int], list[tuple[float, float, float]]] = {(s, l): [] for s in SYSTEMS for l in LINGERS}
    e2e: dict[str, list[tuple[float, float]]] = {s: [] for s in SYSTEMS}
    floors: list[tuple[float, float]] = []
    drains: dict[str, list[tuple[float, float]]] = {s: [] for s in SYSTEMS}
    half: dict[tuple[str, int], float] = {}
    with _systems(ctx, kafka) as systems:
        for linger in LINGERS:
            for i in range(ctx.repeats):
                ctx.progress(f"produce, linger.ms {linger}: repeat {i + 1}/{ctx.repeats}")
                for key in _turns(i):
                    prod[(key, linger)].append(produce_max(systems[key], n_produce, linger, values))
            slower = min(median([r for r, _ in prod[(k, linger)]]) for k in ("kafka", "local"))
            half.update({(k, linger): slower / 2 for k in ("kafka", "local")})
            half[("s3", linger)] = min(slower, median([r for r, _ in prod[("s3", linger)]])) / 2
            for i in range(ctx.repeats):
                ctx.progress(f"acknowledgement latency, linger.ms {linger}, at {half[('kafka', linger)]:,.0f} "
                             f"records/s: repeat {i + 1}/{ctx.repeats}")
                for key in _turns(i):
                    rate = half[(key, linger)]
                    paced[(key, linger)].append(produce_paced(systems[key], rate, _paced(ctx, rate, 2_000),
                                                              linger, values))
        for i in range(ctx.repeats):
            ctx.progress(f"end to end at {E2E_RATE:,} records/s: repeat {i + 1}/{ctx.repeats}")
            for key in _turns(i):
                proxy = systems[key].proxy
                if proxy is not None:
                    proxy.reset_stats()
                lat = end_to_end(systems[key], n_e2e)
                e2e[key].append((percentile(lat, 50), percentile(lat, 99)))
                if proxy is not None:
                    floors.append(e2e_floor(proxy.reset_stats(), E2E_RATE))
        topics = {}
        for key in SYSTEMS:
            ctx.progress(f"{LABELS[key]}: filling a topic of {n_drain:,} records")
            topics[key] = systems[key].topic()
            fill(systems[key], topics[key], n_drain, values)
        for i in range(ctx.repeats):
            ctx.progress(f"consumer drain: repeat {i + 1}/{ctx.repeats}")
            for key in _turns(i):
                drains[key].append(drain(systems[key], topics[key], n_drain))
        ctx.progress("Spark: format(\"kafka\") and format(\"lakelog\"), batch and AvailableNow")
        spark = spark_reads(ctx, systems, topics, n_drain, classpath)
    return report(ctx, n_produce=n_produce, n_drain=n_drain, n_e2e=n_e2e, prod=prod, paced=paced, half=half,
                  e2e=e2e, floors=floors, drains=drains, spark=spark)


def _rate(rates: dict[str, float], name: str) -> str:
    """A Spark read's records/s, or "-" for a read that did not run (a quick run leaves the S3 root's out)."""
    return f"{rates[name]:,.0f}" if name in rates else "-"


def _ratio(a: float, b: float) -> float:
    return a / b if b else float("nan")


def report(ctx: BenchContext, *, n_produce, n_drain, n_e2e, prod, paced, half, e2e, floors, drains, spark) -> BenchResult:
    """The results table (lakelog / Kafka per row), the details, the goals."""
    def med(series, i):
        return median([run[i] for run in series])

    rate = {k: med(v, 0) for k, v in prod.items()}
    cpu = {k: med(v, 1) for k, v in prod.items()}
    lat = {k: (med(v, 0), med(v, 1)) for k, v in paced.items()}
    kept = {k: med(v, 2) for k, v in paced.items()}
    e2e_med = {k: (med(v, 0), med(v, 1)) for k, v in e2e.items()}
    floor = (med(floors, 0), med(floors, 1)) if floors else (float("nan"), float("nan"))
    drain_rate = {k: med(v, 0) for k, v in drains.items()}
    drain_cpu = {k: med(v, 1) for k, v in drains.items()}
    spark_s = {k: median([r["wall_s"] for r in v]) for k, v in spark.items()}
    spark_rate = {k: n_drain / s for k, s in spark_s.items()}
    spark_cpu = {k: median([r["spark_cpu_s"] + r["server_cpu_s"] for r in v]) for k, v in spark.items()}

    goals: list[Goal] = []
    rows = []

    def row(workload: str, kafka: str, local: str, ratio: float, goal: str, met: bool | None, s3: str) -> None:
        rows.append([workload, kafka, local, f"**{ratio:.2f}x**" if ratio == ratio else "-", goal,
                     "" if met is None else ("yes" if met else "no"), s3])

    for linger in LINGERS:
        r = _ratio(rate[("local", linger)], rate[("kafka", linger)])
        met = r >= GOAL_PRODUCE
        row(f"produce, linger.ms {linger}: max records/s", f"{rate[('kafka', linger)]:,.0f}",
            f"{rate[('local', linger)]:,.0f}", r, f">= {GOAL_PRODUCE:.1f}x", met, f"{rate[('s3', linger)]:,.0f}")
        goals.append(Goal(f"produce maximum, linger.ms {linger}, local root >= {GOAL_PRODUCE:.1f}x Kafka's", met,
                          f"{r:.2f}x ({rate[('local', linger)]:,.0f} vs {rate[('kafka', linger)]:,.0f} records/s)"))
    for linger in LINGERS:
        (k50, k99), (l50, l99), (s50, s99) = (lat[(k, linger)] for k in SYSTEMS)
        r = _ratio(l99, k99)
        met = r <= GOAL_P99
        row(f"produce, linger.ms {linger}: ack p50 / p99 ms at {half[('kafka', linger)]:,.0f} records/s "
            f"(half the slower maximum)", f"{k50:.1f} / {k99:.1f}", f"{l50:.1f} / {l99:.1f}", r,
            f"p99 <= {GOAL_P99:.1f}x", met, f"{s50:.1f} / {s99:.1f} at {half[('s3', linger)]:,.0f} records/s")
        goals.append(Goal(f"p99 acknowledgement at half rate, linger.ms {linger}, <= {GOAL_P99:.1f}x Kafka's", met,
                          f"{r:.2f}x ({l99:.1f} vs {k99:.1f} ms)"))
    for linger in LINGERS:
        r = _ratio(cpu[("local", linger)], cpu[("kafka", linger)])
        met = r <= GOAL_CPU
        row(f"produce, linger.ms {linger}: server CPU s per million records", f"{cpu[('kafka', linger)]:.2f}",
            f"{cpu[('local', linger)]:.2f}", r, f"<= {GOAL_CPU:.1f}x", met, f"{cpu[('s3', linger)]:.2f}")
        goals.append(Goal(f"CPU per million records produced, linger.ms {linger}, <= {GOAL_CPU:.1f}x Kafka's", met,
                          f"{r:.2f}x ({cpu[('local', linger)]:.2f} vs {cpu[('kafka', linger)]:.2f} CPU s)"))
    r = _ratio(drain_rate["local"], drain_rate["kafka"])
    row(f"consumer drain of {n_drain:,} records: records/s", f"{drain_rate['kafka']:,.0f}",
        f"{drain_rate['local']:,.0f}", r, f">= {GOAL_DRAIN:.1f}x", r >= GOAL_DRAIN, f"{drain_rate['s3']:,.0f}")
    goals.append(Goal(f"consumer drain >= {GOAL_DRAIN:.1f}x Kafka's", r >= GOAL_DRAIN,
                      f"{r:.2f}x ({drain_rate['local']:,.0f} vs {drain_rate['kafka']:,.0f} records/s)"))
    r = _ratio(drain_cpu["local"], drain_cpu["kafka"])
    row("consumer drain: server CPU s per million records", f"{drain_cpu['kafka']:.2f}", f"{drain_cpu['local']:.2f}",
        r, "", None, f"{drain_cpu['s3']:.2f}")
    (k50, k99), (l50, l99), (s50, s99) = (e2e_med[k] for k in SYSTEMS)
    r = _ratio(l99, k99)
    row(f"end to end at {E2E_RATE:,} records/s: p50 / p99 ms, produce() to poll()", f"{k50:.1f} / {k99:.1f}",
        f"{l50:.1f} / {l99:.1f}", r, f"p99 <= {GOAL_E2E:.1f}x", r <= GOAL_E2E,
        f"{s50:.1f} / {s99:.1f} (floor {floor[0]:.1f} / {floor[1]:.1f})")
    goals.append(Goal(f"end-to-end p99 on the local root <= {GOAL_E2E:.1f}x Kafka's", r <= GOAL_E2E,
                      f"{r:.2f}x ({l99:.1f} vs {k99:.1f} ms); S3 Standard {s99:.1f} ms against a floor of "
                      f"{floor[1]:.1f} ms (linger.ms 5 + a segment PUT + a commit PUT)"))
    for kind, goal in (("batch", GOAL_SPARK_BATCH), ("stream", GOAL_SPARK_STREAM)):
        what = "Spark batch read" if kind == "batch" else "Spark readStream AvailableNow"
        base, local = (spark_rate.get(f"{name}/{kind}", float("nan")) for name in ("kafka", "lakelog@local"))
        r = _ratio(local, base)  # NaN for a read that did not run
        row(f"{what}: format(\"kafka\") of Kafka vs format(\"lakelog\"), records/s", _rate(spark_rate, f"kafka/{kind}"),
            _rate(spark_rate, f"lakelog@local/{kind}"), r, f">= {goal:.0f}x", r >= goal if r == r else None,
            _rate(spark_rate, f"lakelog@s3/{kind}"))
        if r == r:
            goals.append(Goal(f"{what}: format(\"lakelog\") >= {goal:.0f}x format(\"kafka\") of Apache Kafka",
                              r >= goal, f"{r:.2f}x ({local:,.0f} vs {base:,.0f} records/s)"))
        row(f"{what}: format(\"kafka\") of each, records/s", _rate(spark_rate, f"kafka/{kind}"),
            _rate(spark_rate, f"kafka@local/{kind}"), _ratio(spark_rate.get(f"kafka@local/{kind}", float("nan")), base),
            "", None, _rate(spark_rate, f"kafka@s3/{kind}"))
    header = ["workload", LABELS["kafka"], LABELS["local"], "lakelog / Kafka", "goal", "met", LABELS["s3"]]
    detail_rows = []
    for (key, linger), runs in sorted(paced.items(), key=lambda kv: (kv[0][1], SYSTEMS.index(kv[0][0]))):
        detail_rows.append([LABELS[key], str(linger), f"{half[(key, linger)]:,.0f}", f"{kept[(key, linger)]:,.0f}",
                            ", ".join(f"{r:,.0f}" for r, _ in prod[(key, linger)]),
                            ", ".join(f"{p99:.1f}" for _, p99, _ in runs)])
    reads = {"kafka": "format(\"kafka\") of Apache Kafka", "lakelog@local": "format(\"lakelog\"), local root",
             "kafka@local": "format(\"kafka\") of lakelog's listener, local root",
             "lakelog@s3": "format(\"lakelog\"), S3 Standard",
             "kafka@s3": "format(\"kafka\") of lakelog's listener, S3 Standard"}
    spark_rows = [[f"{reads[name.split('/')[0]]}, {'batch' if name.endswith('batch') else 'AvailableNow'}",
                   f"{spark_s[name]:.2f}",
                   f"{spark_rate[name]:,.0f}", f"{spark_cpu[name]:.1f}" if spark_cpu[name] == spark_cpu[name] else "-"]
                  for name in spark]
    markdown = "\n\n".join([
        f"Medians of {ctx.repeats} interleaved runs; 8 partitions, 100-byte values. Produce: {n_produce:,} records "
        f"a run; consume and Spark: one topic of {n_drain:,} keyed records per system; end to end: {n_e2e:,} "
        f"records at {E2E_RATE:,} a second.",
        md_table(header, rows),
        "**Produce runs** (records/s of each maximum run, and the p99 of each paced run; the S3 root paced at "
        "half its own maximum where that is lower):",
        md_table(["system", "linger.ms", "paced at records/s", "kept records/s", "maximum runs records/s",
                  "paced runs p99 ms"], detail_rows),
        "**Spark reads** (wall seconds, and CPU seconds of Spark's JVM and Python workers plus the server read "
        "through; format(\"lakelog\") reads the root itself):",
        md_table(["read", "wall s", "records/s", "CPU s"], spark_rows),
    ])
    summary = [" | ".join(r[:4]) for r in rows]
    metrics = {**{f"{k}_{l}_rate": v for (k, l), v in rate.items()},
               **{f"{k}_{l}_p99_ms": v[1] for (k, l), v in lat.items()},
               **{f"drain_{k}": v for k, v in drain_rate.items()},
               **{f"e2e_{k}_p99_ms": v[1] for k, v in e2e_med.items()},
               **{f"spark_{k}": v for k, v in spark_rate.items()}}
    return BenchResult(markdown, summary, metrics, goals)
