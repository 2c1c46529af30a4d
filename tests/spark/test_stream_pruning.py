"""Column pruning of JVM lakelog streams (StreamColumnPruning): a micro-batch reads only the columns its query
uses, and still returns exactly the records of its offsets. Spark prunes no streaming source by itself; the rule
comes with the jar through META-INF/services (no session setting)."""

from __future__ import annotations

import re

import pytest

from lakelog import Log
from lakelog.storage.storage_root import StorageRoot

from spark_support import lakelog_reader, produce


@pytest.fixture
def log(tmp_path):
    """A local root: the JVM stream reads it (an S3 root here goes to the Python source, which reads every column)."""
    return Log(StorageRoot.resolve(str(tmp_path / "root")))


@pytest.fixture
def root(log):
    return log.root


def scanned_columns(q, capsys) -> list[str]:
    """The columns of the last micro-batch's MicroBatchScan, from the query's physical plan."""
    capsys.readouterr()
    q.explain()
    plan = capsys.readouterr().out
    m = re.search(r"MicroBatchScan\[([^\]]*)\]", plan)
    assert m, plan
    return [c.split("#")[0] for c in m.group(1).split(", ")] if m.group(1) else []


def drain(df, checkpoint, on_batch=None):
    rows = []

    def collect(batch, _):
        rows.extend(tuple(bytes(v) if isinstance(v, bytearray) else v for v in r) for r in batch.collect())

    q = (df.writeStream.trigger(availableNow=True).option("checkpointLocation", str(checkpoint))
         .foreachBatch(on_batch or collect).start())
    assert q.awaitTermination(300)
    assert q.exception() is None
    return q, sorted(rows)


def test_a_projected_stream_reads_only_its_columns(spark, log, root, tmp_path, capsys):
    log.create_topic("orders", 2)
    produce(log, "orders", 0, 70)
    produce(log, "orders", 1, 30)
    df = lakelog_reader(spark, root, stream=True, subscribe="orders", startingOffsets="earliest").load(root.uri)
    q, rows = drain(df.select("offset", "value"), tmp_path / "ck")
    assert scanned_columns(q, capsys) == ["value", "offset"]
    assert rows == sorted([(o, f"v{o}".encode()) for o in range(70)] + [(o, f"v{o}".encode()) for o in range(30)])
    assert sum(p["numInputRows"] for p in q.recentProgress) == 100  # the engine still counts the stream's rows


def test_pruned_columns_with_cut_segments_and_a_filter(spark, log, root, tmp_path, capsys):
    """Batches bounded by maxOffsetsPerTrigger cut segments mid-file, which needs `offset` though the query does
    not read it; the filter's column is read too."""
    log.create_topic("events", 2)
    for _ in range(3):
        produce(log, "events", 0, 25)
        produce(log, "events", 1, 25)
    df = lakelog_reader(spark, root, stream=True, subscribe="events", startingOffsets="earliest",
                        maxOffsetsPerTrigger=17).load(root.uri)
    q, rows = drain(df.filter("partition = 1").select("value"), tmp_path / "ck")
    assert sorted(scanned_columns(q, capsys)) == ["partition", "value"]
    assert rows == sorted((f"v{i}".encode(),) for _ in range(3) for i in range(25))
    assert len([p for p in q.recentProgress if p["numInputRows"]]) == 9  # 150 records, 17 a batch


def test_a_count_reads_the_offset_column_only(spark, log, root, tmp_path, capsys):
    log.create_topic("clicks", 1)
    produce(log, "clicks", 0, 40)
    df = lakelog_reader(spark, root, stream=True, subscribe="clicks", startingOffsets="earliest").load(root.uri)
    q = (df.groupBy().count().writeStream.outputMode("complete").format("memory").queryName("clicks_count")
         .trigger(availableNow=True).option("checkpointLocation", str(tmp_path / "ck")).start())
    assert q.awaitTermination(300)
    assert q.exception() is None
    assert scanned_columns(q, capsys) == ["offset"]
    assert spark.sql("select * from clicks_count").collect()[0][0] == 40


def test_a_whole_stream_and_a_self_union_read_what_they_use(spark, log, root, tmp_path, capsys):
    log.create_topic("logs", 1)
    produce(log, "logs", 0, 10)
    df = lakelog_reader(spark, root, stream=True, subscribe="logs", startingOffsets="earliest").load(root.uri)
    q, rows = drain(df, tmp_path / "ck1")  # foreachBatch of the whole stream: every column
    assert scanned_columns(q, capsys) == ["key", "value", "topic", "partition", "offset", "timestamp",
                                          "timestampType"]
    assert sorted(r[4] for r in rows) == list(range(10))
    # both branches read the one stream: it reads what either uses
    q, rows = drain(df.select("value").union(df.select("key")), tmp_path / "ck2")
    assert scanned_columns(q, capsys) == ["key", "value"]
    assert rows == sorted([(f"v{o}".encode(),) for o in range(10)] + [(f"k{o % 5}".encode(),) for o in range(10)])


@pytest.mark.parametrize("exprs, columns", [
    (["max(offset) as m"], ["offset"]),
    (["sum(length(value)) as b"], ["value"]),
    (["count(*) as n"], ["offset"]),
    (["count(*) as n", "sum(length(value)) as b", "max(offset) as m"], ["value", "offset"]),
    (["sum(length(key)) as k", "max(timestamp) as t"], ["key", "timestamp"]),
])
def test_streaming_aggregates_read_their_columns_and_equal_the_batch_read(spark, log, root, tmp_path, capsys, exprs,
                                                                          columns):
    """Spark drops a Project that keeps every column the relation lists, so after the first pass the aggregate sits
    on the pruned relation itself: the stream must keep reading those columns, not every column."""
    log.create_topic("agg", 2)
    produce(log, "agg", 0, 70)
    produce(log, "agg", 1, 30)
    name = f"agg_{abs(hash(tuple(exprs)))}"
    df = lakelog_reader(spark, root, stream=True, subscribe="agg", startingOffsets="earliest").load(root.uri)
    q = (df.selectExpr(*exprs).writeStream.outputMode("complete").format("memory").queryName(name)
         .trigger(availableNow=True).option("checkpointLocation", str(tmp_path / "ck")).start())
    assert q.awaitTermination(300)
    assert q.exception() is None
    assert scanned_columns(q, capsys) == columns
    expected = lakelog_reader(spark, root, subscribe="agg").load(root.uri).selectExpr(*exprs).collect()
    assert spark.sql(f"select * from {name}").collect() == expected
