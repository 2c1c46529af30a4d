"""The ``Consumer`` API against a real front: polling, positions, commits, seeks, pauses, resets, patterns.

Records come straight from storage (the front only handles membership and offsets), so the
:class:`~lakelog.reader.fetcher.Fetcher` is also checked directly: whole row groups, one read per row group,
positions across segment and row-group boundaries.
"""

from __future__ import annotations

import time
import uuid

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from front_process import new_topic
from group_support import wait_until
from lakelog import Log
from lakelog.client import Consumer, ConsumerRecord, OffsetAndMetadata, Producer, TopicPartition
from lakelog.reader.fetcher import Fetcher
from lakelog.errors import InvalidRequest, OffsetOutOfRange

T0 = 1_700_000_000_000


def consumer(front, group: str | None = None, **kwargs) -> Consumer:
    defaults = dict(auto_offset_reset="earliest", session_timeout_ms=3000, heartbeat_interval_ms=200,
                    enable_auto_commit=False)
    return Consumer(front.url, group_id=group, **{**defaults, **kwargs})


def drain(c: Consumer, expected: int, timeout: float = 60) -> list[ConsumerRecord]:
    out: list[ConsumerRecord] = []
    deadline = time.monotonic() + timeout
    while len(out) < expected and time.monotonic() < deadline:
        for records in c.poll(timeout_ms=200).values():
            out.extend(records)
    assert len(out) == expected, f"got {len(out)} of {expected} records"
    return out


def test_poll_commit_committed_position_and_resume(group_front, http):
    topic = new_topic(http, 2)
    with Producer(group_front.url) as producer:
        for i in range(20):
            producer.send(topic, f"v{i}".encode(), key=f"k{i % 5}".encode(), headers=[("h", b"x")],
                          timestamp_ms=T0 + i, partition=i % 2)
        producer.flush(timeout=60)
    group = f"poll-{topic}"
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    with consumer(group_front, group, max_poll_records=7) as c:
        c.subscribe([topic])
        first = c.poll(timeout_ms=10_000)
        assert 0 < sum(map(len, first.values())) <= 7  # max_poll_records bounds a poll
        assert c.assignment() == {tp0, tp1} and c.group_metadata().generation_id >= 1
        records = [r for rs in first.values() for r in rs] + drain(c, 20 - sum(map(len, first.values())))
        got = {(r.partition, r.offset): r for r in records}
        assert len(got) == 20
        r = got[(1, 3)]  # the 8th record: i = 7
        assert (r.topic, r.key, r.value, r.timestamp, r.timestamp_type, r.headers) == \
            (topic, b"k2", b"v7", T0 + 7, 0, [("h", b"x")])
        assert c.position(tp0) == c.position(tp1) == 10
        assert c.committed(tp0) is None  # nothing committed yet (auto-commit is off)
        c.commit({tp0: OffsetAndMetadata(4, "half")})
        assert c.committed(tp0) == 4
        c.commit()  # every position
        assert (c.committed(tp0), c.committed(tp1)) == (10, 10)
        assert c.poll(timeout_ms=0) == {}
    # another member of the group resumes where the group committed
    Log(group_front.root).append(topic, [{"value": b"late"}], partition=0)
    with consumer(group_front, group, auto_offset_reset="none") as c:
        c.subscribe([topic])
        (late,) = drain(c, 1)
        assert (late.partition, late.offset, late.value) == (0, 10, b"late")


def test_manual_assignment_seeks_pause_resume_and_times(group_front, http):
    topic = new_topic(http, 2)
    log = Log(group_front.root)
    log.append(topic, [{"value": f"a{i}".encode(), "timestamp": T0 + 1000 * i} for i in range(10)], partition=0)
    log.append(topic, [{"value": f"b{i}".encode(), "timestamp": T0 + 1000 * i} for i in range(5)], partition=1)
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    with consumer(group_front) as c:  # no group: manual assignment only
        with pytest.raises(InvalidRequest, match="not subscribed"):
            c.poll()
        c.assign([tp0, (topic, 1)])
        assert c.assignment() == {tp0, tp1}
        assert c.position(tp0) == 0  # auto_offset_reset=earliest, nothing committed
        c.seek(tp0, 7)
        c.seek_to_end(tp1)
        assert [(r.partition, r.offset) for r in drain(c, 3)] == [(0, 7), (0, 8), (0, 9)]
        c.seek_to_beginning(tp1)
        c.pause(tp1)
        assert c.paused() == {tp1}
        c.seek(tp0, 2)
        got = c.poll(timeout_ms=300)
        assert set(got) == {tp0} and got[tp0][0].offset == 2  # the paused partition returns nothing
        c.resume(tp1)
        c.seek(tp0, 10)
        assert [r.offset for r in drain(c, 5)] == [0, 1, 2, 3, 4] and c.position(tp1) == 5
        found = c.offsets_for_times({tp0: T0 + 3500, tp1: T0 + 10_000})
        assert (found[tp0].offset, found[tp0].timestamp) == (4, T0 + 4000) and found[tp1] is None
        assert c.beginning_offsets([tp0]) == {tp0: 0} and c.end_offsets([tp0, tp1]) == {tp0: 10, tp1: 5}
        with pytest.raises(InvalidRequest):
            c.seek(TopicPartition(topic, 5), 0)  # not assigned
        with pytest.raises(InvalidRequest):
            c.seek(tp0, -1)
        with pytest.raises(InvalidRequest):
            c.subscribe([topic])  # no group id, and assign() was used


