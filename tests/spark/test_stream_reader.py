"""The stream reader's offset logic driven directly, as Spark's engine drives it (no query).

Admission control, AvailableNow targets, new partitions, data loss and the offsets JSON are checked call by
call here, where time and order are under the test's control; test_streaming.py runs real queries. The tests
taking ``stream_reader`` run twice: on the Python source's LakelogStreamReader and on the JVM source's
LakelogMicroBatchStream (through py4j, in the shared session's JVM), which must behave identically.
"""

from __future__ import annotations

import time

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, ReadMinRows

from lakelog import Log
from lakelog.errors import OffsetOutOfRange
from lakelog.spark.read_plan import SegmentSlice
from lakelog.spark.spark_source import KAFKA_SCHEMA, LakelogDataSource
from lakelog.storage.storage_root import StorageRoot

from spark_support import JvmStreamReader, produce


@pytest.fixture
def local_log(tmp_path):
    return Log(StorageRoot.resolve(str(tmp_path / "root")))


def python_stream_reader(log, **options):
    opts = {"path": log.root.uri, **{k.lower(): str(v) for k, v in options.items()}}
    return LakelogDataSource(opts).streamReader(KAFKA_SCHEMA)


@pytest.fixture(params=["python", "jvm"])
def stream_reader(request):
    """``stream_reader(log, **options)``: a stream reader of the Python source, or of the JVM source."""
    if request.param == "python":
        return python_stream_reader
    spark = request.getfixturevalue("spark")
    return lambda log, **options: JvmStreamReader(spark, {"path": log.root.uri,
                                                          **{k: str(v) for k, v in options.items()}})


def planned(reader, start, end) -> dict[tuple[str, int], list[int]]:
    if isinstance(reader, JvmStreamReader):
        return reader.planned(start, end)
    out: dict[tuple[str, int], list[int]] = {}
    for part in reader.partitions(start, end):
        for s in part.task.slices:
            out.setdefault((s.topic, s.partition), []).extend(range(s.start, s.end))
    return out


def test_max_offsets_per_trigger_and_all_available(local_log, stream_reader):
    local_log.create_topic("t", 2)
    produce(local_log, "t", 0, 90)
    produce(local_log, "t", 1, 10)
    r = stream_reader(local_log, subscribe="t", startingOffsets="earliest", maxOffsetsPerTrigger=20)
    assert r.getDefaultReadLimit() == ReadMaxRows(20)
    start = r.initialOffset()
    assert start == {"t": {"0": 0, "1": 0}}
    end = r.latestOffset(start, r.getDefaultReadLimit())
    assert end == {"t": {"0": 18, "1": 2}}  # prorated by lag: 90 and 10
    assert sum(len(v) for v in planned(r, start, end).values()) == 20
    # the engine may override the options' limit (e.g. Trigger.Once): then everything is admitted
    assert r.latestOffset(end, ReadAllAvailable()) == {"t": {"0": 90, "1": 10}}
    assert r.latestOffset({"t": {"0": 90, "1": 10}}, r.getDefaultReadLimit()) == {"t": {"0": 90, "1": 10}}
    assert r.reportLatestOffset() == {"t": {"0": 90, "1": 10}}


def test_min_offsets_per_trigger_waits_for_data_or_the_max_delay(local_log, stream_reader):
    local_log.create_topic("t", 1)
    produce(local_log, "t", 0, 5)
    r = stream_reader(local_log, subscribe="t", startingOffsets="earliest", minOffsetsPerTrigger=10,
                      maxTriggerDelay="2s")
    limit = r.getDefaultReadLimit()
    assert limit == ReadMinRows(10)
    start = r.initialOffset()
    first = r.latestOffset(start, limit)  # the first trigger always runs, like the Kafka source
    assert first == {"t": {"0": 5}}
    produce(local_log, "t", 0, 3)
    assert r.latestOffset(first, limit) is first  # 3 < 10 new offsets and the delay has not passed: wait
    produce(local_log, "t", 0, 7)
    assert r.latestOffset(first, limit) == {"t": {"0": 15}}
    produce(local_log, "t", 0, 1)
    deadline = time.monotonic() + 30
    while r.latestOffset({"t": {"0": 15}}, limit) == {"t": {"0": 15}}:
        assert time.monotonic() < deadline, "maxTriggerDelay never released the small batch"
        time.sleep(0.2)
    assert time.monotonic() < deadline


