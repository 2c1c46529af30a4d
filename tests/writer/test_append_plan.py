"""Validation and offset planning (lakelog/writer/append_plan.py), table-driven over real snapshots of a local root:
offsets per partition in batch order and on top of a group in flight, producer state (duplicates, gaps, epochs),
committing transactions' markers, partition leadership, the deleted-topic fence, and a segment's columns."""

from __future__ import annotations

import pyarrow as pa
import pytest

from lakelog.errors import (InvalidProducerEpoch, InvalidRecord, NotLeaderOrFollower, OutOfOrderSequenceNumber,
                            UnknownTopicId, UnknownTopicOrPartition)
from lakelog.log import Log
from lakelog.storage.record_schema import CREATE_TIME, LOG_APPEND_TIME
from lakelog.storage.topic_snapshot import leo_app
from lakelog.writer.append_plan import AppendPlanner, acknowledge, fail, segment_table
from lakelog.writer.records import AppendResult, PartitionBatch


def records(n: int, key: bytes | None = b"k", timestamps: list | None = None) -> pa.Table:
    cols = {"key": pa.array([key] * n, pa.binary()), "value": [b"v%d" % i for i in range(n)]}
    if timestamps is not None:
        cols["timestamp"] = pa.array(timestamps, pa.int64())
    return pa.table(cols)


@pytest.fixture
def log(tmp_path) -> Log:
    log = Log(str(tmp_path))
    log.create_topic("t", 3)
    return log


def planner(log: Log, node_id: int | None = None, locate=None) -> AppendPlanner:
    snap = log.snapshot("t")
    return AppendPlanner("t", snap.topic_id, log.registry, node_id, locate)


@pytest.mark.parametrize("layout, offsets, leo", [
    ([(0, 2)], {0: [(0, 0)]}, {0: 2}),
    ([(0, 2), (0, 3), (2, 1)], {0: [(0, 0), (1, 2)], 2: [(2, 0)]}, {0: 5, 2: 1}),
    ([(1, 1), (0, 4), (1, 2)], {1: [(0, 0), (2, 1)], 0: [(1, 0)]}, {1: 3, 0: 4}),
])
def test_offsets_follow_batch_order_per_partition(log, layout, offsets, leo):
    batches = [PartitionBatch(p, records(n)) for p, n in layout]
    plan = planner(log).plan(log.snapshot("t"), batches, range(len(batches)))
    assert plan.offsets == offsets and plan.leo == leo and not plan.early and plan.producer_rows == []


def test_a_plan_on_top_of_a_group_in_flight_continues_its_log_ends(log):
    log.append("t", [{"value": b"x"}] * 3, partition=0)
    snap, p = log.snapshot("t"), planner(log)
    first = p.plan(snap, [PartitionBatch(0, records(2)), PartitionBatch(1, records(1))], [0, 1])
    assert first.offsets == {0: [(0, 3)], 1: [(1, 0)]}
    second = p.plan(snap, [PartitionBatch(1, records(4)), PartitionBatch(2, records(1))], [0, 1], after=first)
    assert second.offsets == {1: [(0, 1)], 2: [(1, 0)]}
    assert second.leo == {0: 5, 1: 5, 2: 1}  # the first group's log ends carried on
    assert second.txns([PartitionBatch(1, records(4)), PartitionBatch(2, records(1))], snap, None) == \
        {leo_app(1): 5, leo_app(2): 1}


@pytest.mark.parametrize("second_seq, second_n, expect", [
    (0, 2, "duplicate"),  # the first batch again: answered with its offsets
    (2, 1, 2),  # the next sequence: planned at the next offset
    (3, 1, OutOfOrderSequenceNumber),  # a gap
    (1, 1, OutOfOrderSequenceNumber),  # inside the first batch but not it
])
def test_producer_state_within_one_group(log, second_seq, second_n, expect):
    producer = log.init_producer()
    batches = [PartitionBatch(0, records(2), producer.producer_id, producer.producer_epoch, 0),
               PartitionBatch(0, records(second_n), producer.producer_id, producer.producer_epoch, second_seq)]
    plan = planner(log).plan(log.snapshot("t"), batches, [0, 1])
    assert plan.offsets[0][0] == (0, 0)
    if expect == "duplicate":
        assert plan.early == {1: AppendResult(0, 0, 2, duplicate=True)}
    elif isinstance(expect, int):
        assert plan.offsets[0][1] == (1, expect) and not plan.early
        assert [row[3:7] for row in plan.producer_rows] == [[0, 1, 0, 1], [2, 2, 2, 2]]  # seqs, offsets
    else:
        assert list(plan.early) == [1] and isinstance(plan.early[1], expect)
        assert plan.state_errors()  # a fresher snapshot may answer it otherwise: the committer looks again


def test_an_older_epoch_is_refused_once_a_newer_one_committed(log):
    producer = log.init_producer()
    pid = producer.producer_id
    log.append_batches("t", [PartitionBatch(0, records(1), pid, 1, 0)])
    plan = planner(log).plan(log.snapshot("t"), [PartitionBatch(0, records(1), pid, 0, 1)], [0])
    assert not plan.offsets and isinstance(plan.early[0], InvalidProducerEpoch)


