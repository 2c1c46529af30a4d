"""The committer and its parts on real roots (a local directory, the moto S3 server): Delta's conflict rule and
unknown outcomes (table_commit.py), fencing between writers and of a deleted topic (committer.py), checkpoints at
the interval (checkpointer.py), the hand-off refused where this front is not the committer front
(committer_front.py), and pipelined groups committed in order (commit_pipeline.py)."""

from __future__ import annotations

import threading
import uuid

import pytest
from pyarrow.fs import FileSelector

from s3_server import BUCKET, s3_options
from lakelog.errors import KafkaStorageError, NotLeaderOrFollower, RequestTimedOut, UnknownTopicOrPartition
from lakelog.log import Log
from lakelog.storage.delta_commit import put_if_absent
from lakelog.storage.delta_log import commit_path
from lakelog.storage.storage_root import StorageRoot
from lakelog.storage.topic_snapshot import leo_app
from lakelog.writer import checkpointer
from lakelog.writer.commit_handoff import Handoff, HandoffRejected
from lakelog.writer.committer import Committer
from lakelog.writer.records import AppendResult, PartitionBatch
from lakelog.writer.table_commit import RETRY, TopicTable, commit_body, commit_meta


def batch(partition: int, n: int = 1) -> PartitionBatch:
    return PartitionBatch(partition, [{"value": b"v"}] * n)


def join_maintenance(topic: str) -> None:
    for t in threading.enumerate():
        if t.name == f"lakelog-maintain-{topic}":
            t.join(60)


@pytest.fixture
def root(tmp_path) -> StorageRoot:
    root = StorageRoot.resolve(str(tmp_path))
    Log(root).create_topic("t", 2)
    return root


def put_commit(root: StorageRoot, version: int, txns: dict[str, int], commit_id: str | None = None) -> str:
    """Another writer's commit at ``version``: no files, only the app ids ``txns``."""
    commit_id = commit_id or uuid.uuid4().hex
    body, _ = commit_body([], txns, commit_meta([], commit_id))
    put_if_absent(root, commit_path("topics/t", version), body)
    return commit_id


@pytest.mark.parametrize("theirs, ours, expect", [
    ({leo_app(1): 3}, {leo_app(0): 1}, RETRY),  # no app id of ours: the same commit at the next version
    ({leo_app(0): 3}, {leo_app(0): 1}, None),  # our partition's log end moved: re-plan
    ({"lakelog.lease.0": 5}, {leo_app(0): 1, "lakelog.lease.0": 0}, None),  # our lease taken: re-plan
])
def test_the_delta_conflict_rule(root, theirs, ours, expect):
    table = TopicTable(root, "t")
    version = table.snapshot.version + 1
    put_commit(root, version, theirs)
    assert table.after_conflict(uuid.uuid4().hex, ours, version) is expect
    assert table.snapshot.version == version and table.snapshot.txn(next(iter(theirs))) == theirs[next(iter(theirs))]


def test_a_conflict_with_our_own_commit_is_our_commit(root):
    """A PUT the store retried after it had landed: the version is taken by ourselves."""
    table = TopicTable(root, "t")
    version = table.snapshot.version + 1
    ours = put_commit(root, version, {leo_app(0): 0})
    assert table.after_conflict(ours, {leo_app(0): 0}, version) is True


@pytest.mark.parametrize("failure, landed, expect", [
    (OSError("connection reset"), True, True),  # only the response was lost
    (OSError("operation timed out"), False, RequestTimedOut),
    (OSError("connection reset"), False, KafkaStorageError),
])
def test_an_unknown_outcome_is_looked_up_by_commit_id(root, failure, landed, expect):
    table = TopicTable(root, "t")
    commit_id = uuid.uuid4().hex
    if landed:
        put_commit(root, table.snapshot.version + 1, {leo_app(0): 0}, commit_id)
    outcome = table.unknown_outcome(failure, commit_id)
    assert outcome is True if expect is True else type(outcome) is expect and "connection" not in outcome.message


def test_two_writers_on_one_root_never_share_an_offset(root):
    logs = [Log(root), Log(root)]
    acked: list[AppendResult] = []

    def write(log: Log) -> None:
        for _ in range(8):
            acked.extend(log.append_batches("t", [batch(0, 2), batch(1)]))

    threads = [threading.Thread(target=write, args=(log,)) for log in logs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert all(isinstance(r, AppendResult) for r in acked), acked
    for partition, n in ((0, 2), (1, 1)):
        bases = sorted(r.base_offset for r in acked if r.partition == partition)
        assert bases == list(range(0, 16 * n, n))  # every append once, contiguous, none shared
        assert Log(root).read("t", partition).column("offset").to_pylist() == list(range(16 * n))


def test_a_writer_whose_topic_was_deleted_is_fenced_and_gone(root):
    writer = Committer(root, "t")
    assert writer.append([batch(0)])[0].base_offset == 0
    Log(root).delete_topic("t")
    [error] = writer.append([batch(0)])
    assert isinstance(error, UnknownTopicOrPartition) and writer.gone
    Log(root).create_topic("t", 1)
    assert writer.committed_snapshot(Log(root).snapshot("t")) is None  # never again a view of the new one


def test_checkpoints_fall_every_interval_versions(root, monkeypatch):
    monkeypatch.setattr(checkpointer, "DEFAULT_CHECKPOINT_INTERVAL", 4)
    log = Log(root)
    for _ in range(9):  # versions 1..9 (0 is the topic's creation)
        log.append("t", [{"value": b"x"}], partition=0)
        join_maintenance("t")
    log.close()
    files = root.filesystem.get_file_info(FileSelector(root.path_for("topics", "t", "_delta_log")))
    names = sorted(f.base_name for f in files if f.base_name.endswith(".checkpoint.parquet"))
    assert names == [f"{v:020d}.checkpoint.parquet" for v in (4, 8)]


def test_a_lone_writer_refuses_handoffs(root):
    writer = Committer(root, "t", lock=threading.Lock())
    handoff = Handoff(writer.topic_id, uuid.uuid4().hex, 0, [], {}, {}, [])
    done = writer.accept(handoff)
    with pytest.raises(HandoffRejected) as refused:
        done.result(0)
    assert isinstance(refused.value.cause, NotLeaderOrFollower)
    assert writer.stage([batch(0)]) is None  # a local root commits one group at a time, never pipelined


def test_pipelined_groups_land_in_order(s3_endpoint):
    root = StorageRoot.resolve(f"s3://{BUCKET}/{uuid.uuid4().hex}", s3_options(s3_endpoint))
    Log(root).create_topic("t", 2)
    lock = threading.Lock()
    writer = Committer(root, "t", lock=lock)
    with lock:
        staged = [writer.stage([batch(0, 2), batch(1)]) for _ in range(4)]
        assert all(s is not None for s in staged)
        assert writer.stage([PartitionBatch(0, [{"value": b"t"}], transaction=("lakelog.tx.1.0", 1))]) is None
    results = [s.future.result(60) for s in staged]
    assert [[r.base_offset for r in group] for group in results] == [[0, 0], [2, 1], [4, 2], [6, 3]]
    assert [s.version for s in staged] == sorted(s.version for s in staged)
    with lock:
        writer.close()
    assert Log(root).read("t", 0).column("offset").to_pylist() == list(range(8))
