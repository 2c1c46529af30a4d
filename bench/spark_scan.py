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
* **streaming drain** -- ``Trigger.AvailableNow`` queries from ``earliest``
  (the JVM source's ``LakelogMicroBatchStream``, pruned to the columns the
  query reads by the jar's StreamColumnPruning rule), fresh checkpoint each
  run: ``select("offset", "value")`` into Spark's ``noop`` sink (the goal's
  row), and, for comparison, the same aggregate as a streaming query
  (complete mode, memory sink) and the aggregate per micro-batch in
  ``foreachBatch`` of the whole stream;
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

from bench import BenchContext, BenchResult, Goal, fill_partitions, md_table, median

TITLE = "Spark reads: format(\"lakelog\") vs spark.read.parquet"
REPO = Path(__file__).resolve().parent.parent
PARTITIONS = 4
VALUE_BYTES = 250
KEY_BYTES = 16
# The JVM source's goals: batch and projected scans at Parquet speed, the last 1 % of a topic's
# offsets in at most 5 % of its bytes, an AvailableNow drain at 0.8x the batch scan.
GOAL_BATCH_RATIO = 0.9
GOAL_PROJECTED_RATIO = 0.9
GOAL_TAIL_BYTES_SHARE = 0.05
GOAL_STREAM_RATIO = 0.8
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
    log.create_topic(topic, PARTITIONS)
    fill_partitions(log, topic, PARTITIONS, records // PARTITIONS, batch, _records)


def _write_many_segments(root, topic: str, segments: int, per_segment: int) -> None:
    """A one-partition topic of ``segments`` small segment files, committed 1,000 adds at a time."""
    from deltalake import CommitProperties, DeltaTable, Transaction

    from lakelog.storage.catalog import Catalog
    from lakelog.storage.record_schema import FILE_SCHEMA, TABLE_SCHEMA
    from lakelog.storage.topic_snapshot import leo_app, load_snapshot
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


def _bytes_at_or_after(path: str, start: dict[int, int]) -> int:
    """Compressed bytes of the row groups of segment ``path`` whose offsets reach ``start`` of its partition:
    what a reader pushing ``offset >= start`` down to Parquet reads of the file."""
    import pyarrow.parquet as pq

    partition = int(path.split("partition=")[1].split("/")[0])
    meta = pq.ParquetFile(path).metadata
    col = meta.schema.names.index("offset")
    total = 0
    for i in range(meta.num_row_groups):
        rg = meta.row_group(i)
        stats = rg.column(col).statistics
        if stats is None or not stats.has_min_max or stats.max >= start[partition]:
            total += sum(rg.column(c).total_compressed_size for c in range(rg.num_columns))
    return total


def _session():
    """(session, whether this call created it): reuse an active session (the tests' smoke run), else local[2]."""
    os.environ.setdefault("SPARK_CONF_DIR", str(REPO / "conf"))
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active, False
    spark = SparkSession.builder.master("local[2]").appName("lakelog-bench").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark, True


_TICK = os.sysconf("SC_CLK_TCK")


def _workers_cpu_s(root_pid: int) -> dict[int, float]:
    """CPU seconds (own user + system) of ``root_pid`` and each live descendant: the JVM and its Python workers."""
    stats: dict[int, list[str]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    stats[int(name)] = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
    children: dict[int, list[int]] = {}
    for pid, fields in stats.items():
        children.setdefault(int(fields[1]), []).append(pid)
    out, stack = {}, [root_pid]
    while stack:
        pid = stack.pop()
        out[pid] = (int(stats[pid][11]) + int(stats[pid][12])) / _TICK
        stack.extend(children.get(pid, []))
    return out


class CpuMeter:
    """CPU seconds of the Spark JVM (all threads) plus its live Python workers.

    Wall time on a shared 2-core machine mostly measures the neighbours; CPU time is the cost of the read
    itself.  Short-lived processes (the per-query planner) are missed, so this slightly undercounts the
    Python data source.
    """

    def __init__(self, spark) -> None:
        self._pid = spark._jvm.java.lang.ProcessHandle.current().pid()

    def sample(self) -> dict[int, float]:
        return _workers_cpu_s(self._pid)

    @staticmethod
    def used(before: dict[int, float], after: dict[int, float]) -> float:
        return sum(max(0.0, t - before.get(pid, 0.0)) for pid, t in after.items())

    def jvm_used(self, before: dict[int, float], after: dict[int, float]) -> float:
        return max(0.0, after.get(self._pid, 0.0) - before.get(self._pid, 0.0))


def _timed(fn, meter: CpuMeter) -> tuple[float, float, float]:
    """(wall seconds, CPU seconds, of which the JVM's) of ``fn()``."""
    c, t = meter.sample(), time.perf_counter()
    fn()
    wall = time.perf_counter() - t
    after = meter.sample()
    return wall, CpuMeter.used(c, after), meter.jvm_used(c, after)


def run(ctx: BenchContext) -> BenchResult:
    from lakelog import Log
    from lakelog.spark.read_plan import plan_reads
    from lakelog.spark.slice_reader import KAFKA_ARROW_SCHEMA, read_slices
    from lakelog.spark.source_offsets import TopicView
    from lakelog.spark.source_options import Subscription

    records = ctx.size(4_000_000, 40_000)
    segments = ctx.size(10_000, 300)
    root_dir = ctx.workdir / "root"
    log = Log(str(root_dir))
    ctx.progress(f"writing {records:,} records of {VALUE_BYTES} B to {PARTITIONS} partitions")
    _write_topic(log, "scan", records, batch=ctx.size(250_000, 5_000))
    files_bytes = sum(s.bytes for p in range(PARTITIONS) for s in log.segments("scan", p))
    ctx.progress(f"writing a topic of {segments:,} segments")
    _write_many_segments(log.root, "segments", segments, per_segment=10)
    spark, own_session = _session()
    uri = log.root.uri

    def lakelog_scan():
        return spark.read.format("lakelog").option("subscribe", "scan").load(uri).selectExpr(*AGG).collect()[0]

    def lakelog_projected():
        return (spark.read.format("lakelog").option("subscribe", "scan").schema("offset bigint, value binary")
                .load(uri).selectExpr(*AGG).collect()[0])

    def parquet_scan():
        return spark.read.parquet(str(root_dir / "topics" / "scan")).selectExpr(*AGG).collect()[0]

    def python_source_scan():  # the Python data source (the fallback path), for comparison
        spark.conf.set("spark.lakelog.jvm.enabled", "false")
        try:
            return lakelog_scan()
        finally:
            spark.conf.set("spark.lakelog.jvm.enabled", "true")

    hw_total = sum(log.snapshot("scan").high_watermark(p) for p in range(PARTITIONS))
    tail_from = {p: int(log.snapshot("scan").high_watermark(p) * 0.99) for p in range(PARTITIONS)}

    def tail_df():
        return (spark.read.format("lakelog").option("subscribe", "scan")
                .option("startingOffsets", json.dumps({"scan": {str(p): o for p, o in tail_from.items()}})).load(uri))

    def tail_scan():
        return tail_df().selectExpr(*AGG).collect()[0]

    drains = iter(range(10_000))

    def stream_df():
        return spark.readStream.format("lakelog").option("subscribe", "scan").option("startingOffsets", "earliest").load(uri)

    def stream_drain(df, sink):
        """Drain ``df`` with Trigger.AvailableNow into ``sink``: "noop" (Spark's sink for measuring reads:
        every row produced, nothing kept), "memory" (complete mode: an aggregate, queried as ``drain_<n>``),
        or a function for foreachBatch. Returns the finished query and its memory table's name."""
        n = next(drains)
        writer = df.writeStream.trigger(availableNow=True).option("checkpointLocation", str(ctx.workdir / f"ck-{n}"))
        if sink == "noop":
            writer = writer.format("noop")
        elif sink == "memory":
            writer = writer.outputMode("complete").format("memory").queryName(f"drain_{n}")
        else:
            writer = writer.foreachBatch(sink)
        q = writer.start()
        q.awaitTermination()
        assert "LakelogMicroBatchStream" in q.lastProgress["sources"][0]["description"]  # the JVM stream read
        return q, f"drain_{n}"

    def stream_aggregate():  # the batch scan's query, as a stream
        return spark.sql(f"select * from {stream_drain(stream_df().selectExpr(*AGG), 'memory')[1]}").collect()[0].n

    def foreach_batch(df):
        totals = []
        stream_drain(df, lambda batch, _: totals.append(batch.selectExpr(*AGG).collect()[0]))
        return sum(t.n for t in totals)

    middle = segments * 10 // 2

    def first_row():
        rows = (spark.read.format("lakelog").option("subscribe", "segments")
                .option("startingOffsets", json.dumps({"segments": {"0": middle}})).load(uri).limit(1).collect())
        return rows[0].offset

    def python_only():
        view = TopicView(log.root, Subscription("subscribe", topics=("scan",))).refresh()
        from lakelog.spark.read_plan import OffsetRange

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
    def stream_noop():  # the stream of the two columns the aggregate reads, every record through the query
        q, _ = stream_drain(stream_df().select("offset", "value"), "noop")
        return sum(p["numInputRows"] for p in q.recentProgress)

    def stream_whole():  # foreachBatch of the whole stream: every column is read and handed over as rows
        return foreach_batch(stream_df())

    # Spark reads files in its own order (largest split first): limit(1) returns some offset >= middle
    assert stream_noop() == stream_aggregate() == stream_whole() == expected.n and first_row() >= middle
    meter = CpuMeter(spark)
    systems = {"parquet": parquet_scan, "lakelog": lakelog_scan, "projected": lakelog_projected,
               "stream": stream_noop, "stream_aggregate": stream_aggregate, "stream_whole": stream_whole, "first_row": first_row, "pysource": python_source_scan, "tail": tail_scan}
    times: dict[str, list[float]] = {k: [] for k in (*systems, "python")}
    cpu: dict[str, list[float]] = {k: [] for k in systems}
    jvm: dict[str, list[float]] = {k: [] for k in systems}
    for i in range(ctx.repeats):
        ctx.progress(f"run {i + 1}/{ctx.repeats}")
        for name, fn in systems.items():
            wall, used, in_jvm = _timed(fn, meter)
            times[name].append(wall)
            cpu[name].append(used)
            jvm[name].append(in_jvm)
        t = time.process_time()
        python_only()
        times["python"].append(time.process_time() - t)
    med = {k: median(v) for k, v in times.items()}
    cpu_med = {k: median(v) for k, v in cpu.items()}
    jvm_med = {k: median(v) for k, v in jvm.items()}
    rate = {k: expected.n / med[k] for k in ("lakelog", "projected", "parquet", "stream", "stream_aggregate", "stream_whole",
                                             "python", "pysource", "tail")}
    tail_files = [f.replace("file://", "").replace("file:", "") for f in tail_df().inputFiles()]
    tail_file_bytes = sum(os.path.getsize(f) for f in tail_files)
    tail_bytes = sum(_bytes_at_or_after(f, tail_from) for f in tail_files)
    batch_ratio = med["parquet"] / med["lakelog"]
    projected_ratio = med["parquet"] / med["projected"]
    stream_ratio = med["lakelog"] / med["stream"]
    cpu_ratio = {k: cpu_med["parquet"] / cpu_med[k] for k in ("lakelog", "projected", "stream")}
    tasks = spark.read.format("lakelog").option("subscribe", "scan").load(uri).rdd.getNumPartitions()
    if own_session:
        spark.stop()
    def row(label: str, k: str) -> list[str]:
        return [label, f"{med[k]:.2f}", f"{rate[k] / 1e6:.2f}", f"{med['parquet'] / med[k]:.2f}", f"{cpu_med[k]:.2f}",
                f"{jvm_med[k]:.2f}", f"{cpu_med[k] - jvm_med[k]:.2f}", f"{cpu_med['parquet'] / cpu_med[k]:.2f}"]

    rows = [
        row("spark.read.parquet (baseline)", "parquet"),
        row("format(\"lakelog\")", "lakelog"),
        row("format(\"lakelog\"), schema offset+value", "projected"),
        row("readStream AvailableNow drain: select(offset, value) to the noop sink", "stream"),
        row("readStream AvailableNow drain: the same aggregate as a streaming query", "stream_aggregate"),
        row("readStream AvailableNow drain: the whole stream to foreachBatch", "stream_whole"),
        row("format(\"lakelog\") on the Python data source", "pysource"),
        row("format(\"lakelog\") last 1% of offsets (startingOffsets)", "tail"),
        ["read_slices alone (no Spark; CPU s)", f"{med['python']:.2f}", f"{rate['python'] / 1e6:.2f}", "", "", "",
         "", ""],
    ]
    markdown = "\n".join([
        f"{expected.n:,} records (~{VALUE_BYTES} B values) in {PARTITIONS} partitions, "
        f"{files_bytes / 2**20:.0f} MiB of segment files; `format(\"lakelog\")` planned {tasks} tasks. "
        f"Query: `{', '.join(AGG)}`. Medians of {ctx.repeats} runs.",
        "",
        md_table(["read", "wall s", "M records/s", "vs parquet", "CPU s", "of which JVM", "of which Python workers",
                  "vs parquet (CPU)"], rows),
        "",
        f"Last 1% of offsets ({hw_total - sum(tail_from.values()):,} records): the JVM source plans "
        f"{len(tail_files)} files of {tail_file_bytes / 2**20:.1f} MiB and reads of them the row groups that "
        f"hold offsets in the range (Parquet skips the others by their `offset` statistics): "
        f"{tail_bytes / 2**20:.1f} MiB, {100 * tail_bytes / files_bytes:.1f}% of the topic's bytes.",
        "",
        f"Time to first row from offset {middle:,} of a topic with {segments:,} segments "
        f"(`limit(1).collect()`, planning included): **{med['first_row']:.2f} s** "
        f"(runs: {', '.join(f'{t:.2f}' for t in times['first_row'])}).",
        "",
        "**Where the time goes.** On 2 cores both scans keep both cores busy, so the wall ratio follows the CPU "
        f"ratio. Spark's Parquet scan costs {cpu_med['parquet']:.2f} CPU-s, all in the JVM; `format(\"lakelog\")` "
        f"(the JVM source: Spark's vectorized Parquet reader over the live segments, trimmed to the offsets) "
        f"{cpu_med['lakelog']:.2f} CPU-s, of which {cpu_med['lakelog'] - jvm_med['lakelog']:.2f} in Python "
        f"workers. The Python data source, the fallback, spends {cpu_med['pysource']:.2f} CPU-s "
        f"({cpu_med['pysource'] - jvm_med['pysource']:.2f} in its Python workers). The AvailableNow drain runs on "
        "the JVM source too (LakelogMicroBatchStream, reading with the same Parquet reader); Spark prunes no "
        "columns of a streaming source, so the jar's optimizer rule (StreamColumnPruning) cuts the stream to the "
        "two columns the query reads. Drained into Spark's `noop` sink (every record through the query, nothing "
        f"kept) the stream costs {cpu_med['stream']:.2f} CPU-s ({cpu_med['lakelog'] / cpu_med['stream']:.2f}x "
        "the batch scan's CPU). The same aggregate as a streaming query (complete mode, memory sink) costs "
        f"{cpu_med['stream_aggregate']:.2f} CPU-s: a stateful query adds planning and its state store to the "
        "micro-batch, a fixed cost whatever the topic's size. `foreachBatch` of the whole "
        "stream reads every column and hands the micro-batch over as rows before the aggregate runs: "
        f"{cpu_med['stream_whole']:.2f} CPU-s. The "
        "CPU columns (JVM threads + live Python workers, from /proc) are steadier than the wall times on this "
        "shared machine.",
    ])
    goals = [
        Goal(f"batch scan >= {GOAL_BATCH_RATIO}x spark.read.parquet", batch_ratio >= GOAL_BATCH_RATIO,
             f"{batch_ratio:.2f}x ({rate['lakelog'] / 1e6:.2f} vs {rate['parquet'] / 1e6:.2f} M records/s)"),
        Goal(f"projected scan (schema offset+value) >= {GOAL_PROJECTED_RATIO}x the same query through "
             "spark.read.parquet", projected_ratio >= GOAL_PROJECTED_RATIO, f"{projected_ratio:.2f}x"),
        Goal(f"last 1% of offsets reads <= {GOAL_TAIL_BYTES_SHARE:.0%} of the topic's bytes",
             tail_bytes <= GOAL_TAIL_BYTES_SHARE * files_bytes,
             f"{100 * tail_bytes / files_bytes:.1f}% (row groups holding offsets in the range, of "
             f"{100 * tail_file_bytes / files_bytes:.1f}% in the files planned)"),
        Goal(f"AvailableNow drain (select offset, value; noop sink) >= {GOAL_STREAM_RATIO}x batch scan", stream_ratio >= GOAL_STREAM_RATIO,
             f"{stream_ratio:.2f}x"),
        Goal(f"first row from mid-topic <= {GOAL_FIRST_ROW_S} s ({segments:,} segments)",
             med["first_row"] <= GOAL_FIRST_ROW_S, f"{med['first_row']:.2f} s"),
    ]
    summary = [f"{k}: {med[k]:.2f} s wall, {cpu_med.get(k, float('nan')):.2f} s CPU" for k in med] + [
        f"wall ratios: batch {batch_ratio:.2f}, projected {projected_ratio:.2f}, stream/batch {stream_ratio:.2f}; "
        f"CPU ratios: batch {cpu_ratio['lakelog']:.2f}, projected {cpu_ratio['projected']:.2f}, stream/batch "
        f"{cpu_med['lakelog'] / cpu_med['stream']:.2f}"]
    metrics = {**{f"{k}_s": v for k, v in med.items()}, **{f"{k}_cpu_s": v for k, v in cpu_med.items()},
               "batch_ratio": batch_ratio, "projected_ratio": projected_ratio, "stream_ratio": stream_ratio,
               "batch_cpu_ratio": cpu_ratio["lakelog"]}
    return BenchResult(markdown=markdown, summary=summary, metrics=metrics, goals=goals)
