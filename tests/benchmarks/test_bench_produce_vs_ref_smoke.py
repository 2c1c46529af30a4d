"""The side-by-side produce benchmark (bench/produce_vs_ref.py) runs end to end in quick mode: this checkout's front
and one of HEAD's (exported by ``git archive``) each report HTTP and Kafka rates and a ratio."""

from __future__ import annotations

import os
import re

from bench_support import bench_section


def test_produce_against_another_version_runs_end_to_end(tmp_path, monkeypatch):
    monkeypatch.setitem(os.environ, "LAKELOG_BENCH_REF", "HEAD")
    body = bench_section(tmp_path, "produce_vs_ref", 900)
    assert "the other HEAD (" in body and "How to run: `python -m bench.run produce_vs_ref`" in body, body
    for load in ("HTTP JSON produce", "Kafka produce"):
        assert re.search(rf"\| {load} [^|]*\| [\d,]+ \| [\d,]+ \| \d+\.\d{{3}} \(\d+\.\d\d-\d+\.\d\d\) \|", body), body
