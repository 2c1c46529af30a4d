"""``bench/s3_fronts.py`` runs end to end in quick mode: one front, then two, on an S3 root behind the latency proxy
(numbers are judged by ``make bench``, not here)."""

from __future__ import annotations

import re

from bench_support import bench_section


def test_s3_fronts_runs_end_to_end(tmp_path):
    """One front, then two, on an S3 root behind the latency proxy, under the goal's load (a quick run's only one:
    the others differ only in the producers' settings): both rows and the ratio."""
    section = bench_section(tmp_path, "s3_fronts", 600)
    for name in ("latency-bound, 1 KB records, 2 producers",):
        load = re.escape(name)
        # the steady state's records/s, MB/s and ratio, then the whole run's records/s and ratio
        assert re.search(rf"\| {load} \| 1 front \| [\d,]+ \| \d+\.\d \| 1\.00x \| [\d,]+ \| 1\.00x \|",
                         section), section
        assert re.search(rf"\| {load} \| 2 fronts \| [\d,]+ \| \d+\.\d \| \d+\.\d\dx \| [\d,]+ \| \d+\.\d\dx \|",
                         section), section
        # Little's law's factors, from the fronts' own Produce latency: in flight, records per request, latency
        assert re.search(rf"\| {load} \| 1 front \| \d+\.\d\d \| [\d,]+ \| \d+ \| - \|", section), section
        assert re.search(rf"\| {load} \| 2 fronts \| \d+\.\d\d \| [\d,]+ \| \d+ \(\d+ / \d+\) \| "
                         rf"\d+\.\d\d x \d+\.\d\d x \d+\.\d\d \|", section), section
        # each front's stage means: queue, upload, commit wait, then its own commit PUT or the handoff (a front
        # may have done both if partition 0's lease moved during the run)
        assert re.search(rf"\| {load} \| one front \|( \d+\.\d \|){{4}} - \|", section), section
        assert re.search(rf"\| {load} \| committer front \|( \d+\.\d \|){{4}} (-|\d+\.\d) \|", section), section
        assert re.search(rf"\| {load} \| other front \|( \d+\.\d \|){{3}} (-|\d+\.\d) \| \d+\.\d \|", section), section
