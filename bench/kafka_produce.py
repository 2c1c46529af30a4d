"""The Kafka listener: librdkafka and kafka-python against the HTTP JSON path, in one run, plus the codec.

Side by side, each repeat running every system in turn on a fresh 8-partition topic of one
``lakelog serve --kafka-listener`` (linger.ms 5 server-side):

* **confluent-kafka producer** -- 100-byte values, null keys, ``linger.ms=5``, ``compression.type=lz4``,
  ``acks=all``, idempotent; records/s from the first ``produce()`` to the end of ``flush()``;
* **HTTP JSON produce** -- ``bench.http_produce``'s load (1,000 records per request, 8 clients);
* **kafka-python producer** -- the pure-Python reference, same settings (fewer records);
* **p99 ack at half rate** -- the confluent-kafka producer paced at half its measured rate, warmed up
  (connected, producer id taken) before the clock starts; latency per record as librdkafka measures it, from
  ``produce()`` to the acknowledgement; against this front (``linger.ms`` 5, the default) and, interleaved,
  a second one started with ``--linger-ms 1``;
* **confluent-kafka consumer** -- draining a topic from offset 0 (``assign``, no group), records/s;
* **codec** -- record batch v2 encode, decode and CRC32C of 1,000 100-byte records, in-process.

The clients share the machine's CPUs with the front (and, on a shared machine, with whatever else runs):
besides records/s, each system's CPU cost is reported -- records per CPU-second of the front process and of
the client process -- which contention on the machine does not change much.  Figures are medians of
``repeats`` runs.
"""

from __future__ import annotations

import os
import resource
import time
from typing import Callable, Sequence

from bench import BenchContext, BenchResult, Goal, md_table, median, percentile
from bench.http_produce import JSON_RECORDS, FrontProcess, _create_topic, _free_port, http_load, json_body

TITLE = "Kafka protocol: librdkafka and kafka-python vs HTTP JSON produce, consumer drain, codec"
VALUE_BYTES = 100
GOAL_PRODUCE = 500_000
GOAL_CONSUME = 1_000_000
GOAL_P99_MS = 50.0


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _own_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


class Cpu:
    """Measures one load: wall seconds, and CPU seconds of the front (``pid``) and of this (client) process."""

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def __enter__(self) -> "Cpu":
        self.t, self.server, self.client = time.perf_counter(), _cpu_seconds(self.pid), _own_cpu()
        return self

    def __exit__(self, *exc) -> None:
        self.wall = time.perf_counter() - self.t
        self.server = _cpu_seconds(self.pid) - self.server
        self.client = _own_cpu() - self.client


def _values(n: int, size: int = VALUE_BYTES) -> list[bytes]:
    base = os.urandom(size + 64).hex().encode()
    return [base[i % 64:i % 64 + size] for i in range(n)]