def test_available_now_stops_at_the_high_watermark_of_its_start(local_log, stream_reader):
    local_log.create_topic("t", 1)
    produce(local_log, "t", 0, 30)
    r = stream_reader(local_log, subscribe="t", startingOffsets="earliest", maxOffsetsPerTrigger=12,
                      minOffsetsPerTrigger=5)
    r.prepareForTriggerAvailableNow()
    produce(local_log, "t", 0, 30)  # arrives after the query started
    offsets, start = [], r.initialOffset()
    while True:
        end = r.latestOffset(start, r.getDefaultReadLimit())
        if end == start:
            break
        offsets.append(end["t"]["0"])
        start = end
    assert offsets == [12, 24, 30]  # bounded batches, the last one below minOffsetsPerTrigger, then done


def test_new_partitions_and_topics_are_picked_up(local_log, stream_reader):
    local_log.create_topic("orders-a", 1)
    produce(local_log, "orders-a", 0, 4)
    r = stream_reader(local_log, subscribePattern="orders-.*", startingOffsets="earliest")
    start = r.initialOffset()
    local_log.alter_topic("orders-a", partitions=2)
    produce(local_log, "orders-a", 1, 3)
    local_log.create_topic("orders-b", 1)
    produce(local_log, "orders-b", 0, 2)
    end = r.latestOffset(start, ReadAllAvailable())
    assert end == {"orders-a": {"0": 4, "1": 3}, "orders-b": {"0": 2}}
    assert planned(r, start, end) == {("orders-a", 0): [0, 1, 2, 3], ("orders-a", 1): [0, 1, 2],
                                      ("orders-b", 0): [0, 1]}


def test_starting_offsets_resolve_per_partition(local_log, stream_reader):
    local_log.create_topic("t", 2)
    produce(local_log, "t", 0, 10)
    produce(local_log, "t", 1, 10)
    assert stream_reader(local_log, subscribe="t").initialOffset() == {"t": {"0": 10, "1": 10}}  # default latest
    r = stream_reader(local_log, subscribe="t", startingOffsets='{"t":{"0":-2,"1":4}}')
    assert r.initialOffset() == {"t": {"0": 0, "1": 4}}
    r = stream_reader(local_log, subscribe="t", startingTimestamp=1_700_000_000_000 + 7500)
    assert r.initialOffset() == {"t": {"0": 8, "1": 8}}
    with pytest.raises(Exception, match="No offset matched"):
        stream_reader(local_log, subscribe="t", startingTimestamp=1_800_000_000_000).initialOffset()
    r = stream_reader(local_log, subscribe="t", startingTimestamp=1_800_000_000_000,
                      startingOffsetsByTimestampStrategy="latest")
    assert r.initialOffset() == {"t": {"0": 10, "1": 10}}


def test_checkpointed_offsets_removed_by_retention(local_log, stream_reader):
    local_log.create_topic("t", 1)
    for _ in range(2):
        produce(local_log, "t", 0, 10)
    local_log.delete_records("t", 0, 15)
    start, end = {"t": {"0": 5}}, {"t": {"0": 20}}
    with pytest.raises(OffsetOutOfRange, match='"failOnDataLoss" to "false"'):
        planned(stream_reader(local_log, subscribe="t"), start, end)
    lenient = stream_reader(local_log, subscribe="t", failOnDataLoss="false")
    assert planned(lenient, start, end) == {("t", 0): list(range(15, 20))}