def test_a_committing_transactions_batch_already_applied_is_a_duplicate(log):
    app = "lakelog.tx.7.0"
    log.append_batches("t", [PartitionBatch(0, records(2), transaction=(app, 3))])
    snap = log.snapshot("t")
    assert snap.txn(app) == 3
    batches = [PartitionBatch(0, records(2), transaction=(app, 3)), PartitionBatch(0, records(1), transaction=(app, 4))]
    plan = planner(log).plan(snap, batches, [0, 1])
    assert plan.early == {0: AppendResult(0, -1, 2, duplicate=True)}
    assert plan.offsets == {0: [(1, 2)]}
    assert plan.txns(batches, snap, None) == {leo_app(0): 3, app: 4}


def test_only_partitions_whose_lease_this_node_holds_are_planned(tmp_path):
    log = Log(str(tmp_path), node_id=1)
    log.create_topic("t", 3)
    log.take_lease("t", 0)
    Log(str(tmp_path), node_id=2).take_lease("t", 1)
    snap = log.snapshot("t")
    p = planner(log, node_id=1, locate=lambda node: (f"node {node} (http://front-{node})", f"http://front-{node}"))
    batches = [PartitionBatch(0, records(1)), PartitionBatch(1, records(1)), PartitionBatch(2, records(1)),
               PartitionBatch(1, records(1), transaction=("lakelog.tx.1.1", 1))]
    plan = p.plan(snap, batches, range(4))
    assert plan.offsets == {0: [(0, 0)], 1: [(3, 0)]}  # a transaction's commit is fenced by offsets, not leases
    held_by_2, nobody = plan.early[1], plan.early[2]
    assert isinstance(held_by_2, NotLeaderOrFollower) and "node 2 (http://front-2) does" in held_by_2.message
    assert isinstance(nobody, NotLeaderOrFollower) and "does not hold the lease" in nobody.message
    # the commit sets its lease again, unchanged, so a takeover since the snapshot conflicts with it
    assert set(plan.txns(batches, snap, 1)) == {leo_app(0), leo_app(1), "lakelog.tx.1.1", "lakelog.lease.0"}


def test_validation_names_the_first_problem_per_batch(tmp_path):
    log = Log(str(tmp_path))
    log.create_topic("t", 2, {"cleanup.policy": "compact"})
    snap = log.snapshot("t")
    batches = [PartitionBatch(0, records(1)), PartitionBatch(2, records(1)), PartitionBatch(1, records(1, key=None))]
    results: list = [None] * 3
    ok = planner(log).validate(snap, batches, results, range(3))
    assert ok == [0] and results[0] is None
    assert isinstance(results[1], UnknownTopicOrPartition) and "has 2 partitions" in results[1].message
    assert isinstance(results[2], InvalidRecord)


def test_a_deleted_or_recreated_topic_fences_its_planner(log):
    p = planner(log)
    assert p.fenced(log.snapshot("t")) is None
    log.delete_topic("t")
    log.create_topic("t", 1)
    recreated = log.snapshot("t")
    assert isinstance(p.fenced(recreated), UnknownTopicId)
    p.topic_id = recreated.topic_id
    assert p.fenced(recreated) is None


@pytest.mark.parametrize("config, stamps, expect_ts, expect_type", [
    ({}, [1_000, None], [1_000, 9_000], CREATE_TIME),  # CreateTime: the append time only where missing
    ({"message.timestamp.type": "LogAppendTime"}, [1_000, None], [9_000, 9_000], LOG_APPEND_TIME),
])
def test_segment_columns_carry_offsets_timestamps_and_sequences(tmp_path, config, stamps, expect_ts, expect_type):
    log = Log(str(tmp_path))
    log.create_topic("t", 1, config)
    batches = [PartitionBatch(0, records(2, timestamps=stamps), 5, 0, 2**31 - 1), PartitionBatch(0, records(1))]
    table = segment_table(batches, [(0, 10), (1, 12)], log.snapshot("t").config, 9_000)
    assert table.column("offset").to_pylist() == [10, 11, 12]
    assert [t.timestamp() * 1000 for t in table.column("timestamp").to_pylist()] == expect_ts + [9_000]
    assert set(table.column("timestampType").to_pylist()) == {expect_type}
    assert table.column("sequence").to_pylist() == [2**31 - 1, 0, -1]  # int32 wrap; -1: not idempotent
    assert table.column("producerId").to_pylist() == [5, 5, -1]


def test_results_are_answered_per_planned_batch():
    results: list = [None, None, None]
    fail(results, {0: [(0, 0)], 1: [(2, 4)]}, NotLeaderOrFollower("moved"))
    assert [type(r).__name__ for r in results] == ["NotLeaderOrFollower", "NoneType", "NotLeaderOrFollower"]
    acknowledge(results, {1: AppendResult(0, 7, 1)})
    assert results[1] == AppendResult(0, 7, 1)
