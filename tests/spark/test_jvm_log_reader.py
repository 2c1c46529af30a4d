"""The JVM reader of a topic's Delta log (``io.lakelog.spark.DeltaLogReader``) against lakelog's own.

Random histories on a local root -- appends, delete-records, more partitions, retention, Delta
checkpoints, delete and recreate -- and at every version the JVM's live segments, high watermarks, log
start offsets, topic id and deleted flag equal those of lakelog's replay (``TopicSnapshot.apply``); at the
latest version they also equal ``Log.snapshot`` (the persisted index plus the log tail). The JVM classes
are built by the install step (``python -m lakelog.spark.jvm_build``); a missing jar fails these tests.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from hypothesis import HealthCheck, given, settings, strategies as st

from lakelog import Log
from lakelog.compaction.retention_job import run_retention
from lakelog.spark import jvm_build
from lakelog.storage.delta_log import read_tail
from lakelog.storage.producer_state import ProducerStateManager
from lakelog.storage.segment_index import SegmentIndex
from lakelog.storage.storage_root import StorageRoot
from lakelog.storage.topic_snapshot import TopicSnapshot

TOPIC = "t"


def jvm_states(table: str, versions: list[int]) -> list[dict]:
    assert jvm_build.JAR.exists(), f"{jvm_build.JAR} is missing: `make install` builds it (javac)"
    proc = subprocess.run(["java", "-cp", jvm_build.classpath(), "io.lakelog.spark.LogStateMain", table,
                           *map(str, versions)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines()]


def python_state(snap: TopicSnapshot) -> dict:
    return {"version": snap.version, "topic_id": snap.topic_id, "deleted": snap.deleted,
            "partitions": [{"partition": p, "high_watermark": snap.high_watermark(p),
                            "log_start_offset": snap.log_start_offset(p),
                            "segments": sorted((s.path for s in snap.index.segments(p)),
                                               key=lambda path: (int(path.split("/")[1][:20]), path))}
                           for p in range(snap.partition_count)]}


def replayed_states(root: StorageRoot) -> list[dict]:
    """lakelog's state after each commit, replayed from the first."""
    snap = TopicSnapshot(TOPIC, -1, {}, SegmentIndex(), {}, ProducerStateManager())
    out = []
    for commit in read_tail(root, root.path_for("topics", TOPIC), -1):
        snap.apply(commit)
        out.append(python_state(snap))
    return out


OPS = st.lists(st.one_of(
    st.tuples(st.just("append"), st.integers(0, 3), st.integers(1, 30)),
    st.tuples(st.just("delete_records"), st.integers(0, 3), st.floats(0, 1)),
    st.tuples(st.just("add_partition")),
    st.tuples(st.just("retention")),
    st.tuples(st.just("checkpoint")),
    st.tuples(st.just("recreate")),
), min_size=1, max_size=12)


def apply_ops(root: StorageRoot, ops) -> None:
    from deltalake import DeltaTable

    log = Log(root)
    log.create_topic(TOPIC, 2, {"retention.ms": "3600000"})
    for op in ops:
        snap = log.snapshot(TOPIC)
        n = snap.partition_count
        if op[0] == "append":
            log.append(TOPIC, [{"value": os.urandom(8)} for _ in range(op[2])], partition=op[1] % n)
        elif op[0] == "delete_records":
            p = op[1] % n
            log.delete_records(TOPIC, p, snap.log_start_offset(p)
                               + int((snap.high_watermark(p) - snap.log_start_offset(p)) * op[2]))
        elif op[0] == "add_partition":
            log.alter_topic(TOPIC, partitions=n + 1)
        elif op[0] == "retention":
            run_retention(root, [TOPIC], now_ms=int(time.time() * 1000) + 7_200_000)
        elif op[0] == "checkpoint":
            DeltaTable(root.uri_for("topics", TOPIC)).create_checkpoint()
        elif op[0] == "recreate":
            log.delete_topic(TOPIC)
            log = Log(root)
            log.create_topic(TOPIC, 2, {"retention.ms": "3600000"})
    log.close()


@settings(max_examples=int(os.environ.get("LAKELOG_JVM_PARITY_EXAMPLES", "10")), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS)
def test_the_jvm_reader_agrees_with_lakelog_at_every_version(tmp_path_factory, ops):
    root = StorageRoot.resolve(str(tmp_path_factory.mktemp("jvm")))
    apply_ops(root, ops)
    expected = replayed_states(root)
    versions = list(range(len(expected)))
    assert jvm_states(root.path_for("topics", TOPIC), versions) == expected
    latest = Log(root).snapshot(TOPIC)
    assert jvm_states(root.path_for("topics", TOPIC), [])[0] == python_state(latest) == expected[-1]


def test_a_table_with_an_unknown_reader_feature_is_refused(tmp_path):
    root = StorageRoot.resolve(str(tmp_path))
    Log(root).create_topic(TOPIC, 1)
    table = Path(root.path_for("topics", TOPIC))
    (table / "_delta_log" / f"{1:020d}.json").write_text(json.dumps(
        {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["deletionVectors"],
                      "writerFeatures": ["deletionVectors"]}}) + "\n")
    proc = subprocess.run(["java", "-cp", jvm_build.classpath(), "io.lakelog.spark.LogStateMain", str(table)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 3, (proc.stdout, proc.stderr)
    assert "deletionVectors" in proc.stderr and "reader version 1" in proc.stderr


def test_without_javac_the_build_says_so_and_builds_nothing(tmp_path):
    java_free = ":".join(p for p in os.environ["PATH"].split(":") if not (Path(p) / "javac").exists())
    before = jvm_build.JAR.stat().st_mtime_ns if jvm_build.JAR.exists() else None
    proc = subprocess.run([sys.executable, "-m", "lakelog.spark.jvm_build"], capture_output=True, text=True,
                          env={**os.environ, "PATH": java_free}, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "javac not found" in proc.stdout
    assert (jvm_build.JAR.stat().st_mtime_ns if jvm_build.JAR.exists() else None) == before
