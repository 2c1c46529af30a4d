"""Transactions: the transactional producer against the idempotent one, and read_committed against
read_uncommitted in the consumer and in the Spark scan -- side by side in one run.

One ``lakelog serve --kafka-listener``; each repeat runs every system in turn on a fresh 8-partition topic:

* **idempotent producer** -- confluent-kafka, 100-byte values, ``linger.ms=5``, lz4, ``acks=all``
  (``bench.kafka_produce``'s load); records/s from the first ``produce()`` to the end of ``flush()``;
* **transactional producer** -- the same settings plus a ``transactional.id``, committing every 100 ms
  (``begin`` -> produce for 100 ms -> ``commit``); records/s from the first ``produce()`` to the last commit;
  for both producers, the CPU time per record of the front process and of the client (this process);
* **consumer drain** -- confluent-kafka draining the transactional topic from offset 0 at each
  ``isolation.level`` (``fetch.queue.backoff.ms`` 10, as in ``bench.kafka_produce``), the order flipped
  every repeat;
* **Spark scan** -- ``format("lakelog")`` counting the topic and summing its value lengths at each
  ``kafka.isolation.level``, on one ``local[2]`` session: five scans at each level per repeat, alternating,
  the order flipped every repeat.

Figures are medians of ``repeats`` interleaved runs.
"""

from __future__ import annotations

import time

from bench import BenchContext, BenchResult, Goal, md_table, median
from bench.http_produce import FrontProcess, _create_topic, _free_port
from bench.kafka_produce import Cpu, _values, confluent_drain, confluent_produce

TITLE = "Transactions: transactional vs idempotent producer, read_committed vs read_uncommitted"
PARTITIONS = 8
TRANSACTION_MS = 100
GOAL_PRODUCE_RATIO = 0.8
GOAL_READ_RATIO = 0.9
SCANS = 5  # per level and repeat: one scan of the topic takes a few tenths of a second


