"""Streaming queries through ``spark.readStream.format("lakelog")`` on the shared local[2] session, on the JVM
source and on the Python source it falls back to (conftest.BOTH_SOURCES)."""

from __future__ import annotations

import sys
import time
import uuid
from pathlib import Path

import httpx
import pytest

from lakelog import Log
from lakelog.storage.storage_root import StorageRoot

from spark_support import lakelog_reader, produce

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "api"))


def run_available_now(df, checkpoint, on_batch):
    q = (df.writeStream.trigger(availableNow=True).option("checkpointLocation", str(checkpoint))
         .foreachBatch(on_batch).start())
    assert q.awaitTermination(300), "the AvailableNow query did not finish"
    assert q.exception() is None
    return q


def test_available_now_drains_to_the_start_high_watermark_in_bounded_batches(spark, log, root, tmp_path,
                                                                            lakelog_source):
    log.create_topic("orders", 2)
    produce(log, "orders", 0, 70)
    produce(log, "orders", 1, 30)
    batches: list[list[tuple[int, int]]] = []

    def on_batch(df, batch_id):
        batches.append([(r.partition, r.offset) for r in df.select("partition", "offset").collect()])
        if len(batches) == 1:
            produce(log, "orders", 0, 15, prefix="late")  # committed after the query started

    df = lakelog_reader(spark, root, stream=True, subscribe="orders", startingOffsets="earliest",
                        maxOffsetsPerTrigger=40).load(root.uri)
    q = run_available_now(df, tmp_path / "ck", on_batch)
    rows = [r for b in batches for r in b]
    assert sorted(rows) == [(0, o) for o in range(70)] + [(1, o) for o in range(30)]
    assert [len(b) for b in batches if b] == [40, 40, 20]  # every batch bounded by maxOffsetsPerTrigger
    assert q.lastProgress["sources"][0]["latestOffset"] is not None  # reportLatestOffset
    # the JVM stream reads local and S3 roots (hadoop-aws is on the session's class path); jvm.enabled=false goes to
    # the Python source
    on_jvm = "LakelogMicroBatchStream" in q.lastProgress["sources"][0]["description"]
    assert on_jvm == (lakelog_source == "jvm")
    batches.clear()
    run_available_now(df, tmp_path / "ck", on_batch)  # the next run reads only what came since
    assert sorted(r for b in batches for r in b) == [(0, o) for o in range(70, 85)]


def test_processing_time_trigger_picks_up_commits_and_new_partitions(spark, tmp_path):
    log = Log(StorageRoot.resolve(str(tmp_path / "root")))
    log.create_topic("events", 1)
    produce(log, "events", 0, 5)
    name = f"events_{uuid.uuid4().hex[:8]}"
    df = lakelog_reader(spark, log.root, stream=True, subscribe="events", startingOffsets="earliest").load(log.root.uri)
    q = (df.writeStream.format("memory").queryName(name).trigger(processingTime="500 milliseconds")
         .option("checkpointLocation", str(tmp_path / "ck")).start())
    try:
        def wait_for(expected):
            deadline = time.monotonic() + 180
            while time.monotonic() < deadline:
                rows = spark.sql(f"select partition, offset from {name}").collect()
                got = sorted((r.partition, r.offset) for r in rows)
                if got == expected:
                    return
                assert q.exception() is None, q.exception()
                time.sleep(0.3)
            raise AssertionError(f"the stream has {got}, expected {expected}")

        wait_for([(0, o) for o in range(5)])
        produce(log, "events", 0, 3)
        wait_for([(0, o) for o in range(8)])
        log.alter_topic("events", partitions=2)
        produce(log, "events", 1, 2)
        wait_for([(0, o) for o in range(8)] + [(1, 0), (1, 1)])
    finally:
        q.stop()


@pytest.fixture
def front(tmp_path):
    from front_process import Front

    f = Front(str(tmp_path / "root"), tmp_path / "front-logs")
    f.start()
    yield f
    f.stop()


