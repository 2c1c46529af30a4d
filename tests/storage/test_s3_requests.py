"""The S3 requests of a front's small-object paths, counted by the proxy in front of moto.

On S3 a LIST is priced as a PUT (12.5 times a GET or HEAD) and every request is a round trip, so the paths a
front runs again and again are one request each: an existence probe is one HEAD (not pyarrow's HEAD and then,
for a missing key, a LIST for a "directory" of the name), so a snapshot that finds nothing new costs two HEADs;
a persisted snapshot index is written with one PUT (not a multipart upload) and read with one GET; and a
writer's background read of the producers table that finds nothing new is one HEAD.
"""

from __future__ import annotations

import threading
import uuid

import pytest

from s3_server import BUCKET, s3_options
from lakelog import Log
from lakelog.errors import ProducerFenced
from lakelog.storage.delta_log import file_exists
from lakelog.storage.producer_ids import ProducerRegistry
from lakelog.storage.storage_root import StorageRoot
from lakelog.storage.topic_snapshot import load_persisted
from bench.s3_proxy import S3FaultProxy, operation


def requests(proxy: S3FaultProxy) -> list[tuple[str, str]]:
    """(operation, key) of each request since the log was cleared."""
    return [(operation(m, t), t.split("?")[0].split(f"/{BUCKET}/", 1)[-1]) for m, t, _ in proxy.log]


def root_on(proxy: S3FaultProxy) -> StorageRoot:
    return StorageRoot.resolve(f"s3://{BUCKET}/{uuid.uuid4().hex}", s3_options(proxy.url))


def test_a_snapshot_with_nothing_new_costs_two_heads(proxy):
    root = root_on(proxy)
    log, other = Log(root), Log(root)
    log.create_topic("t", 1)
    log.append("t", [{"value": b"a"}], partition=0)
    version = other.snapshot("t").version
    proxy.log.clear()
    assert other.snapshot("t").version == version
    # the next commit, missing, then the table's first (a table removed by hand must not answer from the cache)
    assert [(op, key.split("/", 1)[1]) for op, key in requests(proxy)] == [
        ("HEAD", f"topics/t/_delta_log/{version + 1:020d}.json"), ("HEAD", f"topics/t/_delta_log/{0:020d}.json")]

    log.append("t", [{"value": b"b"}], partition=0)  # now the probe finds it and the snapshot advances
    assert other.snapshot("t").version == version + 1
    assert other.fetch("t", 0, 1).records.column("value").to_pylist() == [b"b"]


@pytest.mark.parametrize("exists", [True, False])
def test_file_exists_is_one_head_either_way(proxy, exists):
    root = root_on(proxy)
    log = Log(root)
    log.create_topic("t", 1)
    path = root.path_for("topics", "t", "_delta_log", f"{0 if exists else 7:020d}.json")
    proxy.log.clear()
    assert file_exists(root, path) is exists
    assert [op for op, _ in requests(proxy)] == ["HEAD"]


def test_a_snapshot_index_is_one_put_and_read_with_one_get(proxy):
    root = root_on(proxy)
    log = Log(root)
    log.create_topic("t", 2)
    for i in range(3):
        log.append("t", [{"value": f"v{i}".encode()}], partition=i % 2)
    snap = log.snapshot("t")
    proxy.log.clear()
    stored = snap.persist(root)
    writes = [(op, key) for op, key in requests(proxy) if op in ("PUT", "POST")]
    assert writes == [("PUT", stored.split(f"{BUCKET}/", 1)[1])]

    proxy.log.clear()
    loaded = load_persisted(root, "t")
    assert loaded is not None and loaded.version == snap.version and list(loaded.index) == list(snap.index)
    assert sorted(op for op, _ in requests(proxy)) == ["GET", "LIST"]  # the listing of the index, then one GET


def test_a_background_read_of_the_producers_table_with_nothing_new_is_one_head(proxy):
    """Writers re-read the producers table once a second (epochs bumped elsewhere): when nothing was committed
    since, that is one HEAD of its next commit, not delta-rs's LIST of the log and GET of its last checkpoint."""
    root = root_on(proxy)
    registry, other = ProducerRegistry(root), ProducerRegistry(root)
    ids = [registry.init_producer("tx")]
    for _ in range(2):  # the first opens the refresher's own handle; the second brings it up to date
        refreshed(registry)
    version = registry_version(root)
    proxy.log.clear()
    refreshed(registry)
    next_commit = root.path_for("_lakelog", "producers", "_delta_log", f"{version + 1:020d}.json")
    assert requests(proxy) == [("HEAD", next_commit.split("/", 1)[1])]

    ids.append(other.init_producer("tx"))  # another process bumps the epoch: the next read finds and applies it
    proxy.log.clear()
    refreshed(registry)
    assert "LIST" in [op for op, _ in requests(proxy)]
    with pytest.raises(ProducerFenced):
        registry.check(ids[0].producer_id, ids[0].producer_epoch)


def refreshed(registry: ProducerRegistry) -> None:
    """Ask for a background read of the producers table and wait for it."""
    registry.refresh_soon(0)
    for t in threading.enumerate():
        if t.name == "lakelog-producer-epochs":
            t.join(60)


def registry_version(root: StorageRoot) -> int:
    from deltalake import DeltaTable

    return DeltaTable(root.uri_for("_lakelog", "producers"), storage_options=root.storage_options).version()