def transactional_produce(bootstrap: str, topic: str, n: int, transaction_ms: float = TRANSACTION_MS) -> tuple[float, int]:
    """(records/s, transactions) producing ``n`` records in transactions of ``transaction_ms``."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "compression.type": "lz4", "acks": "all",
                  "transactional.id": f"bench-{time.monotonic_ns()}", "queue.buffering.max.messages": 1_000_000,
                  "batch.size": 1_000_000, "delivery.report.only.error": True})
    p.init_transactions(60)
    values = _values(1024)
    errors: list = []

    def done(err, _) -> None:  # one function for every record, as bench.kafka_produce's idempotent load
        if err is not None:
            errors.append(err)

    sent = transactions = 0
    started = time.perf_counter()
    while sent < n:
        p.begin_transaction()
        end = time.perf_counter() + transaction_ms / 1000
        while sent < n:
            try:
                p.produce(topic, values[sent % 1024], on_delivery=done)
                sent += 1
            except BufferError:
                p.poll(0.001)
            if sent % 1000 == 0:  # the clock and the poll every 1,000 records: the loop's own cost stays small
                p.poll(0)
                if time.perf_counter() >= end:
                    break
        p.commit_transaction(120)  # flushes the transaction's records first
        transactions += 1
    assert not errors, errors[:3]
    return n / (time.perf_counter() - started), transactions


def spark_scan(spark, root_uri: str, topic: str, isolation: str) -> float:
    """Seconds to count the topic and sum its value lengths at ``isolation``."""
    from pyspark.sql import functions as F

    started = time.perf_counter()
    df = (spark.read.format("lakelog").option("subscribe", topic).option("kafka.isolation.level", isolation)
          .load(root_uri))
    df.agg(F.count("*"), F.sum(F.length("value"))).collect()
    return time.perf_counter() - started


def run(ctx: BenchContext) -> BenchResult:
    from bench.spark_scan import _session

    n = ctx.size(1_000_000, 5_000)
    kafka_port = _free_port()
    bootstrap = f"127.0.0.1:{kafka_port}"
    root = ctx.workdir / "txn-root"
    front = FrontProcess(str(root), ctx.workdir, args=("--kafka-listener", bootstrap))
    series: dict[str, list] = {k: [] for k in ("idempotent", "transactional", "transactions", "committed",
                                               "uncommitted", "spark_committed", "spark_uncommitted",
                                               "idempotent_cpu", "transactional_cpu")}
    try:
        spark, created = _session()
        for i in range(ctx.repeats):
            ctx.progress(f"repeat {i + 1}/{ctx.repeats}")
            topic = _create_topic(front.url)
            with Cpu(front.proc.pid) as cpu:
                series["idempotent"].append(confluent_produce(bootstrap, topic, n)[0])
            series["idempotent_cpu"].append((cpu.server * 1e6 / n, cpu.client * 1e6 / n))
            txn_topic = _create_topic(front.url)
            with Cpu(front.proc.pid) as cpu:
                rate, count = transactional_produce(bootstrap, txn_topic, n)
            series["transactional_cpu"].append((cpu.server * 1e6 / n, cpu.client * 1e6 / n))
            series["transactional"].append(rate)
            series["transactions"].append(count)
            order = ["read_committed", "read_uncommitted"][::1 if i % 2 == 0 else -1]  # neither always goes first
            for level in order:
                series[level.split("_")[1]].append(confluent_drain(
                    bootstrap, txn_topic, PARTITIONS, n, **{"isolation.level": level, "fetch.queue.backoff.ms": 10}))
            spark_scan(spark, root.as_uri(), txn_topic, "read_committed")  # warm: JIT, file listing caches
            scans: dict[str, list[float]] = {level: [] for level in order}
            for _ in range(SCANS):
                for level in order:
                    scans[level].append(spark_scan(spark, root.as_uri(), txn_topic, level))
            series["spark_committed"].append(n / median(scans["read_committed"]))
            series["spark_uncommitted"].append(n / median(scans["read_uncommitted"]))
        if created:
            spark.stop()
    finally:
        front.close()
    # CPU-µs per record of the front process and of this (client) process, as bench.kafka_produce reports them
    cpu = {}
    for k in ("idempotent", "transactional"):
        samples = series.pop(f"{k}_cpu")
        cpu[k] = (median([front for front, _ in samples]), median([client for _, client in samples]))
    m = {k: median(v) for k, v in series.items()}
    produce_ratio = m["transactional"] / m["idempotent"]
    consume_ratio = m["committed"] / m["uncommitted"]
    spark_ratio = m["spark_committed"] / m["spark_uncommitted"]
    rows = [
        ["idempotent producer (confluent-kafka, lz4, linger.ms 5, acks=all)", f"{m['idempotent']:,.0f}", "1.00x"],
        [f"transactional producer, {TRANSACTION_MS} ms transactions ({m['transactions']:.0f} per run)",
         f"{m['transactional']:,.0f}", f"{produce_ratio:.2f}x"],
        ["consumer drain, isolation.level=read_uncommitted", f"{m['uncommitted']:,.0f}", "1.00x"],
        ["consumer drain, isolation.level=read_committed", f"{m['committed']:,.0f}", f"{consume_ratio:.2f}x"],
        ["Spark scan, kafka.isolation.level=read_uncommitted", f"{m['spark_uncommitted']:,.0f}", "1.00x"],
        ["Spark scan, kafka.isolation.level=read_committed", f"{m['spark_committed']:,.0f}", f"{spark_ratio:.2f}x"],
    ]
    md = md_table(["system", "records/s (median)", "ratio"], rows)
    md += "\n\n" + md_table(["producer", "front CPU-µs per record", "client CPU-µs per record"],
                              [[k, f"{cpu[k][0]:.2f}", f"{cpu[k][1]:.2f}"] for k in ("idempotent", "transactional")])
    md += (f"\n\n{n:,} records of 100 bytes per run, {PARTITIONS} partitions, {ctx.repeats} interleaved repeats. "
           "A transaction's records are held by the coordinator and appended at commit (docs/architecture.md, "
           "\"Transactions\"), so both isolation levels read the same files the same way.\n")
    goals = [
        Goal(f"transactional producer at {TRANSACTION_MS} ms transactions >= {GOAL_PRODUCE_RATIO}x the idempotent one",
             produce_ratio >= GOAL_PRODUCE_RATIO, f"{produce_ratio:.2f}x"),
        Goal(f"read_committed consumer >= {GOAL_READ_RATIO}x read_uncommitted", consume_ratio >= GOAL_READ_RATIO,
             f"{consume_ratio:.2f}x"),
        Goal(f"read_committed Spark scan >= {GOAL_READ_RATIO}x read_uncommitted", spark_ratio >= GOAL_READ_RATIO,
             f"{spark_ratio:.2f}x"),
    ]
    summary = [f"transactional {m['transactional']:,.0f} rec/s = {produce_ratio:.2f}x idempotent",
               f"read_committed consumer {consume_ratio:.2f}x, Spark {spark_ratio:.2f}x"]
    return BenchResult(md, summary, {k: float(v) for k, v in m.items()}, goals)