def test_auto_offset_reset(group_front, http):
    topic = new_topic(http, 1)
    Log(group_front.root).append(topic, [{"value": b"old"}] * 3, partition=0)
    tp = TopicPartition(topic, 0)
    with consumer(group_front, f"latest-{topic}", auto_offset_reset="latest") as c:
        c.subscribe([topic])
        assert c.poll(timeout_ms=2000) == {} and c.assignment() == {tp}
        assert c.position(tp) == 3
        Log(group_front.root).append(topic, [{"value": b"new"}], partition=0)
        assert [(r.offset, r.value) for r in drain(c, 1)] == [(3, b"new")]
    with consumer(group_front, f"none-{topic}", auto_offset_reset="none") as c:
        c.subscribe([topic])
        with pytest.raises(OffsetOutOfRange) as e:
            c.poll(timeout_ms=5000)  # no committed offset and no reset policy
        assert e.value.code == 1 and "auto_offset_reset is 'none'" in str(e.value)
    with consumer(group_front) as c:
        c.assign([tp])
        c.seek(tp, 99)  # past the high watermark: reset by policy (earliest)
        assert drain(c, 4)[0].offset == 0
    with pytest.raises(InvalidRequest):
        consumer(group_front, auto_offset_reset="smallest")


def test_pattern_subscription_picks_up_a_new_topic(group_front, http):
    prefix = f"pat{uuid.uuid4().hex[:6]}"
    assert http.post("/v1/topics", json={"name": f"{prefix}-a", "partitions": 1}).status_code == 201
    log = Log(group_front.root)
    log.append(f"{prefix}-a", [{"value": b"a"}], partition=0)
    with consumer(group_front, f"g-{prefix}", metadata_max_age_ms=300) as c:
        c.subscribe(pattern=rf"{prefix}-.*")
        assert [r.topic for r in drain(c, 1)] == [f"{prefix}-a"]
        c.commit()  # else the eager rebalance for the new topic would re-read it from the start
        assert http.post("/v1/topics", json={"name": f"{prefix}-b", "partitions": 2}).status_code == 201
        log.append(f"{prefix}-b", [{"value": b"b"}], partition=1)
        assert [(r.topic, r.partition, r.value) for r in drain(c, 1)] == [(f"{prefix}-b", 1, b"b")]
        assert c.subscription() == {f"{prefix}-a", f"{prefix}-b"}
        assert {tp.topic for tp in c.assignment()} == {f"{prefix}-a", f"{prefix}-b"}


def test_auto_commit_and_commit_async(group_front, http):
    topic = new_topic(http, 1)
    Log(group_front.root).append(topic, [{"value": b"x"}] * 5, partition=0)
    tp = TopicPartition(topic, 0)
    group = f"auto-{topic}"
    with consumer(group_front, group, enable_auto_commit=True, auto_commit_interval_ms=100) as c:
        c.subscribe([topic])
        drain(c, 5)
        time.sleep(0.2)
        c.poll(timeout_ms=100)  # the next poll commits what the previous ones returned
        assert c.committed(tp) == 5
        done = []
        fut = c.commit_async({tp: 2}, callback=lambda offsets, err: done.append((dict(offsets), err)))
        assert fut.result(timeout=30) == {tp: 2}
        wait_until(lambda: done, what="the commit callback")
        assert done == [({tp: 2}, None)] and c.committed(tp) == 2
        bad = c.commit_async({TopicPartition(topic, 7): 1})  # no such partition
        with pytest.raises(Exception) as e:
            bad.result(timeout=30)
        assert getattr(e.value, "code", None) == 3  # UNKNOWN_TOPIC_OR_PARTITION: nothing is written
    with consumer(group_front, group) as c:  # close() committed the final position
        c.subscribe([topic])
        c.poll(timeout_ms=2000)
        assert c.position(tp) == 5


