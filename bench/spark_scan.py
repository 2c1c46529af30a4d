"""Spark reads: ``format("lakelog")`` versus ``spark.read.parquet`` over the same segment files.

One ``local[2]`` SparkSession (``conf/spark-defaults.conf``), one topic of 4
partitions written through ``Log.append`` (~250-byte values), then, each the
median of ``repeats`` runs, systems interleaved per run:

* **batch scan** -- ``count(*), sum(length(value)), max(offset)`` through
  ``spark.read.format("lakelog")`` and through ``spark.read.parquet`` of the
  topic's table directory (Spark's native vectorized reader over the very same
  files; it reads only the two columns the query needs, while a Python data
  source always produces every column of its schema);
* the same scan through ``format("lakelog")`` with a user schema naming only
  ``offset, value`` (the source then decodes only those columns);
* **streaming drain** -- a ``Trigger.AvailableNow`` query from ``earliest``
  running the same aggregate per micro-batch (``foreachBatch``), fresh
  checkpoint each run;
* **time to first row** -- ``limit(1).collect()`` from an offset in the middle
  of a one-partition topic of 10,000 segments, including planning (snapshot
  load, offset resolution, slicing) on a warm session.

Also measured without Spark: the source's executor-side read (``read_slices``)
of the whole topic, to split the scan's time between our Python code and
Spark's transport/conversion of Arrow batches.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

from bench import BenchContext, BenchResult, Goal, md_table, median

TITLE = "Spark reads: format(\"lakelog\") vs spark.read.parquet"
REPO = Path(__file__).resolve().parent.parent
PARTITIONS = 4
VALUE_BYTES = 250
KEY_BYTES = 16
GOAL_BATCH_RATIO = 0.8
GOAL_STREAM_RATIO = 0.7
GOAL_FIRST_ROW_S = 2.0
AGG = ("count(*) as n", "sum(length(value)) as bytes", "max(offset) as max_offset")


def _records(n: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    alphabet = np.frombuffer(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/", dtype=np.uint8)

    def binary(data: np.ndarray, width: int) -> pa.Array:
        offsets = np.arange(0, (n + 1) * width, width, dtype=np.int32)
        return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets.tobytes()),
                                                      pa.py_buffer(data.tobytes())])

    keys = np.frombuffer(b"".join(b"key-%012d" % i for i in range(n)), dtype=np.uint8)
    values = alphabet[rng.integers(0, len(alphabet), size=n * VALUE_BYTES)]
    ts = pa.array(np.full(n, int(time.time() * 1000), dtype=np.int64))
    return pa.table({"key": binary(keys, KEY_BYTES), "value": binary(values, VALUE_BYTES),
                     "timestamp": ts})


def _write_topic(log, topic: str, records: int, batch: int) -> None:
    from lakelog.writer.committer import PartitionBatch
    from lakelog.writer.records import normalize_records

    log.create_topic(topic, PARTITIONS)
    per_partition = records // PARTITIONS
    seed = 0
    for p in range(PARTITIONS):
        left = per_partition
        while left > 0:
            n = min(batch, left)
            result = log.append_batches(topic, [PartitionBatch(p, normalize_records(_records(n, seed)))])[0]
            if isinstance(result, Exception):
                raise result
            seed += 1
            left -= n


def _write_many_segments(root, topic: str, segments: int, per_segment: int) -> None:
    """A one-partition topic of ``segments`` small segment files, committed 1,000 adds at a time."""
    from deltalake import CommitProperties, DeltaTable, Transaction

    from lakelog.catalog import Catalog
    from lakelog.record_schema import FILE_SCHEMA, TABLE_SCHEMA
    from lakelog.topic_snapshot import leo_app, load_snapshot
    from lakelog.writer.segment_writer import write_segment

    Catalog(root).create(topic, 1)
    dt = DeltaTable(root.uri_for("topics", topic), storage_options=root.storage_options)
    base = _records(per_segment, 7)
    n = per_segment
    adds = []
    for i in range(segments):
        first = i * n
        table = pa.table({
            "offset": pa.array(np.arange(first, first + n, dtype=np.int64)),
            "timestamp": base.column("timestamp").cast(pa.int64()).cast(pa.timestamp("ms")).cast(
                FILE_SCHEMA.field("timestamp").type),
            "timestampType": pa.array(np.zeros(n, np.int32)),
            "key": base.column("key"), "value": base.column("value"),
            "headers": pa.nulls(n, FILE_SCHEMA.field("headers").type),
            "producerId": pa.array(np.full(n, -1, np.int64)),
            "producerEpoch": pa.array(np.full(n, -1, np.int16)),
            "sequence": pa.array(np.full(n, -1, np.int32)),
        }, schema=FILE_SCHEMA)
        adds.append(write_segment(root, topic, 0, table))
        if len(adds) == 1000 or i == segments - 1:
            dt.create_write_transaction(adds, mode="append", schema=TABLE_SCHEMA, partition_by=["partition"],
                                        commit_properties=CommitProperties(
                                            app_transactions=[Transaction(leo_app(0), first + n)]))
            dt.update_incremental()
            adds = []
    load_snapshot(root, topic).persist(root)  # what a writer leaves behind: readers load the Arrow index


def _session():
    os.environ.setdefault("SPARK_CONF_DIR", str(REPO / "conf"))
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.master("local[2]").appName("lakelog-bench").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _timed(fn) -> tuple[float, object]:
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def run(ctx: BenchContext) -> BenchResult:
    from lakelog import Log
    from lakelog.reader.read_plan import plan_reads
    from lakelog.reader.slice_reader import KAFKA_ARROW_SCHEMA, read_slices
    from lakelog.reader.source_offsets import TopicView
    from lakelog.reader.source_options import Subscription

    records = ctx.size(4_000_000, 40_000)
    segments = ctx.size(10_000, 300)
    root_dir = ctx.workdir / "root"
    log = Log(str(root_dir))
    ctx.progress(f"writing {records:,} records of {VALUE_BYTES} B to {PARTITIONS} partitions")
    _write_topic(log, "scan", records, batch=ctx.size(250_000, 5_000))
    files_bytes = sum(s.bytes for p in range(PARTITIONS) for s in log.segments("scan", p))
    ctx.progress(f"writing a topic of {segments:,} segments")
    _write_many_segments(log.root, "segments", segments, per_segment=10)
    spark = _session()
    uri = log.root.uri

    def lakelog_scan():
        return spark.read.format("lakelog").option("subscribe", "scan").load(uri).selectExpr(*AGG).collect()[0]

    def lakelog_projected():
        return (spark.read.format("lakelog").option("subscribe", "scan").schema("offset bigint, value binary")
                .load(uri).selectExpr(*AGG).collect()[0])

    def parquet_scan():
        return spark.read.parquet(str(root_dir / "topics" / "scan")).selectExpr(*AGG).collect()[0]

    drains = iter(range(10_000))

    def stream_drain():
        ck = ctx.workdir / f"ck-{next(drains)}"
        totals = []
        q = (spark.readStream.format("lakelog").option("subscribe", "scan").option("startingOffsets", "earliest")
             .load(uri).writeStream.trigger(availableNow=True).option("checkpointLocation", str(ck))
             .foreachBatch(lambda df, _: totals.append(df.selectExpr(*AGG).collect()[0])).start())
        q.awaitTermination()
        return sum(t.n for t in totals)

    middle = segments * 10 // 2

    def first_row():
        rows = (spark.read.format("lakelog").option("subscribe", "segments")
                .option("startingOffsets", json.dumps({"segments": {"0": middle}})).load(uri).limit(1).collect())
        return rows[0].offset

    def python_only():
        view = TopicView(log.root, Subscription("subscribe", topics=("scan",))).refresh()
        from lakelog.reader.read_plan import OffsetRange

        ranges = [OffsetRange("scan", p, 0, view.high_watermark(("scan", p))) for p in range(PARTITIONS)]
        n = 0
        for task in plan_reads(view.snapshots, ranges):
            for b in read_slices(log.root, task.slices, KAFKA_ARROW_SCHEMA):
                n += b.num_rows
        return n

    ctx.progress("warming up")
    expected = parquet_scan()
    for check in (lakelog_scan(), lakelog_projected()):
        assert (check.n, check.bytes, check.max_offset) == (expected.n, expected.bytes, expected.max_offset), check
    assert stream_drain() == expected.n and first_row() == middle
    times: dict[str, list[float]] = {k: [] for k in ("lakelog", "projected", "parquet", "stream", "first_row",
                                                     "python")}
    for i in range(ctx.repeats):
        ctx.progress(f"run {i + 1}/{ctx.repeats}")
        times["parquet"].append(_timed(parquet_scan)[0])
        times["lakelog"].append(_timed(lakelog_scan)[0])
        times["projected"].append(_timed(lakelog_projected)[0])
        times["stream"].append(_timed(stream_drain)[0])
        times["first_row"].append(_timed(first_row)[0])
        times["python"].append(_timed(python_only)[0])
    med = {k: median(v) for k, v in times.items()}
    rate = {k: expected.n / med[k] for k in ("lakelog", "projected", "parquet", "stream", "python")}
    batch_ratio = med["parquet"] / med["lakelog"]
    projected_ratio = med["parquet"] / med["projected"]
    stream_ratio = med["lakelog"] / med["stream"]
    tasks = spark.read.format("lakelog").option("subscribe", "scan").load(uri).rdd.getNumPartitions()
    spark.stop()
    rows = [
        ["spark.read.parquet (baseline)", f"{med['parquet']:.2f}", f"{rate['parquet'] / 1e6:.2f}", "1.00"],
        ["format(\"lakelog\")", f"{med['lakelog']:.2f}", f"{rate['lakelog'] / 1e6:.2f}", f"{batch_ratio:.2f}"],
        ["format(\"lakelog\"), schema offset+value", f"{med['projected']:.2f}", f"{rate['projected'] / 1e6:.2f}",
         f"{projected_ratio:.2f}"],
        ["readStream AvailableNow drain", f"{med['stream']:.2f}", f"{rate['stream'] / 1e6:.2f}",
         f"{med['parquet'] / med['stream']:.2f}"],
        ["read_slices alone (no Spark)", f"{med['python']:.2f}", f"{rate['python'] / 1e6:.2f}", ""],
    ]
    markdown = "\n".join([
        f"{expected.n:,} records (~{VALUE_BYTES} B values) in {PARTITIONS} partitions, "
        f"{files_bytes / 2**20:.0f} MiB of segment files; `format(\"lakelog\")` planned {tasks} tasks. "
        f"Query: `{', '.join(AGG)}`. Medians of {ctx.repeats} runs.",
        "",
        md_table(["read", "seconds", "M records/s", "vs parquet"], rows),
        "",
        f"Time to first row from offset {middle:,} of a topic with {segments:,} segments "
        f"(`limit(1).collect()`, planning included): **{med['first_row']:.2f} s** "
        f"(runs: {', '.join(f'{t:.2f}' for t in times['first_row'])}).",
    ])
    goals = [
        Goal(f"batch scan >= {GOAL_BATCH_RATIO}x spark.read.parquet", batch_ratio >= GOAL_BATCH_RATIO,
             f"{batch_ratio:.2f}x ({rate['lakelog'] / 1e6:.2f} vs {rate['parquet'] / 1e6:.2f} M records/s)"),
        Goal(f"streaming drain >= {GOAL_STREAM_RATIO}x batch scan", stream_ratio >= GOAL_STREAM_RATIO,
             f"{stream_ratio:.2f}x"),
        Goal(f"first row from mid-topic <= {GOAL_FIRST_ROW_S} s ({segments:,} segments)",
             med["first_row"] <= GOAL_FIRST_ROW_S, f"{med['first_row']:.2f} s"),
    ]
    summary = [f"{k}: {med[k]:.2f} s" for k in med] + [f"batch ratio {batch_ratio:.2f}, projected "
                                                        f"{projected_ratio:.2f}, stream/batch {stream_ratio:.2f}"]
    metrics = {**{f"{k}_s": v for k, v in med.items()}, "batch_ratio": batch_ratio,
               "projected_ratio": projected_ratio, "stream_ratio": stream_ratio}
    return BenchResult(markdown=markdown, summary=summary, metrics=metrics, goals=goals)
