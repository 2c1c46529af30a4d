"""The transaction coordinator's commit over a real Log on a local root: a decided commit is finished by whoever
comes next (EndTxn retried, a new instance's InitProducerId, recovery after a crash), lands once, and a topic
deleted before the commit reached it does not wedge the transactional id."""

from __future__ import annotations

import pyarrow as pa
import pytest

from lakelog import Log
from lakelog.errors import KafkaStorageError, ProducerFenced
from lakelog.transaction.transaction_coordinator import TransactionCoordinator
from lakelog.transaction.transaction_state import TxnState
from lakelog.writer.records import PartitionBatch


def batch(partition: int, values: list[bytes], pid: int, epoch: int, seq: int) -> PartitionBatch:
    return PartitionBatch(partition, pa.table({"key": pa.nulls(len(values), pa.binary()),
                                               "value": pa.array(values, pa.binary())}), pid, epoch, seq)


def values(log: Log, topic: str, partition: int) -> list[bytes]:
    return log.read(topic, partition).column("value").to_pylist()


def stage(coord: TransactionCoordinator, tid: str, ident, topic: str, partition: int, vals: list[bytes], seq: int):
    coord.add_partitions(tid, ident.producer_id, ident.producer_epoch, {(topic, partition)})
    return coord.stage_batch(tid, batch(partition, vals, ident.producer_id, ident.producer_epoch, seq), topic)


def test_a_commit_that_failed_midway_is_finished_once_by_recovery(tmp_path):
    root = str(tmp_path / "root")
    log = Log(root)
    log.create_topic("a", 1)
    log.create_topic("b", 1)
    failing = {"b"}

    def append(topic, batches):
        if topic in failing:
            raise KafkaStorageError("the store failed")
        return log.append_batches(topic, batches)

    coord = TransactionCoordinator(log, append=append)
    ident = coord.init_producer_id("tx")
    stage(coord, "tx", ident, "a", 0, [b"a0", b"a1"], 0)
    stage(coord, "tx", ident, "b", 0, [b"b0"], 0)
    with pytest.raises(KafkaStorageError):
        coord.end_txn("tx", ident.producer_id, ident.producer_epoch, True)
    assert coord.describe("tx").state is TxnState.PREPARE_COMMIT  # decided: it will commit
    assert (values(log, "a", 0), values(log, "b", 0)) == ([b"a0", b"a1"], [])
    # a restarted front (a new process: fresh Log and coordinator) finishes it; "a" is not appended twice
    log2 = Log(root)
    assert TransactionCoordinator(log2).recover() == 1
    assert (values(log2, "a", 0), values(log2, "b", 0)) == ([b"a0", b"a1"], [b"b0"])
    assert TransactionCoordinator(Log(root)).describe("tx").state is TxnState.COMPLETE_COMMIT


def test_a_new_instance_finishes_the_decided_commit_before_fencing(tmp_path):
    log = Log(str(tmp_path / "root"))
    log.create_topic("t", 2)
    broken = [True]

    def append(topic, batches):
        if broken[0]:
            raise KafkaStorageError("the store failed")
        return log.append_batches(topic, batches)

    coord = TransactionCoordinator(log, append=append)
    old = coord.init_producer_id("tx")
    stage(coord, "tx", old, "t", 0, [b"x"], 0)
    stage(coord, "tx", old, "t", 1, [b"y"], 0)
    with pytest.raises(KafkaStorageError):
        coord.end_txn("tx", old.producer_id, old.producer_epoch, True)
    broken[0] = False
    new = coord.init_producer_id("tx")
    assert new.producer_epoch == old.producer_epoch + 1
    assert (values(log, "t", 0), values(log, "t", 1)) == ([b"x"], [b"y"])
    with pytest.raises(ProducerFenced):
        coord.end_txn("tx", old.producer_id, old.producer_epoch, True)


def test_a_topic_deleted_before_the_commit_does_not_wedge_the_id(tmp_path):
    log = Log(str(tmp_path / "root"))
    log.create_topic("kept", 1)
    log.create_topic("gone", 1)
    coord = TransactionCoordinator(log)
    ident = coord.init_producer_id("tx")
    stage(coord, "tx", ident, "kept", 0, [b"k"], 0)
    stage(coord, "tx", ident, "gone", 0, [b"g"], 0)
    log.delete_topic("gone")
    coord.end_txn("tx", ident.producer_id, ident.producer_epoch, True)
    assert values(log, "kept", 0) == [b"k"]
    assert coord.describe("tx").state is TxnState.COMPLETE_COMMIT
    again = coord.init_producer_id("tx")  # the id is usable again
    assert again.producer_epoch == ident.producer_epoch + 1
