"""``bench/s3_jobs.py`` runs end to end in quick mode: the Spark scan, retention and compaction over the S3
latency proxy (numbers are judged by ``make bench``, not here)."""

from __future__ import annotations

import re

from bench_support import bench_section


def test_s3_jobs_runs_end_to_end(tmp_path):
    """The Spark scan, retention and compaction over the S3 latency proxy, each with its request counts."""
    section = bench_section(tmp_path, "s3_jobs", 900)
    for root in ("local", "s3-standard"):  # a quick run's roots (the others differ only in the proxy's latency)
        for op in ("Spark scan", "retention", "compaction"):
            assert re.search(rf"\| {root} \| {op} \| \d+\.\d\d \| [\d,]+ \| \d+\.\d \|", section), (root, op, section)
    assert re.search(r"\| s3-standard \| Spark scan \|.*GET \d+.*\| \$\d+\.\d{3} \|", section), "no GETs or cost"
