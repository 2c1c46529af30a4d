"""The Spark scan and the maintenance jobs on object storage: local, moto, S3 Express and S3 Standard latency.

For each root the same data is written first (straight to moto, or to a local directory), then measured
through :class:`bench.s3_proxy.S3FaultProxy` with the root's latency profile:

* **Spark scan** -- ``count(*), sum(length(value))`` of a 4-partition topic through
  ``spark.read.format("lakelog")`` on one ``local[2]`` session (on S3 roots the Python data source, the
  only path to ``s3://`` here: pyspark ships no hadoop-aws);
* **retention** -- :func:`lakelog.compaction.retention_job.run_retention` on a topic whose older half
  has expired;
* **compaction** -- :func:`lakelog.compaction.compaction_job.run_compaction` of a keyed topic (small:
  it runs on the driver).

Reported per root and operation: seconds (median of ``repeats`` runs of the scan; the jobs run once,
as they change the data), the records and MB of values the operation covers per second (the scan: the topic;
retention: the topic it trims, whose log it rewrites without reading its segments; compaction: the records it
reads), and the S3 requests made by all the runs, by operation, with their cost per GB covered at public S3
Standard prices (:meth:`bench.s3_proxy.RequestStats.dollars`).
"""

from __future__ import annotations

import contextlib
import statistics
import time

import pyarrow as pa

from bench import BenchContext, BenchResult, md_table

TITLE = "Spark scan and maintenance jobs on object storage: local, moto, S3 Express and S3 Standard latency"
PARTITIONS, BATCH = 4, 10_000


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


def run(ctx: BenchContext) -> BenchResult:
    from bench.http_produce import MotoProcess
    from bench.s3_proxy import PROFILES, S3FaultProxy, bench_roots
    from bench.spark_scan import _session
    from lakelog.compaction.compaction_job import run_compaction
    from lakelog.compaction.retention_job import run_retention
    from lakelog.storage.storage_root import StorageRoot

    records = ctx.size(800_000, 80_000)
    cleanup = contextlib.ExitStack()
    moto = MotoProcess()
    cleanup.callback(moto.close)
    cleanup.enter_context(moto.environment())
    backends = bench_roots(ctx.quick)
    rows, metrics = [], {}
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
                uri = f"s3://{MotoProcess.BUCKET}/jobs-{b}"
                ctx.progress(f"{b}: writing {records:,} records per topic")
                now_ms = _fill(StorageRoot.resolve(uri), records)
                proxy = S3FaultProxy(moto.endpoint, latency=PROFILES.get(b)).start()
                root = StorageRoot.resolve(uri, {"aws_endpoint_url": proxy.url})
            try:
                reader = spark.read.format("lakelog").option("subscribe", "scan").option("startingOffsets", "earliest")
                if proxy is not None:
                    reader = reader.option("storage.aws_endpoint_url", proxy.url)

                def scan():
                    return reader.load(root.uri).selectExpr("count(*)", "sum(length(value))").collect()[0]

                timings, counts, covered = {}, {}, {}
                rounds = max(1, records // (BATCH * PARTITIONS))
                covered["Spark scan"] = covered["retention"] = rounds * BATCH * PARTITIONS
                if proxy is not None:
                    proxy.reset_stats()
                scan_s = []
                for _ in range(ctx.repeats):
                    t = time.perf_counter()
                    n, _size = scan()
                    scan_s.append(time.perf_counter() - t)
                    assert n == covered["Spark scan"], n
                timings["Spark scan"] = statistics.median(scan_s)
                counts["Spark scan"] = proxy.reset_stats() if proxy else None
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
                runs = ctx.repeats if op == "Spark scan" else 1  # the requests counted are of every run
                rows.append([b, op, f"{seconds:.2f}", f"{covered[op] / seconds:,.0f}", f"{gb * 1000 / seconds:.1f}",
                             st.describe() if st else "(local disk)", f"${st.dollars() / (gb * runs):.3f}" if st else ""])
                metrics[f"{b}_{op.replace(' ', '_')}_s"] = seconds
            ctx.progress(f"{b}: " + ", ".join(f"{op} {s:.2f} s" for op, s in timings.items()))
    text = (f"Per topic {records:,} records of 100 random bytes over {PARTITIONS} partitions, in commits of "
            f"{BATCH:,} records per partition (the keyed topic: a tenth of that, 500 keys). The scan is the "
            f"median of {ctx.repeats} runs; each job runs once. Records/s and MB/s are of the records the operation "
            f"covers: the scan's topic, the topic retention trims (log-only: it reads no segment), the records "
            f"compaction reads. S3 requests are of all the runs (the scan's {ctx.repeats}); request $ per GB "
            f"covered: public S3 Standard prices ($0.005 per 1,000 PUT, POST or LIST; $0.0004 per 1,000 GET or "
            f"HEAD), storage and transfer not counted.\n\n"
            + md_table(["root", "operation", "seconds", "records/s", "MB/s", "S3 requests", "request $ per GB"], rows))
    return BenchResult(markdown=text, summary=[" | ".join(r[:3]) for r in rows], metrics=metrics)