def test_group_id_commits_each_batch_and_seeds_new_queries(spark, front, tmp_path):
    log = Log(StorageRoot.resolve(front.root))
    log.create_topic("clicks", 2)
    produce(log, "clicks", 0, 30)
    produce(log, "clicks", 1, 30)
    seen: list[dict] = []

    def committed() -> dict:
        body = httpx.get(f"{front.url}/v1/groups/readers/offsets", timeout=30).json()
        return {(o["topic"], o["partition"]): o["offset"] for o in body.get("offsets", [])}

    def on_batch(df, batch_id):
        seen.append(committed())

    df = lakelog_reader(spark, log.root, stream=True, subscribe="clicks", startingOffsets="earliest",
                        groupId="readers", maxOffsetsPerTrigger=20).load(log.root.uri)
    run_available_now(df, tmp_path / "ck1", on_batch)
    # while batch N runs, the group holds the end of batch N-1 (Spark reports a batch done when it plans the next)
    assert [sum(c.values()) for c in seen] == [0, 20, 40]
    assert committed() == {("clicks", 0): 30, ("clicks", 1): 30}  # the last batch, committed before the query ended
    produce(log, "clicks", 1, 4)
    got: list[tuple[int, int]] = []
    fresh = lakelog_reader(spark, log.root, stream=True, subscribe="clicks", startingOffsets="earliest",
                           groupId="readers").load(log.root.uri)
    run_available_now(fresh, tmp_path / "ck2",
                      lambda df, _: got.extend((r.partition, r.offset) for r in df.collect()))
    assert sorted(got) == [(1, o) for o in range(30, 34)]  # a new checkpoint starts at the group's offsets
    assert committed()[("clicks", 1)] == 34


def test_a_checkpoint_resumes_on_the_other_implementation(spark, tmp_path, lakelog_source):
    """The offsets JSON is the same on both sources: a query checkpointed by one continues on the other."""
    log = Log(StorageRoot.resolve(str(tmp_path / "root")))
    log.create_topic("moves", 2)
    produce(log, "moves", 0, 12)
    produce(log, "moves", 1, 5)
    got: list[tuple[int, int]] = []
    def load():  # the implementation is chosen when the stream is loaded
        return lakelog_reader(spark, log.root, stream=True, subscribe="moves", startingOffsets="earliest",
                              maxOffsetsPerTrigger=6).load(log.root.uri)

    collect = lambda batch, _: got.extend((r.partition, r.offset) for r in batch.collect())  # noqa: E731
    q = run_available_now(load(), tmp_path / "ck", collect)
    assert ("LakelogMicroBatchStream" in q.lastProgress["sources"][0]["description"]) == (lakelog_source == "jvm")
    assert sorted(got) == [(0, o) for o in range(12)] + [(1, o) for o in range(5)]
    produce(log, "moves", 1, 4)
    got.clear()
    other = "false" if lakelog_source == "jvm" else "true"
    spark.conf.set("spark.lakelog.jvm.enabled", other)  # the fixture restores it
    q = run_available_now(load(), tmp_path / "ck", collect)
    assert sorted(got) == [(1, o) for o in range(5, 9)]  # only what came since: nothing read twice or skipped
    assert ("LakelogMicroBatchStream" in q.lastProgress["sources"][0]["description"]) == (other == "true")


@pytest.mark.parametrize("fail_on_data_loss", [True, False])
def test_a_segment_removed_after_planning(spark, tmp_path, lakelog_source, fail_on_data_loss):
    """A micro-batch whose segment file vanishes between planning and reading (retention then vacuum) fails
    with the data-loss message, or reads what is left when failOnDataLoss is false."""
    import os

    log = Log(StorageRoot.resolve(str(tmp_path / "root")))
    log.create_topic("gone", 1)
    produce(log, "gone", 0, 5)
    produce(log, "gone", 0, 4)
    first = min(log.segments("gone", 0), key=lambda s: s.base_offset)
    got: list[int] = []

    def on_batch(batch, _):
        os.remove(log.root.path_for("topics", "gone", first.path))  # planned already, not read yet
        got.extend(r.offset for r in batch.collect())

    q = (lakelog_reader(spark, log.root, stream=True, subscribe="gone", startingOffsets="earliest",
                        failOnDataLoss=str(fail_on_data_loss).lower()).load(log.root.uri)
         .writeStream.trigger(availableNow=True).option("checkpointLocation", str(tmp_path / "ck"))
         .foreachBatch(on_batch).start())
    if fail_on_data_loss:
        with pytest.raises(Exception) as info:
            q.awaitTermination(300)
        message = str(info.value)
        assert f"Segment {first.path} of gone-0 holding offsets [0, 5) was removed after the read was planned." \
            in message, message
        assert '"failOnDataLoss" to "false"' in message
    else:
        assert q.awaitTermination(300) and q.exception() is None
        assert got == [5, 6, 7, 8]
