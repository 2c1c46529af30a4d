"""The typed-columns benchmark runs end to end in quick mode (tiny sizes), so it cannot rot.

Numbers are not asserted against goals here: performance is judged by ``make bench``.
"""

from __future__ import annotations

import re

from bench_support import bench_section


def test_typed_columns_quick_run(tmp_path):
    body = bench_section(tmp_path, "typed_columns", timeout=600)
    assert re.search(r"\| typed \(lakelog.value.schema.columns\) \| [\d,]+ \| [\d.]+ \|", body), body
    assert re.search(r"\| untyped, same bytes \| [\d,]+ \| [\d.]+ \|", body), body
    assert "Typed columns cost" in body and "produce with typed columns" in body
    assert "Spark: a typed field" in body  # measured, or NOT MEASURED with the reason
