"""The retention job against real topics (local and moto S3): segments removed, log start offsets moved in the
same commit, readers below them refused, the Arrow index in step; and bad input changes nothing."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakelog import Log
from lakelog.storage.catalog import Catalog
from lakelog.maintenance.retention import run_retention
from lakelog.errors import InvalidConfig, InvalidRequest, OffsetOutOfRange, UnknownTopicOrPartition
from lakelog.storage.topic_snapshot import load_persisted, lso_app

from maint_support import T0, check_contiguous

DAY = 86_400_000


def produce_days(log, topic, partition, days, per=5):
    """One append (one segment) per day, ``per`` records stamped that day."""
    for d in days:
        log.append(topic, [{"key": f"k{i}", "value": f"d{d}-{i}", "timestamp": T0 + d * DAY} for i in range(per)],
                   partition=partition)


def test_time_and_size_retention_move_the_log_start_offset(log, root):
    log.create_topic("events", 2, {"retention.ms": str(2 * DAY), "file.delete.delay.ms": "0"})
    produce_days(log, "events", 0, [0, 1, 2, 3])
    produce_days(log, "events", 1, [3, 3, 3])
    log.alter_topic("events", {"retention.bytes": str(2 * log.segments("events", 1)[0].bytes)})
    before = log.snapshot("events")
    removed_paths = {s.path for s in before.index.segments(0)[:2]} | {before.index.segments(1)[0].path}

    report = run_retention(root, ["events"], now_ms=T0 + 3 * DAY + 1)
    t = report.topics[0]
    assert (t.partitions_examined, t.partitions_changed, t.segments_removed) == (2, 2, 3)
    assert t.log_start_offsets == {0: (0, 10), 1: (0, 5)}
    assert t.records_before == 35 and t.records_after == 20 and t.bytes_after < t.bytes_before

    snap = log.snapshot("events")
    assert snap.version == t.version_after == before.version + 1
    assert removed_paths.isdisjoint(s.path for s in snap.index)
    assert snap.txns[lso_app(0)] == 10 and snap.txns[lso_app(1)] == 5  # committed with the removal
    assert snap.log_start_offset(0) == 10 and snap.high_watermark(0) == 20
    check_contiguous(snap)
    with pytest.raises(OffsetOutOfRange):
        log.fetch("events", 0, 9)
    assert [r["offset"] for r in log.read("events", 0).to_pylist()] == list(range(10, 20))
    persisted = load_persisted(root, "events")  # the Arrow index was written at the new version
    assert persisted is not None and persisted.version == snap.version
    commit = log.root.filesystem.open_input_stream(
        log.root.path_for("topics", "events", "_delta_log", f"{snap.version:020d}.json")).read().decode()
    actions = [json.loads(line) for line in commit.splitlines()]
    assert all(a["remove"]["dataChange"] for a in actions if "remove" in a)
    info = next(a["commitInfo"] for a in actions if "commitInfo" in a)
    assert info["lakelog.operation"] == "retention"

    again = run_retention(root, ["events"], now_ms=T0 + 3 * DAY + 1)
    assert again.topics[0].segments_removed == 0 and again.topics[0].version_after is None


def test_delete_records_floor_removes_whole_segments_only(log, root):
    log.create_topic("t", 1, {"retention.ms": "-1"})
    produce_days(log, "t", 0, [0, 0, 0])  # segments [0,5) [5,10) [10,15)
    log.delete_records("t", 0, 7)
    report = run_retention(root, ["t"])
    assert report.topics[0].segments_removed == 1 and report.topics[0].log_start_offsets == {}
    snap = log.snapshot("t")
    assert [s.base_offset for s in snap.index.segments(0)] == [5, 10]
    assert snap.log_start_offset(0) == 7 == snap.txns[lso_app(0)]  # the floor, not the segment boundary
    assert [r["offset"] for r in log.read("t", 0).to_pylist()] == list(range(7, 15))


def test_dry_run_changes_nothing(log, root):
    log.create_topic("t", 1, {"retention.ms": "1"})
    produce_days(log, "t", 0, [0, 1])
    v = log.snapshot("t").version
    report = run_retention(root, dry_run=True, now_ms=T0 + 5 * DAY)
    assert report.dry_run and report.topics[0].segments_removed == 1
    assert "partition 0: remove 1 of 2 segments" in report.format_text()
    assert log.snapshot("t").version == v and len(log.segments("t", 0)) == 2


def test_bad_input_is_refused_before_anything_changes(log, root, tmp_path):
    log.create_topic("compacted", 1, {"cleanup.policy": "compact", "retention.ms": "1"})
    log.create_topic("plain", 1, {"retention.ms": "1"})
    produce_days(log, "plain", 0, [0, 1])
    produce_days(log, "compacted", 0, [0, 1])
    versions = {t: log.snapshot(t).version for t in ("plain", "compacted")}
    with pytest.raises(InvalidConfig, match="compacted has cleanup.policy=compact"):
        run_retention(root, ["plain", "compacted"], now_ms=T0 + 9 * DAY)
    with pytest.raises(UnknownTopicOrPartition):
        run_retention(root, ["plain", "nope"], now_ms=T0 + 9 * DAY)
    assert {t: log.snapshot(t).version for t in versions} == versions
    from lakelog.storage.storage_root import StorageRoot

    with pytest.raises(InvalidRequest, match="not a lakelog storage root"):
        run_retention(StorageRoot.resolve(str(tmp_path / "missing")))
    # without --topic, topics without 'delete' are skipped
    report = run_retention(root, now_ms=T0 + 9 * DAY)
    assert [t.topic for t in report.topics] == ["plain"]


@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
@given(days=st.lists(st.lists(st.integers(0, 6), min_size=1, max_size=6), min_size=1, max_size=2),
       retention_days=st.sampled_from([-1, 1, 3]), limit_segments=st.sampled_from([-1, 1, 3]),
       now_day=st.integers(2, 8), floor_frac=st.floats(0, 1))
def test_exactly_the_expected_segments_are_gone(tmp_path_factory, days, retention_days, limit_segments, now_day,
                                                floor_frac):
    """Random histories: the job removes exactly the oldest segments Kafka's rules select, nothing else."""
    from lakelog.storage.storage_root import StorageRoot

    root = StorageRoot.resolve(str(tmp_path_factory.mktemp("ret")))
    log = Log(root)
    log.create_topic("t", len(days), {"retention.ms": str(retention_days * DAY if retention_days > 0 else -1)})
    for p, ds in enumerate(days):
        produce_days(log, "t", p, ds, per=3)
    seg_bytes = max(s.bytes for p in range(len(days)) for s in log.segments("t", p))
    limit = -1 if limit_segments < 0 else limit_segments * seg_bytes
    log.alter_topic("t", {"retention.bytes": str(limit)})
    floors = {}
    for p in range(len(days)):
        floors[p] = int(log.snapshot("t").high_watermark(p) * floor_frac)
        log.delete_records("t", p, floors[p])
    now = T0 + now_day * DAY
    before = log.snapshot("t")
    expected = {}
    for p in range(len(days)):
        segs = before.index.segments(p)
        n = 0
        while n < len(segs) - 1 and retention_days > 0 and now - segs[n].max_timestamp // 1000 > retention_days * DAY:
            n += 1
        while n < len(segs) - 1 and limit >= 0 and sum(s.bytes for s in segs[n + 1:]) >= limit:
            n += 1
        while n < len(segs) - 1 and segs[n + 1].base_offset <= floors[p]:
            n += 1
        expected[p] = segs[n:]
    run_retention(root, ["t"], now_ms=now)
    after = Catalog(root).snapshot("t")
    for p in range(len(days)):
        assert after.index.segments(p) == expected[p]
        assert after.log_start_offset(p) == max(floors[p], expected[p][0].base_offset)
        assert [r["offset"] for r in log.read("t", p).to_pylist()] == \
            list(range(after.log_start_offset(p), after.high_watermark(p)))
