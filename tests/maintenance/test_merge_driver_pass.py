"""A small merge runs on the driver, without starting Spark, and merges exactly as Spark does.

The same random histories (hypothesis) go into two topics, one segment per append; one is merged by the real
local[2] session, the other through a :class:`LazySession` that may run small work on the driver. Their
records, offsets, segment boundaries and log offsets must be equal, and the lazy session must never have started.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakelog import Log
from lakelog.maintenance.segment_merge import run_merge
from lakelog.maintenance.spark_session import LazySession

from maint_support import check_contiguous, table_rows

histories = st.lists(st.lists(st.tuples(st.sampled_from("abc"), st.one_of(st.none(), st.text("xyz", max_size=3))),
                              min_size=1, max_size=4), min_size=2, max_size=6)


@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(history=histories, segment_bytes=st.sampled_from([1, 5000, 1 << 30]))
def test_driver_merge_equals_spark_merge(spark, tmp_path_factory, history, segment_bytes):
    log = Log(str(tmp_path_factory.mktemp("merge-driver") / "root"))
    for topic in ("on-spark", "on-driver"):
        log.create_topic(topic, 1)
        for batch in history:
            log.append(topic, [{"key": k, "value": v} for k, v in batch])
    lazy = LazySession("lakelog-test")
    spark_report = run_merge(spark, log.root, ["on-spark"], segment_bytes=segment_bytes)
    driver_report = run_merge(lazy, log.root, ["on-driver"], segment_bytes=segment_bytes)
    assert not lazy.started, "a small merge started Spark"
    a, b = spark_report.topics[0], driver_report.topics[0]
    assert (a.segments_removed, a.segments_written, a.records_after) == \
        (b.segments_removed, b.segments_written, b.records_after)
    assert table_rows(log, "on-driver", 0) == table_rows(log, "on-spark", 0)
    s, d = log.snapshot("on-spark"), log.snapshot("on-driver")
    check_contiguous(d)
    assert [(x.base_offset, x.last_offset) for x in s.index.segments(0)] == \
        [(x.base_offset, x.last_offset) for x in d.index.segments(0)]
    assert s.log_start_offset(0) == d.log_start_offset(0) and s.high_watermark(0) == d.high_watermark(0)
