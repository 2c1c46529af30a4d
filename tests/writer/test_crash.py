"""Crashes: a writer process killed with SIGKILL leaves the log consistent.

The writer is a real child process (``proc_writer.py``) and the kill is a real
SIGKILL.  To kill it *between* writing its segment files and committing them,
the child wraps ``Committer._commit`` to announce the point through a marker
file and sleep there -- instrumentation of the child; storage is untouched.
Local root and moto S3.
"""

from __future__ import annotations

import json
import os
import random
import signal
import time

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from pyarrow.fs import FileType

from lakelog import Log, PartitionBatch
from lakelog.storage.orphan_files import find_orphan_files
from lakelog.writer.records import normalize_records
from proc_support import Ack, check_log, parse_report, read_direct, root_config, spawn_writer, value_of, wait_for_file


def kill(proc) -> tuple[str, str]:
    os.kill(proc.pid, signal.SIGKILL)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    return out, err


def test_killed_between_segment_write_and_commit_leaves_nothing_visible(root, tmp_path):
    log = Log(root)
    log.create_topic("t", 2)
    before = [*log.append("t", [{"value": value_of(0, 0, 0, j)} for j in range(3)], partition=0),
              *log.append("t", [{"value": value_of(0, 1, 1, j)} for j in range(2)], partition=1)]
    acks = [Ack(0, before[0].base_offset, tuple(value_of(0, 0, 0, j) for j in range(3))),
            Ack(1, before[1].base_offset, tuple(value_of(0, 1, 1, j) for j in range(2)))]
    version = DeltaTable(root.uri_for("topics", "t"), storage_options=root.storage_options).version()

    marker = tmp_path / "paused"
    proc = spawn_writer({"root": root_config(root), "topic": "t", "writer": 7, "appends": 1,
                         "pause": "before_commit", "marker": str(marker)})
    wait_for_file(marker, proc)
    paused = json.loads(marker.read_text())
    out, _ = kill(proc)
    assert parse_report(out.splitlines(), 7)[0] == []  # it never acknowledged anything
    assert paused["leo"] == {"0": 4, "1": 3}  # it was about to commit offsets 3 and 2

    # its segment files are on storage, but nothing of them is visible
    orphans = sorted(paused["paths"])
    assert len(orphans) == 2
    for rel in orphans:
        assert root.filesystem.get_file_info(root.path_for("topics", "t", rel)).type == FileType.File
    dt = DeltaTable(root.uri_for("topics", "t"), storage_options=root.storage_options)
    assert dt.version() == version
    assert not set(orphans) & set(pa.table(dt.get_add_actions(flatten=False)).column("path").to_pylist())
    fresh = Log(root)
    assert [p.high_watermark for p in fresh.describe_topic("t").partitions] == [3, 2]
    records = check_log(root, "t", acks)
    assert sum(len(r) for r in records.values()) == 5
    assert [o.path for o in find_orphan_files(root, "t")] == orphans  # reported, never read

    # the next writer continues exactly where the committed log ends
    nxt = fresh.append("t", [{"value": value_of(1, 0, 0, 0)}], partition=0)[0]
    nxt1 = fresh.append("t", [{"value": value_of(1, 0, 1, 0)}], partition=1)[0]
    assert (nxt.base_offset, nxt1.base_offset) == (3, 2)
    acks += [Ack(0, 3, (value_of(1, 0, 0, 0),)), Ack(1, 2, (value_of(1, 0, 1, 0),))]
    records = check_log(root, "t", acks)
    assert sum(len(r) for r in records.values()) == 7
    child_values = {value_of(7, 0, p, 0) for p in (0, 1)}
    assert not child_values & {v for rows in records.values() for _, v in rows}
    assert [o.path for o in find_orphan_files(root, "t")] == orphans