def confluent_produce(bootstrap: str, topic: str, n: int, *, interval_s: float = 0.0, config: dict | None = None,
                      warm_up: bool = False, on_start: Callable[[], None] | None = None,
                      value_bytes: int = VALUE_BYTES, values: Sequence[bytes] | None = None,
                      progress: list[tuple[float, int]] | None = None) -> tuple[float, list[float]]:
    """(records/s, per-record ack latencies in s); ``interval_s`` paces the sends; ``config`` overrides the
    producer's settings; ``warm_up`` starts the clock of an unpaced run only once the client is ready (as a paced
    run's always does); ``on_start`` is called when the clock starts; records carry ``value_bytes`` each;
    ``progress`` (unpaced runs) gets (CLOCK_MONOTONIC s, records acknowledged so far) from the clock's start to
    the last acknowledgement, about every 20 ms: librdkafka's queue length, no callback per record; ``values``
    replaces the records' values (taken in turn), which are otherwise slices of one random string."""
    from confluent_kafka import Producer

    # Throughput runs ask librdkafka for failed deliveries only (delivery.report.only.error): a Python callback
    # per acknowledged record costs the client about a microsecond on the two cores the front also needs.
    # Failures still reach ``done`` and fail the run.  The paced latency run takes every report.
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "compression.type": "lz4", "acks": "all",
                  "enable.idempotence": True, "queue.buffering.max.messages": 1_000_000,
                  "batch.size": 1_000_000, "delivery.report.only.error": not interval_s, **(config or {})})
    values = list(values) if values else _values(1024, value_bytes)
    latencies: list[float] = []
    errors = []

    def done(err, msg) -> None:
        if err is not None:
            errors.append(err)
        elif interval_s:
            # librdkafka's own: from produce() to the acknowledgement's arrival (not to this callback, which
            # waits for the application's next poll); one shared callback, not a closure per record, so the
            # client keeps the pace at half the producer's rate
            latencies.append(msg.latency())

    if interval_s or warm_up:
        # Connected, metadata and producer id in hand before the clock starts: the paced run measures
        # acknowledgements, not the client's start-up (about 0.5 s, which was the p99 of every paced run).  The
        # metadata must give every partition a leader first: librdkafka's partitioner spreads records over the
        # partitions that have one, so a front's answer given before another front's leases reached it would
        # send all of a producer's records to the first front's partitions
        deadline = time.monotonic() + 60
        while True:
            partitions = p.list_topics(topic, timeout=10).topics[topic].partitions
            if all(m.leader >= 0 for m in partitions.values()):
                break
            assert time.monotonic() < deadline, f"partitions of {topic} still without a leader"
            time.sleep(0.1)
        # a record to every partition: each leader has checked the producer id before the clock starts
        for partition in partitions:
            p.produce(topic, values[0], partition=partition,
                      on_delivery=lambda err, msg: errors.append(err) if err else None)
        assert p.flush(60) == 0 and not errors, errors[:3]
    if on_start is not None:
        on_start()
    started = time.perf_counter()
    if progress is not None:
        progress.append((time.monotonic(), 0))
    if interval_s:
        i = 0
        while i < n:
            # every record that is due, then a millisecond's wait (librdkafka's poll waits in whole ms): a
            # record goes out at most a millisecond late, and no busy loop takes a core from the front
            due = min(n, int((time.perf_counter() - started) / interval_s) + 1)
            if due <= i:
                p.poll(0.001)
                continue
            while i < due:
                p.produce(topic, values[i % len(values)], on_delivery=done)
                i += 1
            p.poll(0)
    else:
        for i in range(n):
            while True:
                try:
                    p.produce(topic, values[i % len(values)], on_delivery=done)
                    break
                except BufferError:
                    p.poll(0.001)
            if i % 1000 == 0:
                p.poll(0)
                if progress is not None:
                    progress.append((time.monotonic(), i + 1 - len(p)))
    if progress is not None:  # the flush in slices: len(p) is what is not acknowledged yet
        deadline = time.monotonic() + 300
        while (left := p.flush(0.02)) and time.monotonic() < deadline:
            progress.append((time.monotonic(), n - left))
        progress.append((time.monotonic(), n - left))
    assert p.flush(300) == 0 and not errors, errors[:3]
    return n / (time.perf_counter() - started), latencies


def kafka_python_produce(bootstrap: str, topic: str, n: int) -> float:
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, compression_type="lz4", acks="all",
                      batch_size=1 << 20)
    values = _values(1024)
    started = time.perf_counter()
    for i in range(n):
        p.send(topic, values[i % 1024])
    p.flush(300)
    elapsed = time.perf_counter() - started
    p.close()
    return n / elapsed


def confluent_drain(bootstrap: str, topic: str, partitions: int, n: int, **config) -> float:
    from confluent_kafka import Consumer, TopicPartition

    # librdkafka's fetch defaults: larger per-partition fetches (8 MB) overfill its local queue
    # (queued.min.messages, 100,000) and it then pauses the partition for fetch.queue.backoff.ms (1 s), which
    # would make the drain measure librdkafka's pause rather than the listener (BENCHMARKS.md, "Kafka protocol").
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"drain-{time.monotonic_ns()}",
                  "enable.auto.commit": False, **config})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got = 0
    started = time.perf_counter()
    deadline = started + 600
    while got < n and time.perf_counter() < deadline:
        got += len(c.consume(10_000, 1.0))
    elapsed = time.perf_counter() - started
    c.close()
    assert got >= n, f"drained {got} of {n}"
    return got / elapsed


def codec_rates(records: int = 1000, rounds: int = 200) -> dict[str, float]:
    import numpy as np
    import pyarrow as pa
    from crc32c import crc32c

    from kafka_front.record_batch import decode_batch, encode_columns

    values = pa.array(_values(records), pa.binary())
    kw = dict(base_offset=0, offsets=np.arange(records), timestamps=np.full(records, 1_700_000_000_000),
              keys=pa.nulls(records, pa.binary()), values=values)
    t = time.perf_counter()
    for _ in range(rounds):
        data = encode_columns(**kw)
    encode = records * rounds / (time.perf_counter() - t)
    t = time.perf_counter()
    for _ in range(rounds):
        decode_batch(data, max_decompressed_bytes=1 << 30)
    decode = records * rounds / (time.perf_counter() - t)
    big = os.urandom(1 << 20)
    t = time.perf_counter()
    for _ in range(rounds):
        crc32c(big)
    crc = rounds * len(big) / (time.perf_counter() - t) / 1e9
    return {"encode": encode, "decode": decode, "crc_gb_s": crc}


