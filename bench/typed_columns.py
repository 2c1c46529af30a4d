"""Typed columns: produce with typing on against the same bytes without it, a Spark query on one typed field
against ``from_avro`` on the bytes, and the storage cost of keeping both.

One ``lakelog serve --kafka-listener``; the records are Avro records of 10 fields (long, string, double, int,
timestamp-millis, enum, ``[null, string]``, string, boolean, float), about 60 bytes each in Confluent's wire
format, encoded once before the clock starts.

* **produce** -- confluent-kafka's producer (``linger.ms=5``, lz4, ``acks=all``, idempotent, as the Kafka
  protocol benchmark) sends the same framed bytes to a fresh 4-partition topic with
  ``lakelog.value.schema.columns=true`` and to one without; records/s from the first ``produce()`` to the end
  of ``flush()``, the two interleaved in every repeat; the ratio of the medians;
* **Spark** -- ``SELECT sum(value_record.amount)`` through ``format("lakelog")`` on a typed topic against
  ``sum(from_avro(substring(value, 6), schema).amount)`` on an untyped one holding the same bytes (spark-avro
  from the pinned reference artifacts, ``python -m reference fetch spark-avro``), one ``local[2]`` session,
  interleaved, the median wall time of each. These two topics are filled through the library in commits of
  100,000 records (the segments a merged topic has: the produce runs' thousands of small group-commit segments
  would measure Spark's per-file cost, which segment merging removes, not the decoding);
* **storage** -- the segments' bytes per record of each topic (Parquet, the root's default codec).
"""

from __future__ import annotations

import io
import json
import os
import random
import struct
import sys
import time
from pathlib import Path

from bench import BenchContext, BenchResult, Goal, md_table, median

