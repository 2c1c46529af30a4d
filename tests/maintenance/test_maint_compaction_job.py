"""The compaction job on a real local[2] Spark session: Kafka's cleaner rules, incremental passes, tombstone
horizons, the checkpoint, the Spark reader agreeing, and a hypothesis model check."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakelog import Log
from lakelog.maintenance.cleaner import run_compaction
from lakelog.maintenance.cleaner_plan import checkpoint_app
from lakelog.errors import InvalidConfig, InvalidRecord
from lakelog.storage.storage_root import StorageRoot

from maint_support import T0, PartitionModel, check_contiguous, table_rows

COMPACT = {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "1000"}


def spark_rows(spark, root, topic):
    """(partition, offset, key, value) of the topic read with spark.read.format("lakelog")."""
    reader = spark.read.format("lakelog").option("subscribe", topic)
    for k, v in root.options:
        reader = reader.option(f"storage.{k}", v)
    return sorted((r.partition, r.offset, bytes(r.key) if r.key is not None else None,
                   bytes(r.value) if r.value is not None else None)
                  for r in reader.load(root.uri).select("partition", "offset", "key", "value").collect())


def test_latest_per_key_survives_with_its_offset_and_tombstones_expire(spark, log, root):
    log.create_topic("users", 1, COMPACT)
    log.append("users", [{"key": "a", "value": "a1"}, {"key": "b", "value": "b1"}, {"key": "c", "value": "c1"}])
    log.append("users", [{"key": "a", "value": "a2"}, {"key": "b", "value": None}])   # b deleted
    log.append("users", [{"key": "d", "value": "d1"}])
    log.append("users", [{"key": "a", "value": "a3"}])  # the newest segment: never cleaned
    untouched = log.segments("users", 0)[-1]

    report = run_compaction(spark, root, ["users"], now_ms=T0)
    t = report.topics[0]
    assert t.partitions_changed == 1 and t.records_before == 6 and t.records_after == 4
    assert table_rows(log, "users", 0) == [(2, b"c", b"c1"), (3, b"a", b"a2"), (4, b"b", None), (5, b"d", b"d1"),
                                           (6, b"a", b"a3")]
    snap = log.snapshot("users")
    assert snap.txns[checkpoint_app(0)] == 6 and snap.index.segments(0)[-1] == untouched
    assert snap.log_start_offset(0) == 0  # the emptied first segment keeps its place
    check_contiguous(snap)
    assert spark_rows(spark, root, "users") == [(0, o, k, v) for o, k, v in table_rows(log, "users", 0)]
    commit = root.filesystem.open_input_stream(
        root.path_for("topics", "users", "_delta_log", f"{snap.version:020d}.json")).read().decode()
    actions = [json.loads(line) for line in commit.splitlines()]
    assert {a["add"]["dataChange"] for a in actions if "add" in a} == {False}
    assert {a["remove"]["dataChange"] for a in actions if "remove" in a} == {False}

    # nothing new is dirty: a second pass does nothing, the tombstone stays
    again = run_compaction(spark, root, ["users"], now_ms=T0 + 10_000)
    assert again.topics[0].version_after is None and again.topics[0].partitions_changed == 0
    # the next pass after new data: before the horizon the tombstone stays, after it it goes
    log.append("users", [{"key": "e", "value": "e1"}])
    run_compaction(spark, root, ["users"], now_ms=T0 + 999)  # horizon = first pass + 1000 ms
    assert (4, b"b", None) in table_rows(log, "users", 0)
    assert table_rows(log, "users", 0)[-2:] == [(6, b"a", b"a3"), (7, b"e", b"e1")]
    log.append("users", [{"key": "f", "value": "f1"}])
    run_compaction(spark, root, ["users"], now_ms=T0 + 1000)
    assert table_rows(log, "users", 0) == [(2, b"c", b"c1"), (5, b"d", b"d1"), (6, b"a", b"a3"), (7, b"e", b"e1"),
                                           (8, b"f", b"f1")]
    check_contiguous(log.snapshot("users"))


def test_a_pass_rewrites_only_segments_that_lose_records(spark, local_root):
    log = Log(local_root)
    log.create_topic("t", 1, COMPACT)
    for i in range(4):
        log.append("t", [{"key": f"k{i}", "value": f"v{i}"}])  # distinct keys: nothing to drop
    log.append("t", [{"key": "k1", "value": "again"}, {"key": "z", "value": "z"}])
    log.append("t", [{"key": "tail", "value": "tail"}])
    before = [s.path for s in log.segments("t", 0)]
    report = run_compaction(spark, local_root, ["t"], now_ms=T0)
    after = [s.path for s in log.segments("t", 0)]
    # only the segment holding the superseded k1 goes; emptied, it leaves no file (its range joins segment 0's)
    assert report.topics[0].segments_removed == 1 and report.topics[0].segments_written == 0
    assert after == [p for p in before if p != before[1]]
    assert [s.base_offset for s in log.segments("t", 0)] == [0, 2, 3, 4, 6]
    assert [r[0] for r in table_rows(log, "t", 0)] == [0, 2, 3, 4, 5, 6]
    assert log.fetch("t", 0, 1).records.column("offset").to_pylist()[0] == 2  # a consumer at 1 just moves on


def test_min_compaction_lag_and_compact_delete(spark, local_root):
    log = Log(local_root)
    log.create_topic("t", 1, {**COMPACT, "cleanup.policy": "compact,delete", "min.compaction.lag.ms": "60000"})
    log.append("t", [{"key": "k", "value": "old1", "timestamp": T0}])
    log.append("t", [{"key": "k", "value": "old2", "timestamp": T0}])
    log.append("t", [{"key": "k", "value": "young", "timestamp": T0 + 100_000}])
    log.append("t", [{"key": "k", "value": "newest", "timestamp": T0 + 100_000}])
    run_compaction(spark, local_root, ["t"], now_ms=T0 + 120_000)  # the third segment is younger than the lag
    assert table_rows(log, "t", 0) == [(1, b"k", b"old2"), (2, b"k", b"young"), (3, b"k", b"newest")]
    assert log.snapshot("t").txns[checkpoint_app(0)] == 2
    from lakelog.maintenance.retention import run_retention

    log.alter_topic("t", {"retention.ms": "1000"})
    run_retention(local_root, ["t"], now_ms=T0 + 200_000)  # compact,delete: retention applies too
    assert table_rows(log, "t", 0) == [(3, b"k", b"newest")]


def test_records_without_a_key_are_refused_at_produce_and_dropped_by_the_cleaner(spark, local_root):
    log = Log(local_root)
    log.create_topic("t", 1, {**COMPACT, "cleanup.policy": "delete"})
    log.append("t", [{"key": None, "value": "no key"}, {"key": "k", "value": "v"}])
    log.alter_topic("t", {"cleanup.policy": "compact"})
    with pytest.raises(InvalidRecord):
        log.append("t", [{"key": None, "value": "refused"}])
    v = log.snapshot("t").version
    log.append("t", [{"key": "x", "value": "x"}])
    assert log.snapshot("t").version == v + 1
    run_compaction(spark, local_root, ["t"], now_ms=T0)
    assert table_rows(log, "t", 0) == [(1, b"k", b"v"), (2, b"x", b"x")]


def test_dry_run_and_bad_input_change_nothing(spark, local_root):
    log = Log(local_root)
    log.create_topic("plain", 1)
    log.create_topic("c", 1, COMPACT)
    for _ in range(3):
        log.append("c", [{"key": "k", "value": "v"}])
    v = log.snapshot("c").version
    report = run_compaction(None, local_root, ["c"], dry_run=True)
    assert "dirty ratio 1.000; cleaning" in report.format_text()
    with pytest.raises(InvalidConfig, match="cleanup.policy contains 'compact'"):
        run_compaction(spark, local_root, ["c", "plain"])
    assert log.snapshot("c").version == v and len(log.segments("c", 0)) == 3


def history(max_batches):
    rec = st.tuples(st.sampled_from([b"a", b"b", b"c", b"d", None]), st.sampled_from([b"1", b"2", None]))
    return st.lists(st.lists(rec, min_size=1, max_size=4), min_size=1, max_size=max_batches)


@settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck))
@given(first=st.lists(history(5), min_size=3, max_size=3), second=st.lists(history(3), min_size=3, max_size=3),
       third=st.lists(history(2), min_size=3, max_size=3), gap_ms=st.sampled_from([0, 500, 1000]))
def test_compaction_matches_a_brute_force_model_of_kafkas_rules(spark, tmp_path_factory, first, second, third,
                                                                gap_ms):
    """Random produce histories (keys, null keys, tombstones) in three partitions, three passes with time moving:
    after each pass every partition holds exactly the model's records, at their original offsets."""
    root = StorageRoot.resolve(str(tmp_path_factory.mktemp("model")))
    log = Log(root)
    log.create_topic("m", 3, {**COMPACT, "cleanup.policy": "delete"})
    models = [PartitionModel() for _ in range(3)]

    def produce(batches_per_partition, allow_null_keys):
        for p, batches in enumerate(batches_per_partition):
            for batch in batches:
                batch = [(k if k is not None or allow_null_keys else b"n", v) for k, v in batch]
                log.append("m", [{"key": k, "value": v, "timestamp": T0} for k, v in batch], partition=p)
                models[p].append([(k, v, T0) for k, v in batch])

    produce(first, allow_null_keys=True)
    log.alter_topic("m", {"cleanup.policy": "compact"})
    assert spark_rows(spark, root, "m") == sorted((p, *r) for p, m in enumerate(models) for r in m.rows())  # before
    now = T0
    for batches in (None, second, third):
        if batches is not None:
            produce(batches, allow_null_keys=False)
        run_compaction(spark, root, ["m"], now_ms=now, min_dirty_ratio=-1)
        for p, model in enumerate(models):
            model.clean(now, 1000)
            assert table_rows(log, "m", p) == model.rows(), f"partition {p} after the pass at {now}"
        check_contiguous(log.snapshot("m"))
        now += gap_ms
    assert spark_rows(spark, root, "m") == sorted((p, *r) for p, m in enumerate(models) for r in m.rows())  # after


def test_a_full_offset_map_cleans_a_prefix_and_the_next_pass_continues(spark, local_root, monkeypatch):
    """Kafka's dedupe buffer: with room for 4 keys' worth of dirty records, a pass stops at a segment boundary."""
    import lakelog.maintenance.cleaner as job

    monkeypatch.setattr(job, "MAX_MAP_ENTRIES", 4)
    log = Log(local_root)
    log.create_topic("t", 1, COMPACT)
    for i in range(4):
        log.append("t", [{"key": "k", "value": f"{i}a"}, {"key": "k", "value": f"{i}b"}])
    log.append("t", [{"key": "tail", "value": "t"}])
    run_compaction(spark, local_root, ["t"], now_ms=T0)
    assert log.snapshot("t").txns[checkpoint_app(0)] == 4  # two segments (4 records) fit
    assert [v for _, _, v in table_rows(log, "t", 0)] == [b"1b", b"2a", b"2b", b"3a", b"3b", b"t"]
    run_compaction(spark, local_root, ["t"], now_ms=T0)
    assert log.snapshot("t").txns[checkpoint_app(0)] == 8
    assert [v for _, _, v in table_rows(log, "t", 0)] == [b"3b", b"t"]
