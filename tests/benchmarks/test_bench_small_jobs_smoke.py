"""``bench/small_jobs.py`` runs end to end in quick mode: each maintenance job from the command line on a small
topic, with its time and what it did (numbers are judged by ``make bench``, not here)."""

from __future__ import annotations

import re

from bench_support import bench_section


def test_small_jobs_runs_end_to_end(tmp_path):
    section = bench_section(tmp_path, "small_jobs", 900)
    for job in ("retention", "compaction", "merge", "vacuum"):
        assert re.search(rf"\| {job} \| \d+\.\d\d \| [\d./ ]+ \| \d+\.\d\dx \|", section), (job, section)
    assert re.search(r"\| merge \|.*segments 3 -> 1, records 6 -> 6 \|", section), section
    assert re.search(r"\| compaction \|.*segments [1-9] -> \d+, records (\d+) -> (?!\1)\d+", section), section
    assert re.search(r"(NOT )?MET: merge of a few segments <= 1.0x compaction's time", section), section
