"""Batch reads through ``spark.read.format("lakelog")`` on a real local[2] session (local and moto S3 roots)."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from lakelog import Log
from lakelog.storage.storage_root import StorageRoot

from spark_support import append_segment, lakelog_reader, produce, records_of, scanned_by_jvm

KAFKA_DDL = ("key binary, value binary, topic string, partition int, offset bigint, timestamp timestamp, "
             "timestampType int")


@pytest.fixture
def local_log(tmp_path):
    return Log(StorageRoot.resolve(str(tmp_path / "root")))


def library_records(log, topic, partitions, cols=("offset", "key", "value")):
    out = []
    for p in range(partitions):
        for r in log.read(topic, p).select(list(cols)).to_pylist():
            out.append((topic, p, *[r[c] for c in cols]))
    return sorted(out)


def test_reads_exactly_the_committed_records_with_kafkas_schema(spark, log, root, lakelog_source):
    log.create_topic("orders", 3)
    log.append("orders", [{"key": f"k{i}", "value": f"v{i}", "headers": [{"key": "h", "value": f"{i}".encode()}],
                           "timestamp": 1_700_000_000_000 + i} for i in range(60)])
    log.append("orders", [{"key": None, "value": b"\x00\xff", "timestamp": 1_700_000_100_000}], partition=2)
    df = lakelog_reader(spark, root, subscribe="orders").load(root.uri)
    assert scanned_by_jvm(df) == (lakelog_source == "jvm")  # S3 roots too: hadoop-aws is on the class path
    assert df.schema.simpleString() == f"struct<{KAFKA_DDL.replace(' ', ':').replace(',:', ',')}>"
    assert records_of(df) == library_records(log, "orders", 3)
    row = df.where("partition = 2").orderBy("offset").collect()[-1]
    assert (row.key, bytes(row.value), row.topic, row.timestampType) == (None, b"\x00\xff", "orders", 0)
    assert int(row.timestamp.timestamp() * 1000) == 1_700_000_100_000
    with_headers = lakelog_reader(spark, root, subscribe="orders", includeHeaders="true").load(root.uri)
    assert with_headers.schema["headers"].dataType.simpleString() == "array<struct<key:string,value:binary>>"
    headers = {(r.partition, r.offset): [(h.key, bytes(h.value)) for h in r.headers] if r.headers is not None else None
               for r in with_headers.select("partition", "offset", "headers").collect()}
    expected = {(p, r["offset"]): [(h["key"], h["value"]) for h in r["headers"]] if r["headers"] else None
                for p in range(3) for r in log.read("orders", p).to_pylist()}
    assert headers == expected


def test_subscriptions_and_offset_ranges(spark, local_log):
    log, root = local_log, local_log.root
    for name in ("orders-eu", "orders-us", "payments"):
        log.create_topic(name, 2)
        for p in range(2):
            produce(log, name, p, 10)
    load = lambda **o: lakelog_reader(spark, root, **o).load(root.uri)  # noqa: E731
    assert {r.topic for r in load(subscribePattern="orders-.*").select("topic").distinct().collect()} == \
        {"orders-eu", "orders-us"}
    df = load(assign=json.dumps({"payments": [1]}), startingOffsets=json.dumps({"payments": {"1": 3}}),
              endingOffsets=json.dumps({"payments": {"1": 7}}))
    assert records_of(df, "topic", "partition", "offset") == [("payments", 1, o) for o in range(3, 7)]
    df = load(subscribe="payments", startingOffsets=json.dumps({"payments": {"0": -2, "1": 8}}),
              endingOffsets=json.dumps({"payments": {"0": 2, "1": -1}}))
    assert records_of(df, "partition", "offset") == [(0, 0), (0, 1), (1, 8), (1, 9)]
    # timestamps: first offset with timestamp >= T; ending is exclusive
    df = load(subscribe="orders-eu", startingTimestamp=str(1_700_000_000_000 + 4000),
              endingOffsetsByTimestamp=json.dumps({"orders-eu": {"0": 1_700_000_000_000 + 6500,
                                                                 "1": 1_700_000_000_000 + 99_000}}))
    assert records_of(df, "partition", "offset") == [(0, 4), (0, 5), (0, 6), (1, 4), (1, 5), (1, 6), (1, 7),
                                                     (1, 8), (1, 9)]
    # a user schema selecting columns reads only those
    df = lakelog_reader(spark, root, subscribe="payments").schema("offset bigint, value binary").load(root.uri)
    assert df.columns == ["offset", "value"] and df.count() == 20


def test_compacted_topic_with_offset_gaps(spark, local_log):
    """Offsets missing after compaction are skipped without error (the Kafka source's SPARK-23685)."""
    log, root = local_log, local_log.root
    log.create_topic("compacted", 1, {"cleanup.policy": "compact"})
    append_segment(root, "compacted", 0, [0, 3, 4, 9], [1000, 2000, 3000, 4000])
    produce(log, "compacted", 0, 3)  # offsets 10..12 after the gap-ridden segment
    df = lakelog_reader(spark, root, subscribe="compacted").load(root.uri)
    assert [r.offset for r in df.orderBy("offset").collect()] == [0, 3, 4, 9, 10, 11, 12]
    df = lakelog_reader(spark, root, subscribe="compacted", startingOffsets='{"compacted":{"0":5}}',
                        endingOffsets='{"compacted":{"0":11}}').load(root.uri)
    assert [r.offset for r in df.orderBy("offset").collect()] == [9, 10]


def test_min_partitions_and_repeatable_reads(spark, local_log):
    log, root = local_log, local_log.root
    log.create_topic("big", 2)
    for _ in range(3):
        for p in range(2):
            produce(log, "big", p, 50)
    df = lakelog_reader(spark, root, subscribe="big", minPartitions="5",
                        endingOffsets='{"big":{"0":-1,"1":120}}').load(root.uri)
    assert df.rdd.getNumPartitions() >= 5
    first = records_of(df)
    assert len(first) == 150 + 120
    produce(log, "big", 0, 10)  # new commits don't change a read with explicit ending offsets...
    again = lakelog_reader(spark, root, subscribe="big", minPartitions="5",
                           endingOffsets='{"big":{"0":150,"1":120}}').load(root.uri)
    assert records_of(again) == first
    # ... while "latest" is the high watermark when the query is planned
    assert lakelog_reader(spark, root, subscribe="big").load(root.uri).count() == 310


def test_fail_on_data_loss(spark, local_log):
    log, root = local_log, local_log.root
    log.create_topic("retained", 1)
    for _ in range(2):
        produce(log, "retained", 0, 10)
    log.delete_records("retained", 0, 15)
    spec = '{"retained":{"0":5}}'
    with pytest.raises(Exception, match="failOnDataLoss") as info:
        lakelog_reader(spark, root, subscribe="retained", startingOffsets=spec).load(root.uri).collect()
    assert "[5, 15)" in str(info.value) and "OFFSET_OUT_OF_RANGE" in str(info.value)
    df = lakelog_reader(spark, root, subscribe="retained", startingOffsets=spec, failOnDataLoss="false").load(root.uri)
    assert [r.offset for r in df.orderBy("offset").collect()] == list(range(15, 20))
    earliest = lakelog_reader(spark, root, subscribe="retained").load(root.uri)
    assert earliest.count() == 5


@pytest.mark.parametrize("options, stream, fragment", [
    ({"subscribe": "t", "assign": '{"t":[0]}'}, False, "Only one of the following options"),
    ({"subscribe": "missing"}, False, "topic missing (option 'subscribe') does not exist"),
    ({"assign": '{"t":[7]}'}, False, "partition 7 of topic t (option 'assign') does not exist"),
    ({"subscribe": "t", "startingOffsets": '{"t":{"0":1'}, False, "Invalid value for option 'startingOffsets'"),
    ({"subscribe": "t", "startingOffsets": '{"t":{"0":3}}', "endingOffsets": '{"t":{"0":1}}'}, False,
     "endingOffsets for t-0 (1) is before startingOffsets (3)"),
    ({"subscribe": "t", "startingOffsets": '{"t":{"0":9}}', "endingOffsets": '{"t":{"0":7}}'}, False,
     "before startingOffsets"),
])
def test_invalid_options_fail_at_load(spark, local_log, options, stream, fragment):
    local_log.create_topic("t", 1)
    produce(local_log, "t", 0, 10)
    with pytest.raises(Exception) as info:
        lakelog_reader(spark, local_log.root, **options).load(local_log.root.uri)
    assert fragment in str(info.value)


@pytest.mark.parametrize("options, stream, fragment", [
    ({"subscribe": "t", "maxOffsetsPerTrigger": "5"}, False,
     "Option 'maxOffsetsPerTrigger' is only valid in streaming"),
    ({"subscribe": "t", "startingOffsets": "latest"}, False, "starting offset can't be latest for batch queries"),
    ({"subscribe": "t", "endingOffsets": '{"t":{"0":99}}'}, False, "beyond the high watermark"),
    ({"subscribe": "t", "startingOffsets": '{"t":{"0":9}}', "endingTimestamp": "0"}, False,
     "ending offset of t-0 (0) is before its starting offset (9)"),
    ({"subscribe": "t", "startingOffsets": '{"x":{"0":1}}'}, False, "you must specify all topic partitions"),
    ({"subscribe": "t", "endingOffsets": "latest"}, True, "Option 'endingOffsets' is not valid in streaming"),
])
def test_invalid_options_fail_when_planned(spark, local_log, options, stream, fragment, tmp_path):
    """Rules that depend on the query's mode or on the data fail when the query is planned, before any read."""
    local_log.create_topic("t", 1)
    produce(local_log, "t", 0, 10)
    df = lakelog_reader(spark, local_log.root, stream=stream, **options).load(local_log.root.uri)
    with pytest.raises(Exception) as info:
        if stream:
            q = df.writeStream.format("noop").option("checkpointLocation", str(tmp_path / "ck")).start()
            try:
                q.awaitTermination(120)
            finally:
                q.stop()
        else:
            df.collect()
    assert fragment in str(info.value)


def test_sessions_load_the_project_spark_defaults(spark):
    """conf/spark-defaults.conf (via SPARK_CONF_DIR) configures every Spark entry point, the tests' included."""
    assert spark.conf.get("spark.sql.shuffle.partitions") == "4"
    assert spark.sparkContext.getConf().get("spark.python.worker.reuse") == "true"
    assert spark.sparkContext.getConf().get("spark.ui.enabled") == "false"
