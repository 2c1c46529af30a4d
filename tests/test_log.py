"""The log end to end through the library, on a local root and on moto S3."""

from __future__ import annotations

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from lakelog import Log, PartitionBatch
from lakelog.errors import (InvalidConfig, InvalidPartitions, InvalidRecord, InvalidTimestamp, InvalidTopic,
                            MessageTooLarge, OutOfOrderSequenceNumber, TopicAlreadyExists,
                            UnknownTopicOrPartition)
from lakelog.writer.partitioner import partition_for_key
from lakelog.writer.records import normalize_records


def test_create_describe_list_delete(log):
    d = log.create_topic("orders", 3, {"retention.ms": 1000, "cleanup.policy": "compact,delete"})
    assert [p.partition for p in d.partitions] == [0, 1, 2]
    assert d.configs["retention.ms"] == "1000" and d.overrides["cleanup.policy"] == "compact,delete"
    assert d.configs["segment.bytes"] == "1073741824"  # Kafka's default
    assert log.list_topics() == ["orders"]
    with pytest.raises(TopicAlreadyExists):
        log.create_topic("orders", 1)
    log.alter_topic("orders", {"retention.ms": "5"}, partitions=5)
    d = log.describe_topic("orders")
    assert len(d.partitions) == 5 and d.configs["retention.ms"] == "5"
    log.append("orders", [{"key": "k", "value": "new partition"}], partition=4)  # delta-rs reads our metadata commit
    assert log.describe_topic("orders").partitions[4].high_watermark == 1
    dt = DeltaTable(log.root.uri_for("topics", "orders"), storage_options=log.root.storage_options)
    assert dt.metadata().configuration["retention.ms"] == "5"
    with pytest.raises(InvalidPartitions):
        log.alter_topic("orders", partitions=2)
    log.delete_topic("orders")
    assert log.list_topics() == []
    with pytest.raises(UnknownTopicOrPartition):
        log.describe_topic("orders")


def test_append_assigns_dense_offsets_per_partition(log):
    log.create_topic("t", 2)
    keys = [f"key-{i}".encode() for i in range(50)]
    log.append("t", [{"key": k, "value": b"v" + k} for k in keys])
    log.append("t", [{"key": k, "value": b"w" + k} for k in keys])
    for p in range(2):
        recs = log.read("t", p).to_pylist()
        assert [r["offset"] for r in recs] == list(range(len(recs)))
        assert all(partition_for_key(r["key"], 2) == p for r in recs)
    assert sum(p.high_watermark for p in log.describe_topic("t").partitions) == 100


def test_idempotent_producer_dedupes_and_orders(log):
    log.create_topic("t", 1)
    pid = log.init_producer()
    recs = normalize_records([{"key": "a", "value": "b"}] * 3)
    first = log.append_batches("t", [PartitionBatch(0, recs, pid.producer_id, pid.producer_epoch, 0)])[0]
    again = log.append_batches("t", [PartitionBatch(0, recs, pid.producer_id, pid.producer_epoch, 0)])[0]
    assert again.duplicate and again.base_offset == first.base_offset
    gap = log.append_batches("t", [PartitionBatch(0, recs, pid.producer_id, pid.producer_epoch, 10)])[0]
    assert isinstance(gap, OutOfOrderSequenceNumber) and "expected 3" in gap.message
    assert log.describe_topic("t").partitions[0].high_watermark == 3


def test_producer_state_survives_a_new_process_view(root):
    Log(root).create_topic("t", 1)
    a = Log(root)
    pid = a.init_producer()
    recs = normalize_records([{"value": "x"}] * 2)
    first = a.append_batches("t", [PartitionBatch(0, recs, pid.producer_id, 0, 0)])[0]
    b = Log(root)  # a restarted writer rebuilds producer state from the Delta log
    retry = b.append_batches("t", [PartitionBatch(0, recs, pid.producer_id, 0, 0)])[0]
    assert retry.duplicate and retry.base_offset == first.base_offset


def test_transactional_id_bumps_epoch_and_fences(log):
    log.create_topic("t", 1)
    old = log.init_producer("tx-1")
    new = log.init_producer("tx-1")
    assert new.producer_id == old.producer_id and new.producer_epoch == old.producer_epoch + 1
    recs = normalize_records([{"value": "x"}])
    ok = log.append_batches("t", [PartitionBatch(0, recs, new.producer_id, new.producer_epoch, 0)])[0]
    assert ok.base_offset == 0
    fenced = log.append_batches("t", [PartitionBatch(0, recs, old.producer_id, old.producer_epoch, 1)])[0]
    assert fenced.code == 90 and fenced.name == "PRODUCER_FENCED"
    unknown = log.append_batches("t", [PartitionBatch(0, recs, 10**9, 0, 0)])[0]
    assert unknown.code == 59


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "../x", "a" * 250, "bad name", "x\x00", "é"])
def test_invalid_topic_names(log, name):
    with pytest.raises(InvalidTopic):
        log.create_topic(name, 1)
    assert log.list_topics() == []


