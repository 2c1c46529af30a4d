"""The Spark benchmark runs end to end in quick mode (tiny sizes) on the shared session, so it cannot rot.

Numbers are not asserted against goals here: performance is judged by ``make bench``.
"""

from __future__ import annotations

from bench import BenchContext
from bench import spark_scan


def test_spark_scan_quick_run(spark, tmp_path):
    result = spark_scan.run(BenchContext(workdir=tmp_path, quick=True, repeats=1, scale=0.2, progress=lambda _: None))
    assert "| format(\"lakelog\") |" in result.markdown and "Time to first row" in result.markdown
    assert {g.name.split()[0] for g in result.goals} == {"batch", "projected", "last", "AvailableNow", "first"}
    assert result.metrics["lakelog_s"] > 0 and result.metrics["first_row_s"] > 0
    assert not spark.sparkContext._jsc.sc().isStopped()  # the shared session is left running
