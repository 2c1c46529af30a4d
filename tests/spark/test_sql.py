"""Spark SQL reads topics through a temporary view (``CREATE TEMPORARY VIEW ... USING lakelog``).

Spark's direct file query (``SELECT ... FROM lakelog.`/path```) is only for file-based sources; the Python
data source is not one, and Spark says so with ``UNSUPPORTED_DATASOURCE_FOR_DIRECT_QUERY``. docs/spark.md
shows the view form instead; both behaviours are pinned here.
"""

from __future__ import annotations

import pytest

from lakelog import Log


def test_temporary_view_using_lakelog(spark, tmp_path):
    root = str(tmp_path / "root")
    log = Log(root)
    log.create_topic("orders", 2)
    log.append("orders", [{"key": f"c{i % 3}", "value": f"order {i}"} for i in range(9)])
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW orders USING lakelog "
              f"OPTIONS (path '{root}', subscribe 'orders', startingOffsets 'earliest')")
    rows = spark.sql("SELECT CAST(key AS STRING) AS k, count(*) AS n FROM orders GROUP BY k ORDER BY k").collect()
    assert [(r.k, r.n) for r in rows] == [("c0", 3), ("c1", 3), ("c2", 3)]
    total = spark.sql("SELECT sum(offset + 1) AS s, count(DISTINCT partition) AS p FROM orders").collect()[0]
    assert total.p <= 2 and total.s > 0


def test_direct_query_names_the_view_form(spark, tmp_path):
    root = str(tmp_path / "root")
    Log(root).create_topic("t", 1)
    with pytest.raises(Exception) as e:
        spark.sql(f"SELECT * FROM lakelog.`{root}`").collect()
    assert "UNSUPPORTED_DATASOURCE_FOR_DIRECT_QUERY" in str(e.value), str(e.value)[:500]
