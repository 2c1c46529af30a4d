"""A small compaction pass runs on the driver, without starting Spark, and cleans exactly as Spark does.

The same random histories (hypothesis) go into two topics; one is cleaned by the real local[2] session,
the other through a :class:`LazySession` that may run small work on the driver. Their records, offsets,
cleaner checkpoints and log start offsets must be equal, and the lazy session must never have started.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakelog import Log
from lakelog.maintenance.cleaner import run_compaction
from lakelog.maintenance.cleaner_plan import checkpoint_app
from lakelog.maintenance.spark_session import LazySession

from maint_support import T0, table_rows

COMPACT = {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "1000"}

histories = st.lists(st.lists(st.tuples(st.sampled_from("abcde"), st.one_of(st.none(), st.text("xyz", max_size=3))),
                              min_size=1, max_size=6), min_size=2, max_size=6)


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(history=histories, passes=st.integers(1, 2))
def test_driver_pass_equals_spark_pass(spark, tmp_path_factory, history, passes):
    log = Log(str(tmp_path_factory.mktemp("driver") / "root"))
    for topic in ("on-spark", "on-driver"):
        log.create_topic(topic, 1, COMPACT)
        for batch in history:
            log.append(topic, [{"key": k, "value": v} for k, v in batch])
    lazy = LazySession("lakelog-test")
    for i in range(passes):
        run_compaction(spark, log.root, ["on-spark"], now_ms=T0 + i * 2000)
        run_compaction(lazy, log.root, ["on-driver"], now_ms=T0 + i * 2000)
    assert not lazy.started, "a small pass started Spark"
    assert table_rows(log, "on-driver", 0) == table_rows(log, "on-spark", 0)
    a, b = log.snapshot("on-spark"), log.snapshot("on-driver")
    assert a.txn(checkpoint_app(0)) == b.txn(checkpoint_app(0))
    assert a.log_start_offset(0) == b.log_start_offset(0) and a.high_watermark(0) == b.high_watermark(0)