TITLE = "Typed columns: produce with typing vs the same bytes untyped, a typed field vs from_avro, storage"
REPO = Path(__file__).resolve().parent.parent
PARTITIONS = 4
GOAL_PRODUCE_RATIO = 0.5
GOAL_SPARK_SPEEDUP = 5.0
SCHEMA = {"type": "record", "name": "Order", "namespace": "bench", "fields": [
    {"name": "id", "type": "long"}, {"name": "customer", "type": "string"}, {"name": "amount", "type": "double"},
    {"name": "qty", "type": "int"}, {"name": "placed", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID", "SHIPPED"]}},
    {"name": "note", "type": ["null", "string"], "default": None}, {"name": "country", "type": "string"},
    {"name": "gift", "type": "boolean"}, {"name": "score", "type": "float"}]}


def avro_values(schema_id: int, n: int) -> list[bytes]:
    """``n`` distinct 10-field records, framed (magic byte, schema id) and encoded by fastavro."""
    import fastavro

    parsed = fastavro.parse_schema(SCHEMA)
    rnd = random.Random(7)
    out = []
    for i in range(n):
        b = io.BytesIO()
        b.write(b"\x00" + struct.pack(">I", schema_id))
        fastavro.schemaless_writer(b, parsed, {
            "id": i, "customer": f"cust-{rnd.randrange(50_000):05d}", "amount": rnd.randrange(100_000) / 100,
            "qty": rnd.randrange(1, 20), "placed": 1_700_000_000_000 + i * 37, "status": "PAID",
            "note": None if i % 3 else "gift wrap", "country": rnd.choice(["FR", "DE", "US", "JP"]),
            "gift": i % 5 == 0, "score": rnd.random()})
        out.append(b.getvalue())
    return out


def produce(bootstrap: str, topic: str, values: list[bytes], n: int) -> float:
    """records/s of ``n`` records (cycling through ``values``), as bench.kafka_produce's throughput run."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "compression.type": "lz4", "acks": "all",
                  "enable.idempotence": True, "queue.buffering.max.messages": 1_000_000, "batch.size": 1_000_000,
                  "delivery.report.only.error": True})
    errors = []

    def done(err, msg) -> None:
        if err is not None:
            errors.append(err)

    k = len(values)
    started = time.perf_counter()
    for i in range(n):
        while True:
            try:
                p.produce(topic, values[i % k], on_delivery=done)
                break
            except BufferError:
                p.poll(0.001)
        if i % 1000 == 0:
            p.poll(0)
    assert p.flush(300) == 0 and not errors, errors[:3]
    return n / (time.perf_counter() - started)


def _topic(url: str, configs: dict) -> str:
    from lakelog.client import Admin

    name = f"typed-{random.randrange(1 << 40):x}"
    with Admin(url, timeout=60) as admin:
        admin.create_topic(name, PARTITIONS, configs)
    return name


def _spark_with_avro(ctx: BenchContext):
    """A local[2] session with spark-avro on its class path, or (None, why)."""
    try:
        from reference import maven
    except ImportError:
        return None, "the reference artifacts resolver (reference/) is not in this checkout"
    try:
        jars = maven.classpath("spark-avro")
    except Exception as e:  # ReferenceMissing (not fetched), or a lock without the set
        return None, f"spark-avro is not available ({e}); run `.venv/bin/python -m reference fetch spark-avro`"
    os.environ.setdefault("SPARK_CONF_DIR", str(REPO / "conf"))
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").appName("lakelog-bench-typed")
             .config("spark.jars", jars.replace(os.pathsep, ",")).getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark, None


def spark_queries(ctx: BenchContext, root: str, typed: str, untyped: str, repeats: int) -> dict:
    """Median seconds of the typed query and of from_avro, and their sums (which must agree)."""
    spark, why = _spark_with_avro(ctx)
    if spark is None:
        return {"why": why}
    from pyspark.sql.avro.functions import from_avro
    from pyspark.sql import functions as F

    def read(topic):
        return (spark.read.format("lakelog").option("subscribe", topic).option("startingOffsets", "earliest")
                .load(root))

    def typed_query():
        return read(typed).select(F.sum("value_record.amount")).first()[0]

    def avro_query():
        decoded = from_avro(F.expr("substring(value, 6, length(value) - 5)"), json.dumps(SCHEMA))
        return read(untyped).select(F.sum(decoded.getField("amount"))).first()[0]

    times: dict[str, list[float]] = {"typed": [], "from_avro": []}
    sums = {}
    try:
        for name, q in (("typed", typed_query), ("from_avro", avro_query)):  # warm: JIT, class loading
            sums[name] = q()
        for i in range(repeats):
            ctx.progress(f"spark repeat {i + 1}/{repeats}")
            for name, q in (("typed", typed_query), ("from_avro", avro_query)):
                t = time.perf_counter()
                q()
                times[name].append(time.perf_counter() - t)
        plan = read(typed).select("value_record.amount")._jdf.queryExecution().executedPlan().toString()
    finally:
        spark.stop()
    return {"typed": median(times["typed"]), "from_avro": median(times["from_avro"]), "sums": sums,
            "pruned": "ReadSchema: struct<value_record:struct<amount:double>>" in plan}


def spark_topics(ctx: BenchContext, log, n: int) -> dict[str, str]:
    """A typed and an untyped topic holding the same ``n`` framed records, in commits of 100,000."""
    import pyarrow as pa

    out = {}
    for kind in ("typed", "untyped"):
        topic = f"scan-{kind}-{random.randrange(1 << 40):x}"
        log.create_topic(topic, PARTITIONS, {"lakelog.value.schema.columns": "true"} if kind == "typed" else {})
        schema_id = log.schemas.register(f"{topic}-value", "AVRO", json.dumps(SCHEMA))
        values = avro_values(schema_id, min(n, 100_000))
        done = 0
        while done < n:
            step = min(100_000, n - done)
            for p in range(PARTITIONS):
                log.append(topic, pa.table({"value": pa.array(values[:step // PARTITIONS], pa.binary())}), partition=p)
            done += step // PARTITIONS * PARTITIONS
        out[kind] = topic
    log.close()
    return out


def run(ctx: BenchContext) -> BenchResult:
    from bench.http_produce import FrontProcess, _free_port
    from lakelog import Log

    n = ctx.size(1_000_000, 5_000)
    bootstrap = f"127.0.0.1:{_free_port()}"
    root = str(ctx.workdir / "root")
    front = FrontProcess(root, ctx.workdir, args=("--kafka-listener", bootstrap))
    rates: dict[str, list[float]] = {"typed": [], "untyped": []}
    try:
        import httpx

        sr = f"{front.url}/schema-registry"
        topics = {"typed": [], "untyped": []}
        ctx.progress(f"{n:,} records a run, {ctx.repeats} runs each, interleaved")
        for i in range(ctx.repeats):
            for kind in (("typed", "untyped") if i % 2 == 0 else ("untyped", "typed")):
                configs = {"lakelog.value.schema.columns": "true"} if kind == "typed" else {}
                topic = _topic(front.url, configs)
                r = httpx.post(f"{sr}/subjects/{topic}-value/versions", json={"schema": json.dumps(SCHEMA)}, timeout=60)
                r.raise_for_status()
                values = avro_values(r.json()["id"], 4096)
                rates[kind].append(produce(bootstrap, topic, values, n))
                topics[kind].append(topic)
                ctx.progress(f"{kind}: {rates[kind][-1]:,.0f} records/s")
    finally:
        front.close()
    log = Log(root)
    per_record = {}
    for kind in ("typed", "untyped"):
        d = log.describe_topic(topics[kind][-1])
        per_record[kind] = sum(p.bytes for p in d.partitions) / max(sum(p.records for p in d.partitions), 1)
    ratio = median(rates["typed"]) / median(rates["untyped"])
    ctx.progress("Spark: a typed field against from_avro")
    scan = spark_topics(ctx, log, ctx.size(2_000_000, 5_000))
    spark = spark_queries(ctx, root, scan["typed"], scan["untyped"], ctx.repeats)
    goals = [Goal(f"produce with typed columns >= {GOAL_PRODUCE_RATIO}x the same bytes untyped", ratio >= GOAL_PRODUCE_RATIO,
                  f"{ratio:.2f}x ({median(rates['typed']):,.0f} vs {median(rates['untyped']):,.0f} records/s)")]
    rows = [["typed (lakelog.value.schema.columns)", f"{median(rates['typed']):,.0f}", f"{per_record['typed']:.1f}"],
            ["untyped, same bytes", f"{median(rates['untyped']):,.0f}", f"{per_record['untyped']:.1f}"]]
    md = [md_table(["topic", "produce records/s (median)", "segment bytes per record"], rows), ""]
    md.append(f"Typed columns cost {per_record['typed'] / per_record['untyped']:.2f}x the storage of the bytes alone "
              f"({per_record['typed'] - per_record['untyped']:.1f} more bytes a record): the records are kept twice, "
              f"as Avro and as Parquet columns.")
    if "why" in spark:
        goals.append(Goal(f"Spark: a typed field >= {GOAL_SPARK_SPEEDUP}x faster than from_avro", False,
                          f"NOT MEASURED: {spark['why']}"))
    else:
        speedup = spark["from_avro"] / spark["typed"]
        same = abs(spark["sums"]["typed"] - spark["sums"]["from_avro"]) < 1e-6 * max(1.0, abs(spark["sums"]["typed"]))
        goals.append(Goal(f"Spark: a typed field >= {GOAL_SPARK_SPEEDUP}x faster than from_avro", speedup >= GOAL_SPARK_SPEEDUP and same,
                          f"{speedup:.1f}x ({spark['typed']:.2f} s vs {spark['from_avro']:.2f} s; sums "
                          f"{'agree' if same else 'DIFFER'}; nested pruning {'on' if spark['pruned'] else 'OFF'})"))
        md += ["", md_table(["Spark query, " + f"{ctx.size(2_000_000, 5_000):,} records", "median s"],
                            [["sum(value_record.amount) via format(\"lakelog\")", f"{spark['typed']:.2f}"],
                             ["sum(from_avro(substring(value, 6)).amount)", f"{spark['from_avro']:.2f}"]])]
    return BenchResult(markdown="\n".join(md), summary=[f"produce ratio {ratio:.2f}x"], goals=goals,
                       metrics={"produce_ratio": ratio, **{f"bytes_per_record_{k}": v for k, v in per_record.items()}})
