"""The Spark half of :mod:`bench.vs_kafka`: the same records read by Spark's own Kafka source and by format("lakelog").

Runs in a Python process of its own (``python -m bench.vs_kafka_spark SPEC.json``), so that its Spark driver JVM
starts with Spark's Kafka source (the ``spark-kafka`` reference set) and hadoop-aws on its class path whatever
JVM the calling process may already have started. One ``local[2]`` session (``conf/spark-defaults.conf``); each
read of every target, interleaved per repetition (its order turned by one each time):

* **batch** -- ``count(*), sum(length(value)), count_if(key = <one key>)`` of a ``spark.read`` of the topic;
* **stream** -- ``readStream`` from ``earliest``, ``select(key, value)`` into Spark's ``noop`` sink with
  ``Trigger.AvailableNow``, a fresh checkpoint each run; records counted from the query's progress.

A target is ``kafka`` (Spark's ``format("kafka")``, a bootstrap server: Apache Kafka's, or a lakelog front's Kafka
listener) or ``lakelog`` (``format("lakelog")`` on a root, with ``storage.*`` options for an object store). Each
read is timed (wall seconds) with the CPU seconds of this process's JVM and Python workers and of the server it
reads through (the broker or front ``pid``, if given). Prints one JSON object, the results, as its last line.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

AGG = ("count(*) AS n", "sum(length(value)) AS value_bytes")
#: the class Spark's ServiceLoader finds for format("kafka"); its absence is what a missing set looks like
KAFKA_PROVIDER = "org.apache.spark.sql.kafka010.KafkaSourceProvider"
PROGRESS = "spark:"  # the lines of stderr that report each read's time


def query(key: str) -> tuple[str, ...]:
    """The batch read's aggregate: the count, the value bytes, and the records of one key (a filter on key)."""
    return (*AGG, f"count_if(key = CAST('{key}' AS BINARY)) AS key_matches")


def session(classpath: str):
    """A ``local[2]`` session whose driver class path holds ``classpath`` (set before its JVM starts)."""
    os.environ["PYSPARK_SUBMIT_ARGS"] = f"--driver-class-path {classpath} pyspark-shell"
    from bench.spark_scan import _session as spark_session

    spark, _ = spark_session()
    try:
        spark._jvm.java.lang.Class.forName(KAFKA_PROVIDER)
    except Exception as e:  # noqa: BLE001 -- py4j's wrapper of ClassNotFoundException
        raise RuntimeError(f"Spark's Kafka source ({KAFKA_PROVIDER}) did not load from {classpath}") from e
    return spark


def reader(spark, target: dict, stream: bool):
    """A DataFrameReader (or DataStreamReader) of ``target``'s topic from its earliest offsets."""
    r = spark.readStream if stream else spark.read
    if target["format"] == "kafka":
        return r.format("kafka").options(**{"kafka.bootstrap.servers": target["bootstrap"],
                                            "subscribe": target["topic"], "startingOffsets": "earliest"}).load()
    return (r.format("lakelog").options(subscribe=target["topic"], startingOffsets="earliest",
                                         **target.get("options", {})).load(target["root"]))


def measure(spec: dict) -> dict:
    """Every read of ``spec["targets"]`` (name -> target), ``spec["repeats"]`` times interleaved, after a warm-up
    batch read through each format when ``spec["warm_up"]``; each batch read must return ``spec["expected"]`` (n,
    value bytes, key matches) and each stream must see ``n`` records. Returns ``{"<name>/<batch|stream>": [run,
    ...]}``, each run ``{"wall_s", "spark_cpu_s", "server_cpu_s"}``."""
    from bench.kafka_produce import _cpu_seconds
    from bench.spark_scan import CpuMeter

    spark = session(spec["classpath"])
    meter = CpuMeter(spark)
    checkpoints = Path(spec["checkpoints"])
    expected = tuple(spec["expected"])
    agg = query(spec["key"])
    runs = iter(range(1_000_000))

    def batch(target):
        got = tuple(reader(spark, target, False).selectExpr(*agg).collect()[0])
        assert got == expected, f"{target}: {got} != {expected}"

    def stream(target):
        q = (reader(spark, target, True).select("key", "value").writeStream.format("noop")
             .trigger(availableNow=True).option("checkpointLocation", str(checkpoints / f"ck-{next(runs)}")).start())
        q.awaitTermination()
        seen = sum(p["numInputRows"] for p in q.recentProgress)
        assert seen == expected[0], f"{target}: the stream saw {seen} records of {expected[0]}"

    reads = [(f"{name}/{kind}", fn, target) for name, target in spec["targets"].items()
             for kind, fn in (("batch", batch), ("stream", stream))]
    out: dict[str, list[dict]] = {name: [] for name, _, _ in reads}
    if spec["warm_up"]:  # one batch read through each source: the JIT and both sources' classes loaded
        for fmt in ("kafka", "lakelog"):
            batch(next(t for t in spec["targets"].values() if t["format"] == fmt))
    for i in range(spec["repeats"]):
        turn = i % len(reads)
        for name, fn, target in reads[turn:] + reads[:turn]:
            pid = target.get("pid")
            server = _cpu_seconds(pid) if pid else 0.0
            spark_cpu, t = meter.sample(), time.perf_counter()
            fn(target)
            wall = time.perf_counter() - t
            out[name].append({"wall_s": wall, "spark_cpu_s": CpuMeter.used(spark_cpu, meter.sample()),
                              "server_cpu_s": (_cpu_seconds(pid) - server) if pid else 0.0})
            print(f"{PROGRESS} round {i + 1}/{spec['repeats']}: {name} {wall:.1f} s", file=sys.stderr, flush=True)
    spark.stop()
    return out


if __name__ == "__main__":
    result = measure(json.loads(Path(sys.argv[1]).read_text()))
    print(json.dumps(result), flush=True)
    sys.stdout.flush()
    os._exit(0)  # skip the interpreter's teardown with a JVM attached (see bench/run.py)
