"""``bench/s3_jobs.py`` runs end to end in quick mode: the Spark reads (the JVM source, spark.read.parquet, the
Python source, an AvailableNow stream), retention and compaction over the S3 latency proxy (numbers are judged by
``make bench``, not here)."""

from __future__ import annotations

import re

from bench_support import bench_section


def test_s3_jobs_runs_end_to_end(tmp_path):
    """The reads, retention and compaction over the S3 latency proxy, each with its request counts."""
    section = bench_section(tmp_path, "s3_jobs", 900)
    for root in ("local", "s3-standard"):  # a quick run's roots (the others differ only in the proxy's latency)
        for op in ("retention", "compaction"):
            assert re.search(rf"\| {root} \| {op} \| \d+\.\d\d \| [\d,]+ \|", section), (root, op, section)
        for read in ("JVM source", "spark.read.parquet", "Python source", "AvailableNow \\(JVM\\)"):
            assert re.search(rf"\| {root} \| {read} \| \d+\.\d\d \| [\d,]+ \|", section), (root, read, section)
    for op in ("JVM source", "spark.read.parquet", "retention", "compaction"):  # requests, per GB, their cost
        assert re.search(rf"\| s3-standard \| {op} \| [^|]+ \| [^|]+ \| [^|]*GET [1-9]\d*[^|]* \| "
                         rf"[\d,]+ / [\d,]+ / [\d,]+ \| \$\d+\.\d{{4}} \|", section), (op, section)
