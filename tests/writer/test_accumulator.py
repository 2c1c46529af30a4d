"""Group commits: how much one commit takes (``max_commit_bytes``), locally and on object stores, and when a
partition's next group may upload while its last one does (``eager_uploads``)."""

from __future__ import annotations

import time
import uuid

import pyarrow as pa
import pytest

from lakelog import Log, PartitionBatch
from lakelog.writer.accumulator import DEFAULT_BATCH_SIZE, DEFAULT_BUFFER_MEMORY, OBJECT_STORE_BUFFER_MEMORY
from lakelog.writer.records import normalize_records


def test_a_group_commit_takes_at_most_max_commit_bytes(tmp_path):
    log = Log(str(tmp_path / "root"))
    log.create_topic("t", 1)
    commits: list[tuple[int, int]] = []
    acc = log.accumulator(linger_ms=300, batch_size=10**9, max_commit_bytes=3_000,
                          on_commit=lambda topic, records, size, seconds: commits.append((records, size)))
    batch = normalize_records(pa.table({"value": [b"x" * 100] * 10}))  # about 1,000 bytes
    futures = [acc.append("t", [PartitionBatch(0, batch)]) for _ in range(9)]  # all queue within linger.ms
    results = [f.result(30) for f in futures]
    acc.close()
    assert [r[0].base_offset for r in results] == list(range(0, 90, 10))  # every batch once, in order
    assert sum(n for n, _ in commits) == 90
    assert len(commits) >= 3, commits  # 9 batches of ~1 KB cannot go in commits of 3 KB fewer than three
    per_batch = commits[0][1] // (commits[0][0] // 10)
    assert all(size <= 3_000 + per_batch for _, size in commits), commits


