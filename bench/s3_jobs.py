"""The Spark scan and the maintenance jobs on object storage: local, moto, S3 Express and S3 Standard latency.

For each root the same data is written first (straight to moto, or to a local directory), then measured
through :class:`bench.s3_proxy.S3FaultProxy` with the root's latency profile:

* **Spark reads** -- ``count(*), sum(length(value))`` of a 4-partition topic on one ``local[2]`` session with
  hadoop-aws on its class path (the ``hadoop-aws`` reference set), interleaved per run: the JVM source
  (``format("lakelog")``, S3 through S3A), ``spark.read.parquet`` of the same table directory (``s3a://``), the
  Python source (``spark.lakelog.jvm.enabled=false``), and an ``AvailableNow`` stream of the JVM source from
  ``earliest`` (``select(length(value))`` into the ``noop`` sink). Each S3 root is a bucket of its own: S3A keeps
  one filesystem per bucket in a JVM, made with the first read's endpoint. S3A's input stream is Hadoop's default
  (3.5: the analytics stream, which keeps the objects it read cached in the JVM), so every read of an
  S3 root starts cold: Hadoop's cached filesystems, and with them S3A's cache, are closed before it (else a read
  measures the cache its predecessor filled, and which read that is depends on the order). The order of the
  reads also rotates per round;
* **retention** -- :func:`lakelog.maintenance.retention.run_retention` on a topic whose older half
  has expired;
* **compaction** -- :func:`lakelog.maintenance.cleaner.run_compaction` of a keyed topic (small:
  it runs on the driver).

Reported per root and operation: seconds (median of ``repeats`` runs of the reads; the jobs run once,
as they change the data), the records and MB of values the operation covers per second (the reads: the topic;
retention: the topic it trims, whose log it rewrites without reading its segments; compaction: the records it
reads), and the S3 requests of one run, by operation, with their cost per GB covered at public S3 Standard prices
(:meth:`bench.s3_proxy.RequestStats.dollars`); for the reads also per GB of segment files scanned.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import time
from pathlib import Path

import pyarrow as pa

from bench import BenchContext, BenchResult, Goal, md_table

TITLE = "Spark scan and maintenance jobs on object storage: local, moto, S3 Express and S3 Standard latency"
PARTITIONS, BATCH = 4, 10_000
READS = ("JVM source", "spark.read.parquet", "Python source", "AvailableNow (JVM)")
# Issue 58's goals on S3 Standard: the JVM source's batch scan at >= 0.9x spark.read.parquet over the same s3a://
# files and >= 3x the Python source on the same root; its AvailableNow stream at >= 0.8x that batch scan.
GOAL_PARQUET_RATIO, GOAL_PYTHON_RATIO, GOAL_STREAM_RATIO = 0.9, 3.0, 0.8
# The columns of both tables: the reads (the first, which BENCHMARKS.md's block holds), then the jobs
HEADER = ["root", "operation", "seconds", "records/s", "S3 requests (one run)", "GET / HEAD / LIST per GB",
          "request $ per GB"]


def _values(n: int, seed: int, keys: int | None = None) -> pa.Table:
    import numpy as np

    rng = np.random.default_rng(seed)
    data = rng.integers(0, 256, size=n * 100, dtype=np.uint8).tobytes()
    values = pa.array([data[i * 100:(i + 1) * 100] for i in range(n)], pa.binary())
    cols = {"value": values}
    if keys is not None:
        cols["key"] = pa.array([f"k{int(k)}".encode() for k in rng.integers(0, keys, size=n)], pa.binary())
    return pa.table(cols)


def _fill(root, records: int) -> int:
    """Topics ``scan`` (4 partitions), ``old`` (retention: half its segments expired) and ``keys``
    (cleanup.policy=compact); returns the ``now_ms`` at which half of ``old`` is expired."""
    from lakelog import Log, PartitionBatch
    from lakelog.writer.records import normalize_records

    log = Log(root)
    log.create_topic("scan", PARTITIONS)
    log.create_topic("old", PARTITIONS, {"retention.ms": "3600000"})
    log.create_topic("keys", PARTITIONS, {"cleanup.policy": "compact"})
    for i in range(max(1, records // (BATCH * PARTITIONS))):
        for topic in ("scan", "old"):
            log.append_batches(topic, [PartitionBatch(p, normalize_records(_values(BATCH, i * 10 + p)))
                                       for p in range(PARTITIONS)])
        log.append_batches("keys", [PartitionBatch(p, normalize_records(_values(BATCH // 10, i * 10 + p, 500)))
                                    for p in range(PARTITIONS)])
    return int(time.time() * 1000) + 3_600_000 + 1  # an hour on: everything written so far has expired


def _session():
    """The bench's Spark session with hadoop-aws on the driver's class path (set before the JVM starts); an active
    session (the smoke test's) must have it already."""
    from bench.spark_scan import _session as spark_session
    from reference import maven

    cp = maven.classpath("hadoop-aws")
    args = os.environ.get("PYSPARK_SUBMIT_ARGS", "pyspark-shell")
    if "--driver-class-path" not in args:
        os.environ["PYSPARK_SUBMIT_ARGS"] = f"--driver-class-path {cp} {args}"
    spark, created = spark_session()
    try:
        spark._jvm.java.lang.Class.forName("org.apache.hadoop.fs.s3a.S3AFileSystem")
    except Exception as e:  # noqa: BLE001 -- py4j's wrapper of ClassNotFoundException
        raise RuntimeError("the active Spark session has no hadoop-aws on its class path: start it with "
                           f"--driver-class-path {cp}") from e
    return spark, created


def _s3a_options(endpoint: str) -> dict[str, str]:
    return {"fs.s3a.endpoint": endpoint, "fs.s3a.path.style.access": "true", "fs.s3a.endpoint.region": "us-east-1",
            "fs.s3a.connection.ssl.enabled": "false", "fs.s3a.access.key": "bench", "fs.s3a.secret.key": "bench"}


def _reads(spark, root_uri: str, endpoint: str | None, checkpoints: Path):
    """The four reads of topic ``scan``, each a function returning (records, value bytes)."""
    storage = {} if endpoint is None else {"storage.aws_endpoint_url": endpoint, "storage.aws_access_key_id": "bench",
                                           "storage.aws_secret_access_key": "bench", "storage.aws_region": "us-east-1",
                                           "storage.aws_allow_http": "true"}
    agg = ("count(*)", "sum(length(value))")

    def lakelog(jvm: bool):
        def read():
            spark.conf.set("spark.lakelog.jvm.enabled", str(jvm).lower())
            try:
                df = spark.read.format("lakelog").options(subscribe="scan", startingOffsets="earliest", **storage) \
                    .load(root_uri)
                return tuple(df.selectExpr(*agg).collect()[0])
            finally:
                spark.conf.set("spark.lakelog.jvm.enabled", "true")
        return read

    def parquet():
        table = root_uri.replace("s3://", "s3a://") + "/topics/scan"
        reader = spark.read if endpoint is None else spark.read.options(**_s3a_options(endpoint))
        return tuple(reader.parquet(table).selectExpr(*agg).collect()[0])

    runs = iter(range(1_000_000))

    def available_now():
        seen = []
        q = (spark.readStream.format("lakelog").options(subscribe="scan", startingOffsets="earliest", **storage)
             .load(root_uri).selectExpr("length(value) as n").writeStream.format("noop")
             .trigger(availableNow=True).option("checkpointLocation", str(checkpoints / f"ck-{next(runs)}")).start())
        q.awaitTermination()
        assert "LakelogMicroBatchStream" in q.lastProgress["sources"][0]["description"], q.lastProgress
        for p in q.recentProgress:
            seen.append(p["numInputRows"])
        return sum(seen), None

    return {"JVM source": lakelog(True), "spark.read.parquet": parquet, "Python source": lakelog(False),
            "AvailableNow (JVM)": available_now}


def _row(root: str, operation: str, seconds: float, records: int, stats, gb: float) -> list[str]:
    """A table row: the operation's time and rate, its requests (none on a local root), per GB and priced."""
    if stats is None:
        return [root, operation, f"{seconds:.2f}", f"{records / seconds:,.0f}", "(local disk)", "", ""]
    per_gb = " / ".join(f"{stats.requests.get(op, 0) / gb:,.0f}" for op in ("GET", "HEAD", "LIST"))
    return [root, operation, f"{seconds:.2f}", f"{records / seconds:,.0f}", stats.describe(), per_gb,
            f"${stats.dollars() / gb:.4f}"]


def _segment_bytes(root) -> int:
    from lakelog.storage.topic_snapshot import load_snapshot

    return sum(s.bytes for s in load_snapshot(root, "scan").index)


def run(ctx: BenchContext) -> BenchResult:
    from bench.http_produce import MotoProcess
    from bench.s3_proxy import PROFILES, S3FaultProxy, bench_roots
    from lakelog.maintenance.cleaner import run_compaction
    from lakelog.maintenance.retention import run_retention
    from lakelog.storage.storage_root import StorageRoot

    records = ctx.size(800_000, 80_000)
    cleanup = contextlib.ExitStack()
    moto = MotoProcess()
    cleanup.callback(moto.close)
    cleanup.enter_context(moto.environment())
    backends = bench_roots(ctx.quick)
    read_rows, rows, metrics, goals = [], [], {}, []
    with cleanup:
        spark, created = _session()
        if created:
            cleanup.callback(spark.stop)
        for b in backends:
            if b == "local":
                root, proxy = StorageRoot.resolve(str(ctx.workdir / "s3-jobs-local")), None
                ctx.progress(f"{b}: writing {records:,} records per topic")
                now_ms = _fill(root, records)
            else:
                bucket = f"{MotoProcess.BUCKET}-{b}"  # S3A: one filesystem (and endpoint) per bucket and JVM
                moto.client().create_bucket(Bucket=bucket)
                uri = f"s3://{bucket}/jobs"
                ctx.progress(f"{b}: writing {records:,} records per topic")
                now_ms = _fill(StorageRoot.resolve(uri), records)
                proxy = S3FaultProxy(moto.endpoint, latency=PROFILES.get(b)).start()
                root = StorageRoot.resolve(uri, {"aws_endpoint_url": proxy.url})
            try:
                reads = _reads(spark, root.uri, proxy.url if proxy else None, ctx.workdir / f"s3-jobs-ck-{b}")
                timings, counts, covered = {}, {}, {}
                rounds = max(1, records // (BATCH * PARTITIONS))
                covered["retention"] = rounds * BATCH * PARTITIONS
                scanned_gb = _segment_bytes(root) / 1e9
                read_s = {name: [] for name in reads}
                read_counts = {name: None for name in reads}
                if ctx.repeats > 1:
                    for read in reads.values():  # a warm-up round, not counted: class loading, JIT, first S3 clients
                        read()
                names = list(reads)
                for i in range(ctx.repeats):  # interleaved: every read once per round, the order rotating per round
                    for name in names[i % len(names):] + names[:i % len(names)]:
                        read = reads[name]
                        if proxy is not None:
                            spark._jvm.org.apache.hadoop.fs.FileSystem.closeAll()  # a cold read: no S3A cache
                            proxy.reset_stats()
                        t = time.perf_counter()
                        n, _size = read()
                        read_s[name].append(time.perf_counter() - t)
                        if proxy is not None:
                            read_counts[name] = proxy.reset_stats()  # one run's requests (the last)
                        assert n == covered["retention"], (name, n)
                for name in reads:
                    seconds = statistics.median(read_s[name])
                    st = read_counts[name]
                    read_rows.append(_row(b, name, seconds, covered["retention"], st, scanned_gb))
                    metrics[f"{b}_{name}_s"] = seconds
                    if st:
                        metrics[f"{b}_{name}_lists"] = st.requests["LIST"]
                t = time.perf_counter()
                report = run_retention(root, ["old"], now_ms=now_ms)
                timings["retention"] = time.perf_counter() - t
                counts["retention"] = proxy.reset_stats() if proxy else None
                assert report.topics and report.topics[0].segments_removed > 0, report
                t = time.perf_counter()
                report = run_compaction(spark, root, ["keys"])
                timings["compaction"] = time.perf_counter() - t
                counts["compaction"] = proxy.reset_stats() if proxy else None
                assert report.topics and report.topics[0].records_after < report.topics[0].records_before, report
                covered["compaction"] = report.topics[0].records_before
            finally:
                if proxy is not None:
                    proxy.stop()
            for op, seconds in timings.items():
                st, gb = counts[op], covered[op] * 100 / 1e9
                rows.append(_row(b, op, seconds, covered[op], st, gb))
                metrics[f"{b}_{op.replace(' ', '_')}_s"] = seconds
            ctx.progress(f"{b}: " + ", ".join(f"{name} {metrics[f'{b}_{name}_s']:.2f} s" for name in READS)
                         + ", " + ", ".join(f"{op} {s:.2f} s" for op, s in timings.items()))
    if "s3-standard" in backends:
        m = {name: metrics[f"s3-standard_{name}_s"] for name in READS}
        jvm = m["JVM source"]
        goals = [
            Goal(f"s3-standard: JVM source batch scan >= {GOAL_PARQUET_RATIO}x spark.read.parquet",
                 m["spark.read.parquet"] / jvm >= GOAL_PARQUET_RATIO,
                 f"{m['spark.read.parquet'] / jvm:.2f}x ({jvm:.2f} s against {m['spark.read.parquet']:.2f} s)"),
            Goal(f"s3-standard: JVM source batch scan >= {GOAL_PYTHON_RATIO:.0f}x the Python source",
                 m["Python source"] / jvm >= GOAL_PYTHON_RATIO,
                 f"{m['Python source'] / jvm:.2f}x ({jvm:.2f} s against {m['Python source']:.2f} s)"),
            Goal(f"s3-standard: AvailableNow >= {GOAL_STREAM_RATIO}x the JVM batch scan",
                 jvm / m["AvailableNow (JVM)"] >= GOAL_STREAM_RATIO,
                 f"{jvm / m['AvailableNow (JVM)']:.2f}x ({m['AvailableNow (JVM)']:.2f} s)"),
        ]
    text = (f"Per topic {records:,} records of 100 random bytes over {PARTITIONS} partitions, in commits of "
            f"{BATCH:,} records per partition (the keyed topic: a tenth of that, 500 keys). Each read is the "
            f"median of {ctx.repeats} runs, the reads interleaved per run; each job runs once. Records/s are of the "
            f"records the operation covers: the topic for the reads, the topic retention trims (log-only: it reads "
            f"no segment), the records compaction reads. S3 requests: of one run of each read and of each job, "
            f"per GB of segment files for the reads (the Parquet the topic's table holds) and per GB of the values "
            f"covered for the jobs; every read of an S3 root starts cold (Hadoop's filesystems closed before it: "
            f"S3A's default input stream caches objects in the JVM). Request $: public S3 Standard prices "
            f"($0.005 per 1,000 PUT, POST or LIST; $0.0004 per 1,000 GET or HEAD), storage and transfer not "
            f"counted.\n\n"
            + md_table(HEADER, read_rows) + "\n\n" + md_table(HEADER, rows))
    return BenchResult(markdown=text, summary=[" | ".join(r[:3]) for r in read_rows + rows], metrics=metrics,
                       goals=goals)
