"""The JVM source's Delta-log reader agrees with lakelog's Python one at every version of random histories.

Histories mix appends, delete-records (the log start floor), key compaction and segment merges (segments removed
and re-added with gaps), delta-rs checkpoints (read by the JVM through ``_last_checkpoint`` or the newest one at or
below a version). At every version the JVM's live segments, high watermarks and log start offsets equal those of
the Python ``TopicSnapshot`` replayed to the same version: on a local root and on the moto S3 server (the JVM
through hadoop-aws's S3A, fewer examples).
"""

from __future__ import annotations

import json
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakelog import Log
from lakelog.storage.delta_log import read_tail
from lakelog.storage.producer_state import ProducerStateManager
from lakelog.storage.segment_index import SegmentIndex
from lakelog.storage.storage_root import StorageRoot
from lakelog.storage.topic_snapshot import TopicSnapshot

from s3_server import BUCKET, s3_options

OPS = st.lists(st.one_of(
    st.tuples(st.just("append"), st.integers(0, 2), st.integers(1, 30)),
    st.tuples(st.just("delete"), st.integers(0, 2), st.integers(0, 40)),
    st.tuples(st.just("checkpoint"), st.just(0), st.just(0)),
    st.tuples(st.just("compact"), st.just(0), st.just(0)),
    st.tuples(st.just("merge"), st.just(0), st.just(0)),
), min_size=1, max_size=12)


def python_state(root, topic: str, version: int) -> dict:
    snap = TopicSnapshot(topic, -1, {}, SegmentIndex(), {}, ProducerStateManager())
    for commit in read_tail(root, root.path_for("topics", topic), -1, version):
        snap.apply(commit)
    segs = sorted([s.partition, s.base_offset, s.last_offset, s.records, s.bytes, s.min_timestamp, s.max_timestamp,
                   s.path] for s in snap.index)
    n = snap.partition_count
    return {"version": snap.version, "txns": dict(sorted(snap.txns.items())), "segments": segs,
            "high_watermarks": {str(p): snap.high_watermark(p) for p in range(n)},
            "log_start_offsets": {str(p): snap.log_start_offset(p) for p in range(n)}}


def jvm_state(spark, root, topic: str, version: int, advanced_from: int | None = None) -> dict:
    """The JVM reader's state at ``version``; with ``advanced_from``, loaded there and advanced to the latest."""
    storage = spark._jvm.java.util.HashMap()
    for k, v in root.options:
        storage.put(k, v)
    source = spark._jvm.io.lakelog.spark.LakelogSource
    state = json.loads(source.topicStateJson(root.uri, storage, topic, version) if advanced_from is None
                       else source.advancedTopicStateJson(root.uri, storage, topic, advanced_from))
    state.pop("configuration")
    state["segments"] = sorted(state["segments"])
    return state


def apply_op(spark, log, op, p, n, step):
    from deltalake import DeltaTable

    if op == "append":
        log.append("t", [{"key": f"k{i % 4}", "value": f"v{step}-{i}", "timestamp": 1_700_000_000_000 + 1000 * i}
                         for i in range(n)], partition=p)
    elif op == "delete":
        hw = log.snapshot("t").high_watermark(p)
        if hw:
            log.delete_records("t", p, min(n, hw))
    elif op == "checkpoint":
        DeltaTable(log.root.uri_for("topics", "t"), storage_options=log.root.storage_options).create_checkpoint()
    elif op == "compact":
        from lakelog.maintenance.cleaner import run_compaction

        run_compaction(spark, log.root, ["t"], min_dirty_ratio=-1)
    elif op == "merge":
        from lakelog.maintenance.segment_merge import run_merge

        run_merge(spark, log.root, ["t"], segment_bytes=1 << 30)


def check_every_version(spark, log, ops):
    log.create_topic("t", 3, {"cleanup.policy": "compact,delete"})
    for step, (op, p, n) in enumerate(ops):
        apply_op(spark, log, op, p, n, step)
    latest = log.snapshot("t").version
    for v in range(latest + 1):
        assert jvm_state(spark, log.root, "t", v) == python_state(log.root, "t", v), f"version {v}"
    assert jvm_state(spark, log.root, "t", -1)["version"] == latest


@pytest.mark.slow
@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
@given(ops=OPS)
def test_jvm_log_state_equals_python_at_every_version(spark, tmp_path_factory, ops):
    check_every_version(spark, Log(str(tmp_path_factory.mktemp("parity") / "root")), ops)


@pytest.mark.slow
@pytest.mark.s3
@settings(max_examples=5, deadline=None, suppress_health_check=list(HealthCheck))
@given(ops=OPS)
def test_jvm_log_state_equals_python_at_every_version_on_s3(spark, s3_endpoint, ops):
    check_every_version(spark, Log(StorageRoot.resolve(f"s3://{BUCKET}/{uuid.uuid4().hex}",
                                                       s3_options(s3_endpoint))), ops)


# Versions around the JVM reader's read windows (TopicState.readCommits: 4, 8, 16, then 32 at a time when loading;
# 1, 2, 4, ... when advancing): each window's first and last commit, and the ends of the log.
LONG_TAIL = 75
WINDOW_EDGES = (0, 1, 3, 4, 5, 11, 12, 13, 27, 28, 29, 59, 60, 61, 74, 75)


@pytest.mark.parametrize("where", ["local", pytest.param("s3", marks=pytest.mark.s3)])
def test_jvm_reads_a_long_commit_tail_in_windows(spark, tmp_path, where, request):
    """A tail of 75 commits with no checkpoint crosses every read window: the state at each window's edges, the
    latest, and every advance from an earlier version equal the Python reader's."""
    if where == "local":
        root = StorageRoot.resolve(str(tmp_path / "root"))
    else:
        root = StorageRoot.resolve(f"s3://{BUCKET}/{uuid.uuid4().hex}", s3_options(request.getfixturevalue("s3_endpoint")))
    log = Log(root)
    log.create_topic("t", 2)
    for i in range(LONG_TAIL):
        log.append("t", [{"value": f"v{i}"}], partition=i % 2)
    latest = log.snapshot("t").version
    assert latest == LONG_TAIL
    want_latest = python_state(root, "t", latest)
    for v in WINDOW_EDGES:
        assert jvm_state(spark, root, "t", v) == python_state(root, "t", v), f"version {v}"
        assert jvm_state(spark, root, "t", -1, advanced_from=v) == want_latest, f"advanced from {v}"
    assert jvm_state(spark, root, "t", -1) == want_latest
    assert want_latest["high_watermarks"] == {"0": 38, "1": 37}