def test_object_store_commits_may_carry_half_the_buffer_local_ones_four_batches(tmp_path, s3_endpoint):
    from s3_server import BUCKET, s3_options

    s3_log = Log(f"s3://{BUCKET}/acc", storage_options=s3_options(s3_endpoint))
    local, s3, s3_small = (Log(str(tmp_path / "root")).accumulator(), s3_log.accumulator(),
                           s3_log.accumulator(buffer_memory=10 << 20))
    try:
        assert (local.buffer_memory, local.max_commit_bytes) == (DEFAULT_BUFFER_MEMORY, 4 * DEFAULT_BATCH_SIZE)
        assert (s3.buffer_memory, s3.max_commit_bytes) == (OBJECT_STORE_BUFFER_MEMORY, OBJECT_STORE_BUFFER_MEMORY // 2)
        assert (s3_small.buffer_memory, s3_small.max_commit_bytes) == (10 << 20, 5 << 20)
    finally:
        for acc in (local, s3, s3_small):
            acc.close()


@pytest.mark.parametrize("eager", [False, True])
def test_pipelined_group_commits_on_s3_land_every_batch_once_in_order(s3_endpoint, monkeypatch, eager):
    """Through the accumulator on S3, groups are staged on top of each other while earlier commits are in
    flight, with ``eager_uploads`` also several groups of a partition uploading at once; every batch lands once,
    in order. With LAKELOG_PIPELINE_COMMITS=0 the accumulator commits one group
    at a time."""
    from s3_server import BUCKET, s3_options

    log = Log(f"s3://{BUCKET}/{uuid.uuid4().hex}", storage_options=s3_options(s3_endpoint))
    log.create_topic("t", 4)
    commits: list[int] = []
    acc = log.accumulator(linger_ms=1, batch_size=2_000, eager_uploads=eager,
                          on_commit=lambda topic, records, size, seconds: commits.append(records))
    assert acc.append_pipelined is not None
    batch = normalize_records(pa.table({"value": [b"x" * 100] * 10}))
    futures = [acc.append("t", [PartitionBatch(i % 4, batch)]) for i in range(200)]
    results = [f.result(60)[0] for f in futures]
    acc.close()
    for p in range(4):
        assert [r.base_offset for r in results[p::4]] == list(range(0, 500, 10))  # every batch once, in order
    assert sum(commits) == 2_000
    monkeypatch.setenv("LAKELOG_PIPELINE_COMMITS", "0")
    plain = log.accumulator()
    try:
        assert plain.append_pipelined is None
    finally:
        plain.close()


def test_group_commits_report_where_their_time_goes(tmp_path, s3_endpoint):
    """Through the one hook, the Log's ``on_commit_stages``: every group reports its queue time; on S3 each landed group
    also its upload, its wait for the commit ahead and its commit PUT, which together fit inside the time from
    its taking to its acknowledgement."""
    import uuid

    from s3_server import BUCKET, s3_options

    batch = normalize_records(pa.table({"value": [b"x" * 100] * 10}))
    for root in (str(tmp_path / "local"), f"s3://{BUCKET}/{uuid.uuid4().hex}"):
        stages: list[dict[str, float]] = []
        log = Log(root, storage_options=None if root.startswith("/") else s3_options(s3_endpoint),
                  on_commit_stages=lambda topic, s: stages.append(s))
        log.create_topic("t", 4)
        elapsed: list[float] = []
        acc = log.accumulator(linger_ms=1, batch_size=2_000,  # reports its queue times to the same hook
                              on_commit=lambda topic, records, size, seconds: elapsed.append(seconds))
        futures = [acc.append("t", [PartitionBatch(i % 4, batch)]) for i in range(100)]
        assert all(not isinstance(r, Exception) for f in futures for r in f.result(60))
        acc.close()
        queued = [s["queue"] for s in stages if "queue" in s]
        assert len(queued) == len(elapsed) and all(0 <= q < 60 for q in queued)
        later = [s for s in stages if "queue" not in s]
        if root.startswith("/"):
            assert later == []  # a local root commits one group at a time, in one step
            continue
        assert len(later) == len(elapsed), (len(later), len(elapsed))  # one report per landed group
        for s in later:
            assert set(s) == {"upload", "commit_wait", "commit"} and min(s.values()) >= 0, s
        assert sum(sum(s.values()) for s in later) <= sum(elapsed) + 0.01


# (eager_uploads, values in the held group's batch, the next group uploads while that one is held): by default
# any upload holds the partition's next group back; with eager_uploads only one that carries batch.size (2,000
# bytes here) or more
HOLDS = [(False, 2, False), (True, 2, True), (True, 40, False)]


@pytest.mark.parametrize("eager, values, at_once", HOLDS)
def test_whether_an_upload_holds_the_partitions_next_group_back(proxy, eager, values, at_once):
    """Through the real moto server and the fault proxy, which holds the first segment PUT: the next group of the
    same partition uploads at once or waits for it, as :data:`HOLDS` says; either way the commits stay in
    order, the second waiting for the first."""
    from s3_server import BUCKET, s3_options
    from proc_support import wait_for

    log = Log(f"s3://{BUCKET}/{uuid.uuid4().hex}", storage_options=s3_options(proxy.url))
    log.create_topic("t", 1)
    segment = lambda m, p: m == "PUT" and "/topics/t/" in p and ".parquet" in p  # noqa: E731
    held = proxy.stall(segment, 60.0, then="forward")
    acc = log.accumulator(linger_ms=1, batch_size=2_000, eager_uploads=eager)
    try:
        first = acc.append("t", [PartitionBatch(0, normalize_records(pa.table({"value": [b"x" * 100] * values})))])
        wait_for(lambda: len(held.hits) == 1, "the first group's segment PUT, held")
        second = acc.append("t", [PartitionBatch(0, normalize_records(pa.table({"value": [b"y" * 100] * 3})))])
        if at_once:
            wait_for(lambda: sum(1 for m, p, _ in proxy.log if segment(m, p)) == 2, "the second segment PUT")
        else:
            time.sleep(1.0)  # ample for a group taken after linger.ms 1 to reach the proxy, were it let through
            assert sum(1 for m, p, _ in proxy.log if segment(m, p)) == 1
        assert not first.done() and not second.done()  # neither commits before the held segment has landed
        held.release.set()
        a, b = first.result(60)[0], second.result(60)[0]
        assert (a.base_offset, b.base_offset) == (0, values)
        assert sum(1 for m, p, _ in proxy.log if segment(m, p)) == 2
    finally:
        held.release.set()
        acc.close()