@pytest.mark.parametrize("accumulator", [False, True], ids=["one-at-a-time", "group-commits"])
def test_killed_at_random_points_during_a_stream_of_appends(root, tmp_path, accumulator):
    """Also through the accumulator, whose group commits are pipelined on object stores (the next group's
    segments upload while the commit before it is in flight): a kill there may leave a staged group's
    segments behind, never a commit that skips one."""
    Log(root).create_topic("t", 2)
    rng = random.Random(20240611)
    acks: list[Ack] = []
    killed_mid_stream = 0
    for round_ in range(3):
        ready, go = tmp_path / f"ready{round_}", tmp_path / f"go{round_}"
        proc = spawn_writer({"root": root_config(root), "topic": "t", "writer": round_, "appends": 100_000,
                             "ready_file": str(ready), "go_file": str(go), "accumulator": accumulator})
        wait_for_file(ready, proc)
        go.touch()
        first = proc.stdout.readline()  # blocks until the child's first result (or its death: "")
        assert '"ack"' in first, (first, proc.poll())
        time.sleep(rng.uniform(0.0, 1.0))
        if proc.poll() is None:
            killed_mid_stream += 1
        out, err = kill(proc)
        round_acks, errors, _ = parse_report([first, *out.splitlines()], round_)
        assert not errors, errors
        acks += round_acks
        # after every kill: dense offsets, everything acknowledged before the kill present exactly once
        check_log(root, "t", acks)
    assert killed_mid_stream == 3
    log = Log(root)
    hws = {p.partition: p.high_watermark for p in log.describe_topic("t").partitions}
    res = log.append_batches("t", [PartitionBatch(p, normalize_records([{"value": value_of(9, 0, p, 0)}]))
                                   for p in (0, 1)])
    assert [r.base_offset for r in res] == [hws[0], hws[1]]
    # records the child committed but could not acknowledge before dying are allowed; nothing else is
    records = check_log(root, "t", acks + [Ack(p, hws[p], (value_of(9, 0, p, 0),)) for p in (0, 1)])
    for p, rows in records.items():
        for _, v in rows:
            assert v.startswith((b"w0-", b"w1-", b"w2-", b"w9-"))


def test_idempotent_batch_committed_by_a_killed_process_is_deduplicated_on_retry(root, tmp_path):
    Log(root).create_topic("t", 2)
    marker = tmp_path / "committed"
    proc = spawn_writer({"root": root_config(root), "topic": "t", "writer": 3, "appends": 1, "idempotent": True,
                         "pause": "after_commit", "marker": str(marker)})
    wait_for_file(marker, proc)
    committed = json.loads(marker.read_text())
    out, _ = kill(proc)  # committed, but killed before it could acknowledge
    acks, _, producer = parse_report(out.splitlines(), 3)
    assert acks == [] and committed["leo"] == {"0": 1, "1": 1}
    pid, epoch = producer["producer_id"], producer["epoch"]

    # another process (this one, with a fresh Log) retries the same (pid, epoch, base_sequence) batches
    log = Log(root)
    retry = log.append_batches("t", [
        PartitionBatch(p, normalize_records([{"key": "k0", "value": value_of(3, 0, p, 0)}]), pid, epoch, 0)
        for p in (0, 1)])
    assert all(r.duplicate for r in retry), retry
    assert [(r.partition, r.base_offset, r.record_count) for r in retry] == [(0, 0, 1), (1, 0, 1)]
    assert [p.high_watermark for p in log.describe_topic("t").partitions] == [1, 1]
    acks = [Ack(p, 0, (value_of(3, 0, p, 0),)) for p in (0, 1)]
    assert sum(len(r) for r in check_log(root, "t", acks).values()) == 2  # nothing written twice

    # and the producer goes on with its next sequence
    nxt = log.append_batches("t", [PartitionBatch(0, normalize_records([{"value": b"next"}]), pid, epoch, 1)])[0]
    assert not nxt.duplicate and nxt.base_offset == 1
    assert read_direct(root, "t")[0] == [(0, value_of(3, 0, 0, 0)), (1, b"next")]