@pytest.mark.parametrize("configs,fragment", [
    ({"retention.msx": "1"}, "retention.msx"),
    ({"retention.ms": "abc"}, "retention.ms"),
    ({"retention.ms": "-5"}, "retention.ms"),
    ({"cleanup.policy": "shred"}, "cleanup.policy"),
    ({"min.cleanable.dirty.ratio": "1.5"}, "min.cleanable.dirty.ratio"),
    ({"message.timestamp.type": "Wallclock"}, "message.timestamp.type"),
    ({"compression.type": "brotli"}, "compression.type"),
    ({"compression.type": "ZSTD"}, "compression.type"),
])
def test_invalid_configs_name_the_key(log, configs, fragment):
    with pytest.raises(InvalidConfig) as e:
        log.create_topic("t", 1, configs)
    assert fragment in str(e.value)
    assert log.list_topics() == []


def test_bad_records_write_nothing(log):
    log.create_topic("t", 2, {"max.message.bytes": "100"})
    log.create_topic("c", 1, {"cleanup.policy": "compact"})
    cases = [
        (lambda: log.append("t", [{"value": b"x" * 101}], partition=0), MessageTooLarge),
        (lambda: log.append("t", [{"value": b"x"}], partition=2), UnknownTopicOrPartition),
        (lambda: log.append("t", [{"value": b"x"}], partition=-1), UnknownTopicOrPartition),
        (lambda: log.append("t", [{"value": b"x", "timestamp": -5}], partition=0), InvalidTimestamp),
        (lambda: log.append("t", [{"value": b"x", "timestamp": 10**16}], partition=0), InvalidTimestamp),
        (lambda: log.append("c", [{"key": None, "value": b"x"}], partition=0), InvalidRecord),
        (lambda: log.append("nope", [{"value": b"x"}], partition=0), UnknownTopicOrPartition),
    ]
    for fn, err in cases:
        with pytest.raises(err):
            fn()
    assert all(p.high_watermark == 0 for p in log.describe_topic("t").partitions)
    assert log.describe_topic("c").partitions[0].high_watermark == 0


@pytest.mark.parametrize("same_process", [True, False])
def test_a_writer_validates_against_configs_altered_after_it_opened(root, same_process):
    """An open writer learns of an alter when its next commit meets it, and checks its records again."""
    writer = Log(root)
    writer.create_topic("t", 1, {"max.message.bytes": "1000"})
    writer.append("t", [{"value": b"x" * 500}], partition=0)  # the writer is open, its snapshot cached
    admin = writer if same_process else Log(root)  # another process's Log: nothing shared in memory
    admin.alter_topic("t", {"max.message.bytes": "100", "cleanup.policy": "compact"})
    for records, err in (([{"value": b"x" * 500}], MessageTooLarge), ([{"key": None, "value": b"x"}], InvalidRecord)):
        with pytest.raises(err):
            writer.append("t", records, partition=0)
    writer.append("t", [{"key": b"k", "value": b"x" * 50}], partition=0)
    assert [p.high_watermark for p in Log(root).describe_topic("t").partitions] == [2]


def test_arrow_input_and_log_append_time(log):
    log.create_topic("t", 1, {"message.timestamp.type": "LogAppendTime"})
    table = pa.table({"key": pa.array([b"a", None]), "value": pa.array(["x", "y"]),
                      "timestamp": pa.array([1, 2], pa.int64())})
    res = log.append("t", table, partition=0)
    assert res[0].log_append_time > 1_000_000_000_000
    recs = log.read("t", 0).to_pylist()
    assert [r["timestampType"] for r in recs] == [1, 1]
    assert recs[0]["value"] == b"x" and recs[1]["key"] is None


def test_a_checkpoint_due_while_the_index_is_being_stored_runs_after_it(tmp_path, monkeypatch) -> None:
    """Checkpoints and index storage share one background thread; a checkpoint falling due while the index
    is stored (fault-injected: the store waits for a gate) starts after the next commit, not 100 commits later."""
    import threading

    import lakelog.writer.checkpointer as checkpointer

    gate, storing = threading.Event(), threading.Event()
    real_store = checkpointer.store_index

    def gated_store(*args, **kwargs):
        storing.set()
        assert gate.wait(60)
        return real_store(*args, **kwargs)

    monkeypatch.setattr(checkpointer, "store_index", gated_store)
    log = Log(str(tmp_path))
    log.create_topic("t", 1)
    due = checkpointer.DEFAULT_CHECKPOINT_INTERVAL
    for _ in range(due + 1):  # past the checkpoint version, with the index store (due at 64) still held
        log.append("t", [{"value": b"x"}], partition=0)
    assert storing.is_set()
    gate.set()
    for t in threading.enumerate():
        if t.name == "lakelog-maintain-t":
            t.join(60)  # the index store ends; the checkpoint stays due
    delta_log = tmp_path / "topics" / "t" / "_delta_log"
    assert not list(delta_log.glob("*.checkpoint.parquet"))
    log.append("t", [{"value": b"x"}], partition=0)
    log.close()  # joins the started checkpoint
    assert list(delta_log.glob("*.checkpoint.parquet")), sorted(p.name for p in delta_log.iterdir())[-5:]
