"""The benchmark harness and the storage benchmarks (append, seek, Arrow validation, the S3 consumer) run end to
end in quick mode with tiny sizes, so bench code cannot rot.  Other benchmarks bring their own smoke tests (the
slow ones in files of their own: tests/test_bench_s3_*_smoke.py).

Numbers are not asserted against goals here: performance is judged by ``make bench``.
"""

from __future__ import annotations

import re

from bench_support import bench_process, bench_section, run_bench, section


def test_quick_run_produces_numbers_and_sections(tmp_path):
    out = tmp_path / "BENCHMARKS.md"
    out.write_text("# notes kept\n\nhand-written findings\n")
    proc = bench_process(tmp_path, ["append", "seek"], timeout=300, scale=0.2)
    assert re.search(r"lakelog +[\d,]+ rec/s", proc.stdout), proc.stdout
    assert re.search(r"lakelog warm p50 [\d.]+ ms", proc.stdout), proc.stdout
    text = out.read_text()
    assert text.startswith("# notes kept\n\nhand-written findings\n")
    for name in ("append", "seek"):
        body = section(text, name)
        assert re.search(r"\| [\d,]+ \| [\d,]+ \|", body) or re.search(r"\| \d+\.\d{3} \|", body)
    assert "deltalake" in text and "CPUs" in text  # the environment line
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("lakelog-bench-")], "scratch dirs left behind"


def test_rerunning_one_benchmark_replaces_only_its_section():
    from bench.run import replace_section

    text = "intro\n\n<!-- bench:append -->\nold append\n<!-- /bench:append -->\n\nmiddle\n\n" \
           "<!-- bench:seek -->\nold seek\n<!-- /bench:seek -->\n"
    new = replace_section(text, "seek", "<!-- bench:seek -->\nnew seek\n<!-- /bench:seek -->")
    assert "old append" in new and "middle" in new and "new seek" in new and "old seek" not in new
    added = replace_section(new, "later", "<!-- bench:later -->\nx\n<!-- /bench:later -->")
    assert added.startswith(new.rstrip("\n")) and added.endswith("<!-- /bench:later -->\n")


def test_arrow_validation_runs_end_to_end(tmp_path):
    """The validation-cost benchmark: a row per way of sending Arrow, each with its rate and cost."""
    validation = section(run_bench(tmp_path, ["arrow_validation"], timeout=600, scale=0.2), "arrow_validation")
    assert re.search(r"\| plain \| [\d,]+ \| \d+\.\d{3} \|", validation), validation


def test_s3_consume_runs_end_to_end(tmp_path):
    """A sequential consumer over the S3 latency proxy: every root reports a rate and the GETs it made."""
    section = bench_section(tmp_path, "s3_consume", 600)
    for root in ("local", "s3-standard"):  # a quick run's roots (the others differ only in the proxy's latency)
        for reader in ("Consumer", "HTTP fetch"):
            assert re.search(rf"\| {root} \| {reader} \| [\d,]+ \| [\d,]+ \| \d+\.\d \|", section), section
    assert re.search(r"\| s3-standard \| Consumer \|.*\| \d+% \| \d+ \|", section), "no share or GET count"