def test_readers_pickle_small_and_read_outside_the_planner(local_log):
    stream_reader = python_stream_reader  # the Python reader's own contract: what Spark pickles to its workers
    import pickle

    local_log.create_topic("t", 1)
    produce(local_log, "t", 0, 10)
    r = stream_reader(local_log, subscribe="t", startingOffsets="earliest")
    end = r.latestOffset(r.initialOffset(), ReadAllAvailable())
    parts = r.partitions({"t": {"0": 0}}, end)
    executor_side = pickle.loads(pickle.dumps(r))  # what Spark ships to executors: no snapshots, no handles
    assert executor_side._view is None and len(pickle.dumps(r)) < 4000
    batches = [b for p in parts for b in executor_side.read(pickle.loads(pickle.dumps(p)))]
    assert [o for b in batches for o in b.column("offset").to_pylist()] == list(range(10))
    assert all(b.schema.names == KAFKA_SCHEMA.fieldNames() for b in batches)
    assert isinstance(parts[0].task.slices[0], SegmentSlice)


def test_group_offsets_with_specific_starting_offsets_for_the_rest(local_log, stream_reader):
    """A group that committed some partitions starts them there; the JSON spec (naming every subscribed
    partition, as the Kafka source requires) places the others."""
    from lakelog.group.consumer_offsets import OffsetStore

    local_log.create_topic("t", 2)
    produce(local_log, "t", 0, 10)
    produce(local_log, "t", 1, 10)
    OffsetStore(local_log).commit("g", [("t", 0, 6, "spark")])
    r = stream_reader(local_log, subscribe="t", groupId="g", startingOffsets='{"t":{"0":-2,"1":4}}')
    assert r.initialOffset() == {"t": {"0": 6, "1": 4}}
    with pytest.raises(Exception, match="must specify all topic partitions"):
        stream_reader(local_log, subscribe="t", groupId="g", startingOffsets='{"t":{"1":4}}').initialOffset()


def test_start_at_latest_on_a_non_empty_topic_logs_one_info_line(local_log, caplog):
    """Kafka's default (latest) is kept, but a stream that skips existing records says so, once, at INFO."""
    stream_reader = python_stream_reader  # the JVM source logs the same line through log4j
    import logging

    local_log.create_topic("t", 2)
    produce(local_log, "t", 0, 5)
    produce(local_log, "t", 1, 2)
    with caplog.at_level(logging.INFO, logger="lakelog.spark.spark_source"):
        start = stream_reader(local_log, subscribe="t").initialOffset()
    assert start == {"t": {"0": 5, "1": 2}}
    lines = [r for r in caplog.records if "starts at latest" in r.getMessage()]
    assert len(lines) == 1 and lines[0].levelno == logging.INFO
    assert "7 records already in t" in lines[0].getMessage()

    caplog.clear()
    with caplog.at_level(logging.INFO, logger="lakelog.spark.spark_source"):
        stream_reader(local_log, subscribe="t", startingOffsets="earliest").initialOffset()
        local_log.create_topic("empty", 1)
        stream_reader(local_log, subscribe="empty").initialOffset()
    assert not [r for r in caplog.records if "starts at latest" in r.getMessage()]


def test_a_log_cleaned_up_behind_a_checkpoint_is_reloaded(local_log, stream_reader):
    """A long-idle stream whose next commits were cleaned up behind a checkpoint loads the topic afresh instead
    of waiting forever for a commit file that is gone."""
    from pathlib import Path

    from deltalake import DeltaTable

    local_log.create_topic("t", 1)
    produce(local_log, "t", 0, 3)
    r = stream_reader(local_log, subscribe="t", startingOffsets="earliest")
    assert r.latestOffset(r.initialOffset(), ReadAllAvailable()) == {"t": {"0": 3}}
    for _ in range(3):
        produce(local_log, "t", 0, 2)
    table = DeltaTable(local_log.root.uri_for("topics", "t"))
    table.create_checkpoint()
    for commit in Path(local_log.root.path_for("topics", "t", "_delta_log")).glob("*.json"):
        if int(commit.name[:20]) < table.version():
            commit.unlink()  # what Delta's log cleanup does to expired commits
    produce(local_log, "t", 0, 1)
    assert r.latestOffset({"t": {"0": 3}}, ReadAllAvailable()) == {"t": {"0": 10}}