def run(ctx: BenchContext) -> BenchResult:
    n_produce = ctx.size(2_000_000, 5_000)  # a producer's start (connect, InitProducerId) amortized as in a service
    n_python = ctx.size(50_000, 1_000)
    n_drain = ctx.size(5_000_000, 5_000)
    http_requests = ctx.size(60, 3)
    partitions = 8
    kafka_port = _free_port()
    bootstrap = f"127.0.0.1:{kafka_port}"
    front = FrontProcess(str(ctx.workdir / "kafka-root"), ctx.workdir, args=("--kafka-listener", bootstrap))
    series: dict[str, list[float]] = {"confluent": [], "http": [], "kafka_python": [], "drain": [], "drain_backoff": [],
                                     "p99": [], "paced": [], "p99_linger1": [], "paced_linger1": []}
    per_cpu: dict[str, list[tuple[float, float]]] = {
        k: [] for k in ("confluent", "http", "kafka_python", "drain", "drain_backoff")}
    pid = front.proc.pid

    def measured(name: str, records: int, load) -> float:
        with Cpu(pid) as cpu:
            rate = load()
        per_cpu[name].append((records / max(cpu.server, 1e-9), records / max(cpu.client, 1e-9)))
        return rate

    try:
        def topic() -> str:
            return _create_topic(front.url)

        jbody = json_body(JSON_RECORDS)
        for i in range(ctx.repeats):
            ctx.progress(f"repeat {i + 1}/{ctx.repeats}")
            t = topic()
            series["confluent"].append(measured("confluent", n_produce,
                                                lambda: confluent_produce(bootstrap, t, n_produce)[0]))
            url = f"{front.url}/v1/topics/{topic()}/records"
            series["http"].append(measured("http", http_requests * 8 * JSON_RECORDS, lambda: http_load(
                url, jbody, "application/json", JSON_RECORDS, http_requests).records_per_s))
            t = topic()
            series["kafka_python"].append(measured("kafka_python", n_python,
                                                   lambda: kafka_python_produce(bootstrap, t, n_python)))
        half = median(series["confluent"]) / 2
        ctx.progress(f"p99 at half rate ({half:,.0f} records/s), the front's linger.ms 5 (its default) and 1")
        # The same paced load against a second front whose group commit lingers 1 ms, interleaved with the
        # first: what a front tuned for latency gives (more, smaller commits), beside the default
        fast_bootstrap = f"127.0.0.1:{_free_port()}"
        fast = FrontProcess(str(ctx.workdir / "kafka-root-linger1"), ctx.workdir, linger_ms=1,
                            args=("--kafka-listener", fast_bootstrap))
        try:
            for _ in range(ctx.repeats):
                n = ctx.size(int(half * 5), 2_000)
                fronts = {"": (bootstrap, front.url), "_linger1": (fast_bootstrap, fast.url)}
                for key, (servers, url) in fronts.items():
                    paced, lat = confluent_produce(servers, _create_topic(url), n, interval_s=1 / half)
                    series["p99" + key].append(percentile(lat, 99) * 1000)
                    series["paced" + key].append(paced)
        finally:
            fast.close()
        ctx.progress(f"drain topic: {n_drain:,} records")
        drain_topic = topic()
        done = 0
        while done < n_drain:
            step = min(n_drain - done, 1_000_000)
            confluent_produce(bootstrap, drain_topic, step)
            done += step
        for _ in range(ctx.repeats):
            series["drain"].append(measured("drain", n_drain,
                                            lambda: confluent_drain(bootstrap, drain_topic, partitions, n_drain)))
            # librdkafka pauses a partition whose local queue holds queued.min.messages for
            # fetch.queue.backoff.ms (1 s by default): a faster front fills it sooner.
            series["drain_backoff"].append(measured("drain_backoff", n_drain, lambda: confluent_drain(
                bootstrap, drain_topic, partitions, n_drain, **{"fetch.queue.backoff.ms": 10})))
    finally:
        front.close()
    codec = [codec_rates(records=10_000, rounds=ctx.size(50, 2)) for _ in range(ctx.repeats)]
    m = {k: median(v) for k, v in series.items()}
    enc, dec, crc = (median([c[k] for c in codec]) for k in ("encode", "decode", "crc_gb_s"))
    ratio = m["confluent"] / m["http"] if m["http"] else 0.0
    cpu = {k: (median([a for a, _ in v]), median([b for _, b in v])) for k, v in per_cpu.items()}

    def row(name: str, key: str, vs: str) -> list[str]:
        return [name, f"{m[key]:,.0f}", vs, f"{cpu[key][0]:,.0f}", f"{cpu[key][1]:,.0f}"]

    rows = [
        row("confluent-kafka producer (lz4, linger.ms 5, acks=all, idempotent)", "confluent", f"{ratio:.2f}x"),
        row("HTTP JSON produce (1,000/request, 8 clients)", "http", "1.00x"),
        row("kafka-python producer (pure Python reference)", "kafka_python",
            f"{m['kafka_python'] / m['http']:.2f}x" if m["http"] else "-"),
        row(f"confluent-kafka consumer drain ({n_drain:,} records, librdkafka defaults)", "drain", "-"),
        row("the same with fetch.queue.backoff.ms 10 (default 1000)", "drain_backoff", "-"),
    ]
    md = md_table(["system", "records/s (median)", "vs HTTP JSON", "records per front CPU-s",
                   "records per client CPU-s"], rows)
    md += f"\n\np99 ack latency at half the confluent-kafka rate ({m['confluent'] / 2:,.0f} records/s, the paced " \
          f"producer keeping {m['paced']:,.0f} records/s with its flush): **{m['p99']:.1f} ms** with the front's " \
          f"default `linger.ms` 5; {m['p99_linger1']:.1f} ms against a front started with `--linger-ms 1` " \
          f"(kept {m['paced_linger1']:,.0f} records/s). Per record, librdkafka's own latency " \
          f"(`Message.latency()`, from `produce()` to the acknowledgement), the producer warmed up " \
          f"(connected, producer id taken) before the clock starts.\n\n"
    md += md_table(["codec (batches of 10,000 100-byte records)", "rate"],
                   [["record batch encode", f"{enc:,.0f} records/s"], ["record batch decode (with CRC check)",
                                                                       f"{dec:,.0f} records/s"],
                    ["CRC32C", f"{crc:.1f} GB/s"]])
    goals = [
        Goal(f"confluent-kafka produce >= {GOAL_PRODUCE:,} records/s", m["confluent"] >= GOAL_PRODUCE,
             f"{m['confluent']:,.0f} records/s"),
        Goal("confluent-kafka produce >= 1.0x HTTP JSON", ratio >= 1.0, f"{ratio:.2f}x"),
        Goal(f"p99 ack <= {GOAL_P99_MS:.0f} ms at half rate (the front's default linger.ms 5)",
             m["p99"] <= GOAL_P99_MS, f"{m['p99']:.1f} ms; with --linger-ms 1: {m['p99_linger1']:.1f} ms"),
        # Judged with fetch.queue.backoff.ms lowered, as linger.ms is set for produce: with librdkafka's default
        # the client itself pauses each partition for a second whenever the front gets ahead of it.
        Goal(f"consumer drain >= {GOAL_CONSUME:,} records/s (fetch.queue.backoff.ms 10)",
             m["drain_backoff"] >= GOAL_CONSUME, f"{m['drain_backoff']:,.0f} records/s; librdkafka defaults: "
             f"{m['drain']:,.0f} records/s"),
    ]
    summary = [f"confluent-kafka produce {m['confluent']:,.0f} rec/s ({ratio:.2f}x HTTP JSON {m['http']:,.0f})",
               f"kafka-python produce {m['kafka_python']:,.0f} rec/s",
               f"p99 at half rate {m['p99']:.1f} ms (paced at {m['paced']:,.0f} rec/s; front linger.ms 1: "
               f"{m['p99_linger1']:.1f} ms)",
               f"confluent-kafka drain {m['drain']:,.0f} rec/s (fetch.queue.backoff.ms 10: {m['drain_backoff']:,.0f})",
               f"codec encode {enc:,.0f} rec/s, decode {dec:,.0f} rec/s, CRC32C {crc:.1f} GB/s"]
    summary.append("front CPU cost: " + ", ".join(f"{k} {v[0]:,.0f} rec/CPU-s" for k, v in cpu.items()))
    return BenchResult(md, summary, {**m, "ratio": ratio, "encode": enc, "decode": dec, "crc_gb_s": crc}, goals)
