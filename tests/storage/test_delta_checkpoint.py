"""Checkpoints on S3 (moto, through the counting proxy), written by delta-rs from a local copy of the log.

A writer keeps the bodies of its own commits; the checkpoint GETs only the commits other writers made, the
last checkpoint only when its copy is not the store's, and readers -- delta-rs, lakelog's own -- see the same
table as a full replay of the log.
"""

from __future__ import annotations

import re
from collections import Counter
import threading
import uuid

import pytest

from s3_server import BUCKET, s3_options
from lakelog import Log
from lakelog.storage.delta_log import read_tail, txns_at
from lakelog.storage.storage_root import StorageRoot
from bench.s3_proxy import S3FaultProxy

INTERVAL = 10  # Delta's checkpoint interval, in versions, in these tests
COMMIT_GET = re.compile(r"/_delta_log/(\d{20})\.json$")
CHECKPOINT_GET = re.compile(r"/_delta_log/\d{20}\.checkpoint\.parquet$")


@pytest.fixture(autouse=True)
def checkpoint_at_once(monkeypatch):
    import lakelog.writer.checkpointer as checkpointer

    monkeypatch.setattr(checkpointer, "CHECKPOINT_MIN_INTERVAL_S", 0.0)
    monkeypatch.setattr(checkpointer, "DEFAULT_CHECKPOINT_INTERVAL", INTERVAL)


def join_maintenance(topic: str) -> None:
    for t in threading.enumerate():
        if t.name == f"lakelog-maintain-{topic}":
            t.join(60)


def gets(proxy: S3FaultProxy, pattern: re.Pattern) -> list[str]:
    return [t.split("?")[0] for m, t, _ in proxy.log if m == "GET" and pattern.search(t.split("?")[0])]


def last_checkpoint(root: StorageRoot) -> int:
    from lakelog.storage.delta_log import last_checkpoint_version

    return last_checkpoint_version(root, root.path_for("topics", "t"))


def test_checkpoints_on_s3_read_back_only_other_writers_commits(proxy):
    from deltalake import DeltaTable

    root = StorageRoot.resolve(f"s3://{BUCKET}/{uuid.uuid4().hex}", s3_options(proxy.url))
    table_path = root.path_for("topics", "t")
    ours, theirs = Log(root), Log(root)
    ours.create_topic("t", 2)  # version 0: not a commit of the writer's
    ours.append("t", [{"value": b"a"}], partition=0)  # version 1 (the writer opens: it reads the log)
    proxy.log.clear()
    for i in range(1, INTERVAL):  # versions 2-10: the checkpoint at 10 reads back version 0 alone
        ours.append("t", [{"value": f"a{i}".encode()}], partition=0)
    join_maintenance("t")
    assert last_checkpoint(root) == INTERVAL
    assert [int(COMMIT_GET.search(p).group(1)) for p in gets(proxy, COMMIT_GET)] == [0]

    mine, others = [], []
    for i in range(INTERVAL - 1):  # versions 11-19, every other one another writer's (partition 1)
        writer, partition = (theirs, 1) if i % 2 == 0 else (ours, 0)
        writer.append("t", [{"value": f"{'ab'[writer is theirs]}{i}".encode()}], partition=partition)
        (mine if writer is ours else others).append(writer.snapshot("t").version)
    proxy.log.clear()
    ours.append("t", [{"value": b"last"}], partition=0)  # version 20: an interval past our checkpoint
    join_maintenance("t")
    assert last_checkpoint(root) == 20
    read_back = {int(COMMIT_GET.search(p).group(1)) for p in gets(proxy, COMMIT_GET)}
    assert set(others) <= read_back and not read_back & set(mine), (read_back, mine, others)
    # the copy holds the checkpoint it wrote at 10: not downloaded again
    assert not any(f"{INTERVAL:020d}.checkpoint" in p for p in gets(proxy, CHECKPOINT_GET))

    # Readers see the table the log describes: delta-rs from the checkpoint, lakelog from the log.
    live, txns = set(), {}
    for commit in read_tail(root, table_path, -1):
        live = (live | {a["path"] for a in commit.adds}) - {r["path"] for r in commit.removes}
        txns.update(commit.txns)
    dt = DeltaTable(root.uri_for("topics", "t"), storage_options=root.storage_options)
    assert dt.version() == 20 and len(live) == 20
    assert {uri.split("/topics/t/", 1)[1] for uri in dt.file_uris()} == live
    assert txns_at(root, table_path, 20) == txns  # from the checkpoint alone
    fresh = Log(root)
    assert [fresh.describe_topic("t").partitions[p].high_watermark for p in (0, 1)] == [15, 5]
    assert [r["value"] for r in fresh.read("t", 1).to_pylist()] == [f"b{i}".encode() for i in range(0, 9, 2)]
    ours.close()
    theirs.close()


def test_a_checkpoint_after_another_writers_starts_from_it(proxy):
    """The store's last checkpoint is another writer's: it is downloaded once, and none of the commits it
    covers is read."""
    from deltalake import DeltaTable

    root = StorageRoot.resolve(f"s3://{BUCKET}/{uuid.uuid4().hex}", s3_options(proxy.url))
    ours, theirs = Log(root), Log(root)
    ours.create_topic("t", 2)
    for writer, partition, versions in ((ours, 0, range(1, 11)), (theirs, 1, range(11, 21))):
        for v in versions:
            writer.append("t", [{"value": f"v{v}".encode()}], partition=partition)
        join_maintenance("t")
        assert last_checkpoint(root) == versions[-1]  # each writer checkpoints at its interval
    proxy.log.clear()
    ours.append("t", [{"value": b"v21"}], partition=0)  # an interval past its own checkpoint (10): due
    join_maintenance("t")
    assert last_checkpoint(root) == 21
    assert any(f"{20:020d}.checkpoint" in p for p in gets(proxy, CHECKPOINT_GET))
    # 11-20 read once each, to replay what beat our PUT of 11; the checkpoint read none of them again
    reads = Counter(int(COMMIT_GET.search(p).group(1)) for p in gets(proxy, COMMIT_GET))
    assert [reads[v] for v in range(11, 21)] == [1] * 10, reads
    dt = DeltaTable(root.uri_for("topics", "t"), storage_options=root.storage_options)
    assert dt.version() == 21 and len(dt.file_uris()) == 21
    fresh = Log(root)
    assert [fresh.describe_topic("t").partitions[p].high_watermark for p in (0, 1)] == [11, 10]
    ours.close()
    theirs.close()
