"""The JVM source's consumer-group commits (ConsumerGroupOffsets) in lakelog's ``__consumer_offsets`` topic:
the records, partition and Delta commits lakelog's Python OffsetStore writes and reads, also when both commit
to the same partition at once (put-if-absent conflicts, re-read, retry), on a local root (a hard link) and on the
moto S3 server (a conditional PUT, through S3A's conditional create and through the AWS SDK v2 client)."""

from __future__ import annotations

import json
import threading
import uuid

import pytest

from lakelog import Log
from lakelog.group.consumer_offsets import OFFSETS_TOPIC, OffsetStore
from lakelog.storage.storage_root import StorageRoot
from lakelog.writer.partitioner import partition_for_key

from s3_server import BUCKET, s3_options


def jvm_store(spark, log, mode: str = "auto"):
    """The JVM store of ``log``'s root with its storage options; on S3 its conditional create forced to ``mode``
    (``s3a``: S3A's createFile, ``sdk``: the AWS SDK v2 client, ``auto``: the first this Hadoop has)."""
    storage = spark._jvm.java.util.HashMap()
    for k, v in log.root.options:
        storage.put(k, v)
    return spark._jvm.io.lakelog.spark.ConsumerGroupOffsets.of(log.root.uri, storage, mode)


@pytest.fixture(params=["local", "s3:s3a", "s3:sdk"])
def log_and_mode(request, tmp_path):
    """A fresh log on a local root or on moto, and the conditional create its S3 commits go through."""
    kind, _, mode = request.param.partition(":")
    if kind == "local":
        return Log(StorageRoot.resolve(str(tmp_path / "root"))), "auto"
    endpoint = request.getfixturevalue("s3_endpoint")
    return Log(StorageRoot.resolve(f"s3://{BUCKET}/{uuid.uuid4().hex}", s3_options(endpoint))), mode


def test_jvm_commits_read_by_python_in_the_group_partition(spark, log):
    store = jvm_store(spark, log)
    groups = ["a", "ab", "abc", "abcd", "abcdefg", "spark-readers", "gröup-ü"]  # every murmur2 tail length, UTF-8
    for i, group in enumerate(groups):
        store.commitJson(group, json.dumps({"orders": {"0": 10 + i, "1": 20 + i}}))  # creates the topic first
    snap = log.snapshot(OFFSETS_TOPIC)
    count = snap.partition_count
    expected_records = {p: 0 for p in range(count)}
    for group in groups:
        expected_records[partition_for_key(group.encode(), count)] += 2
    assert {p: snap.high_watermark(p) for p in range(count)} == expected_records
    python = OffsetStore(log)
    for i, group in enumerate(groups):
        got = {(c.topic, c.partition): (c.offset, c.metadata) for c in python.fetch(group)}
        assert got == {("orders", 0): (10 + i, "spark"), ("orders", 1): (20 + i, "spark")}
        assert json.loads(store.fetchJson(group)) == {"orders": {"0": 10 + i, "1": 20 + i}}
    python.commit("abc", [("orders", 0, 99, "python")])  # and the JVM reads the Python store's commits
    assert json.loads(store.fetchJson("abc")) == {"orders": {"0": 99, "1": 22}}


def test_concurrent_jvm_and_python_commits_to_one_partition(spark, log_and_mode):
    log, mode = log_and_mode
    python = OffsetStore(log)  # creates the topic
    store = jvm_store(spark, log, mode)
    rounds, errors = 25 if log.root.is_local else 12, []

    def commits(fn):
        try:
            for i in range(1, rounds + 1):
                fn(i)
        except BaseException as e:  # surfaced by the assertion below
            errors.append(e)

    threads = [threading.Thread(target=commits, args=(lambda i: store.commitJson("g", json.dumps({"jvm": {"0": i}})),)),
               threading.Thread(target=commits, args=(lambda i: python.commit("g", [("py", 0, i, "spark")]),))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not errors, errors
    assert {(c.topic, c.offset) for c in OffsetStore(log).fetch("g")} == {("jvm", rounds), ("py", rounds)}
    p = partition_for_key(b"g", log.snapshot(OFFSETS_TOPIC).partition_count)
    assert log.snapshot(OFFSETS_TOPIC).high_watermark(p) == 2 * rounds  # every commit landed once
    records = log.read(OFFSETS_TOPIC, p).to_pydict()
    assert records["offset"] == list(range(2 * rounds))  # one record per commit, offsets contiguous
    keys = [json.loads(k) for k in records["key"]]
    for topic in ("jvm", "py"):  # each writer's commits in its order
        values = [json.loads(v)["offset"] for k, v in zip(keys, records["value"]) if k == ["g", topic, 0]]
        assert values == list(range(1, rounds + 1)), topic