def test_fetcher_reads_each_row_group_once_across_boundaries(tmp_path):
    log = Log(str(tmp_path / "root"))
    log.create_topic("big", 1)
    n = 300_000  # several row groups in the first segment
    log.append("big", pa.table({"value": pa.array([b"v"] * n, pa.binary())}), partition=0)
    log.append("big", [{"value": b"tail"}] * 5, partition=0)  # a second segment
    first = log.segments("big", 0)[0]
    rg = pq.ParquetFile(str(tmp_path / "root" / "topics" / "big" / first.path)).metadata.row_group(0).num_rows
    assert rg < n
    tp = TopicPartition("big", 0)
    fetcher = Fetcher(log, max_partition_fetch_bytes=1)  # one row group per fetch
    table, pos = fetcher.take(tp, 0, 10)
    assert table.column("offset").to_pylist() == list(range(10)) and pos == 10
    assert fetcher.buffered(tp) == rg - 10  # the rest of the first row group is buffered
    table, pos = fetcher.take(tp, 10, 10**9)
    assert (table.num_rows, pos) == (rg - 10, rg) and fetcher.buffered(tp) == 0
    while pos < n:  # then one row group per fetch, each read once
        table, next_pos = fetcher.take(tp, pos, 10**9)
        assert (table.column("offset")[0].as_py(), next_pos) == (pos, min(pos + rg, n))
        pos = next_pos
    table, pos = fetcher.take(tp, pos, 10**9)
    assert table.column("value").to_pylist() == [b"tail"] * 5 and pos == n + 5
    assert fetcher.take(tp, pos, 10) == (None, pos)  # at the high watermark
    table, pos = fetcher.take(tp, 123_456, 3)  # a seek drops the buffer and starts mid row group
    assert table.column("offset").to_pylist() == [123_456, 123_457, 123_458] and pos == 123_459
    with pytest.raises(OffsetOutOfRange):
        fetcher.take(tp, n + 6, 1)
    everything = Fetcher(log, max_partition_fetch_bytes=64 << 20)  # the whole partition in one go
    table, pos = everything.take(tp, 0, 10**9)
    assert table.num_rows == n + 5 and pos == n + 5
    assert table.column("offset").to_pylist() == list(range(n + 5))


def test_consumer_on_an_s3_root(start_group_front, s3_endpoint, monkeypatch):
    env = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1",
           "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL": s3_endpoint, "AWS_ALLOW_HTTP": "true"}
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    front = start_group_front(env=env, root=f"s3://lakelog-test/groups-{uuid.uuid4().hex[:8]}")
    with front.client() as http:
        topic = new_topic(http, 2)
        r = http.post(f"/v1/topics/{topic}/records", json={"records": [{"value": f"s3-{i}", "partition": i % 2}
                                                                      for i in range(10)]})
        assert r.status_code == 200, r.text
    with consumer(front, f"s3-{topic}") as c:  # the root (s3://...) comes from the front's /v1/health
        c.subscribe([topic])
        values = sorted(r.value for r in drain(c, 10))
        assert values == sorted(f"s3-{i}".encode() for i in range(10))
        c.commit()
        assert c.committed(TopicPartition(topic, 1)) == 5


def test_partition_count_change_rebalances_the_group(group_front, http):
    topic = new_topic(http, 1)
    with consumer(group_front, f"grow-{topic}") as c:
        c.subscribe([topic])
        c.poll(timeout_ms=2000)
        assert c.assignment() == {TopicPartition(topic, 0)}
        generation = c.group_metadata().generation_id
        assert http.patch(f"/v1/topics/{topic}", json={"partitions": 3}).status_code == 200
        Log(group_front.root).append(topic, [{"value": b"new partition"}], partition=2)

        got: list = []

        def grown():
            for records in c.poll(timeout_ms=100).values():
                got.extend(records)
            return len(c.assignment()) == 3 and got
        wait_until(grown, what="the coordinator to notice the new partitions and the new record")
        assert c.group_metadata().generation_id > generation
        assert [(r.partition, r.value) for r in got] == [(2, b"new partition")]
