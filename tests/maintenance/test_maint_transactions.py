"""Maintenance of topics written by transactions: compaction, merge and retention keep the right records, and the
Delta ``txn`` markers of committed transactions (``lakelog.tx.<producer id>.<partition>``) survive their commits,
a Delta checkpoint and a rebuild from it, so a commit applied again afterwards is still a duplicate."""

from __future__ import annotations

from lakelog import Log
from lakelog.maintenance.cleaner import run_compaction
from lakelog.maintenance.segment_merge import run_merge
from lakelog.maintenance.retention import run_retention
from lakelog.maintenance.spark_session import LazySession
from lakelog.storage.topic_snapshot import rebuild_from_delta
from lakelog.transaction.transaction_coordinator import TransactionCoordinator, marker_app
from lakelog.writer.records import PartitionBatch

from maint_support import T0, PartitionModel, check_contiguous, table_rows

DAY = 86_400_000
COMPACT = {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "1000"}


class Producer:
    """A transactional producer over a real coordinator; remembers each committed transaction's batches exactly
    as the coordinator applied them (records, producer, Delta txn marker)."""

    def __init__(self, log: Log, tid: str, topic: str) -> None:
        self.coord, self.tid, self.topic = TransactionCoordinator(log), tid, topic
        ident = self.coord.init_producer_id(tid)
        self.pid, self.epoch = ident.producer_id, ident.producer_epoch
        self.seq: dict[int, int] = {}
        self.applied: list[PartitionBatch] = []

    def txn(self, batches: dict[int, list[dict]], commit: bool = True) -> None:
        self.coord.add_partitions(self.tid, self.pid, self.epoch, [(self.topic, p) for p in batches])
        for p, records in batches.items():
            seq = self.seq.get(p, 0)
            self.coord.stage_batch(self.tid, PartitionBatch(p, records, self.pid, self.epoch, seq), self.topic)
            self.seq[p] = seq + len(records)
        marker = self.coord.describe(self.tid).marker
        self.coord.end_txn(self.tid, self.pid, self.epoch, commit)
        if commit:
            self.applied += [PartitionBatch(p, records, self.pid, self.epoch,
                                            transaction=(marker_app(self.pid, p), marker))
                             for p, records in batches.items()]


def assert_reapplied_commits_are_duplicates(log: Log, producer: Producer) -> None:
    """Every committed transaction's batches, appended again (a retried apply), are duplicates: nothing lands."""
    topic = producer.topic
    snap = log.snapshot(topic)
    for b in producer.applied:
        assert snap.txn(b.transaction[0]) >= b.transaction[1], b.transaction
    before = {p: table_rows(log, topic, p) for p in range(snap.partition_count)}
    hw = {p: snap.high_watermark(p) for p in range(snap.partition_count)}
    results = log.append_batches(topic, producer.applied)
    assert all(r.duplicate for r in results), results
    after = log.snapshot(topic)
    assert {p: after.high_watermark(p) for p in range(snap.partition_count)} == hw
    assert {p: table_rows(log, topic, p) for p in range(snap.partition_count)} == before


def test_compaction_and_merge_of_a_transactional_topic_keep_records_and_markers(spark, local_root):
    """Committed transactions (one segment per partition each), an aborted one and plain appends in a compacted
    topic: a compaction pass keeps what Kafka's cleaner keeps, a merge keeps every record, and after each (and
    from a fresh process) re-applying every committed transaction appends nothing."""
    log = Log(local_root)
    log.create_topic("c", 2, COMPACT)
    producer = Producer(log, "app", "c")
    models = [PartitionModel() for _ in range(2)]

    def produce(p_records: dict[int, list[tuple[bytes | None, bytes | None]]], commit: bool = True) -> None:
        producer.txn({p: [{"key": k, "value": v, "timestamp": T0} for k, v in rs] for p, rs in p_records.items()},
                     commit)
        if commit:
            for p, rs in p_records.items():
                models[p].append([(k, v, T0) for k, v in rs])

    produce({0: [(b"a", b"1"), (b"b", b"1")], 1: [(b"x", b"1")]})
    produce({0: [(b"a", b"2"), (b"c", None)], 1: [(b"x", b"2"), (b"y", b"1")]})
    produce({0: [(b"a", b"lost"), (b"b", b"lost")], 1: [(b"x", b"lost")]}, commit=False)
    log.append("c", [{"key": "b", "value": "2", "timestamp": T0}], partition=0)
    models[0].append([(b"b", b"2", T0)])
    produce({0: [(b"a", b"3")], 1: [(b"y", b"2")]})
    produce({0: [(b"z", b"tail")], 1: [(b"z", b"tail")]})  # the active segments: never cleaned
    for p in range(2):
        assert table_rows(log, "c", p) == models[p].rows()
    assert_reapplied_commits_are_duplicates(log, producer)

    lazy = LazySession("lakelog-test")
    report = run_compaction(lazy, local_root, ["c"], now_ms=T0)
    assert not lazy.started and report.topics[0].version_after is not None
    for p in range(2):
        models[p].clean(T0, 1000)
        assert table_rows(log, "c", p) == models[p].rows(), p
    assert [v for _, k, v in table_rows(log, "c", 0) if k == b"a"] == [b"3"]
    check_contiguous(log.snapshot("c"))
    assert_reapplied_commits_are_duplicates(log, producer)
    assert_reapplied_commits_are_duplicates(Log(local_root), producer)  # a fresh process: index + log tail

    before = {p: table_rows(log, "c", p) for p in range(2)}
    merged = run_merge(spark, local_root, ["c"], segment_bytes=1 << 30, segment_ms=1 << 50)
    assert merged.topics[0].segments_written >= 1
    assert {p: table_rows(log, "c", p) for p in range(2)} == before
    assert len(log.segments("c", 0)) < len(models[0].segment_bases)
    assert_reapplied_commits_are_duplicates(log, producer)
    assert_reapplied_commits_are_duplicates(Log(local_root), producer)

    # a later transaction still lands after all of it, at the next offsets
    hw = log.snapshot("c").high_watermark(1)
    produce({1: [(b"after", b"1")]})
    assert table_rows(log, "c", 1)[-1] == (hw, b"after", b"1")


def test_retention_of_a_transactional_topic_keeps_markers(local_root):
    """Retention removes whole expired segments of committed transactions; the markers stay, so re-applying an
    expired transaction does not bring its records back, and later ones continue the offsets."""
    log = Log(local_root)
    log.create_topic("d", 2, {"retention.ms": str(2 * DAY), "file.delete.delay.ms": "0"})
    producer = Producer(log, "app", "d")
    for day in range(4):
        producer.txn({p: [{"key": f"k{i}", "value": f"d{day}-p{p}-{i}", "timestamp": T0 + day * DAY}
                          for i in range(3)] for p in range(2)})
    producer.txn({0: [{"key": "k", "value": "aborted", "timestamp": T0 + 3 * DAY}]}, commit=False)

    report = run_retention(local_root, ["d"], now_ms=T0 + 3 * DAY + 1)
    assert report.topics[0].log_start_offsets == {0: (0, 6), 1: (0, 6)}
    for p in range(2):
        rows = table_rows(log, "d", p)
        assert [o for o, _, _ in rows] == list(range(6, 12))
        assert [v.decode() for _, _, v in rows] == [f"d{d}-p{p}-{i}" for d in (2, 3) for i in range(3)]
    assert_reapplied_commits_are_duplicates(log, producer)
    assert_reapplied_commits_are_duplicates(Log(local_root), producer)
    producer.txn({1: [{"key": "k", "value": "next", "timestamp": T0 + 3 * DAY}]})
    assert table_rows(log, "d", 1)[-1] == (12, b"k", b"next")


def test_markers_survive_a_checkpoint_and_a_rebuild_from_it(root):
    """Once the commits before a Delta checkpoint are cleaned up (delta.logRetentionDuration) and no Arrow index
    is left, a reader rebuilds the snapshot from the checkpoint and the commits after it: the markers must be in
    it, or a retried commit would append its records a second time.  (Local and S3.)"""
    from deltalake import DeltaTable
    from pyarrow.fs import FileSelector

    log = Log(root)
    log.create_topic("r", 2)
    producer = Producer(log, "app", "r")
    for i in range(3):
        producer.txn({p: [{"key": "k", "value": f"{i}-{p}"}] for p in range(2)})
    log.close()
    dt = DeltaTable(root.uri_for("topics", "r"), storage_options=root.storage_options)
    dt.create_checkpoint()
    checkpoint = dt.version()
    producer.txn({p: [{"key": "k", "value": f"3-{p}"}] for p in range(2)})  # a commit after the checkpoint
    log.close()
    rebuilt = rebuild_from_delta(root, "r")
    for b in producer.applied:
        assert rebuilt.txn(b.transaction[0]) >= b.transaction[1], b.transaction
    # the same through a fresh process whose log tail and index are gone
    fs = root.filesystem
    for info in fs.get_file_info(FileSelector(root.path_for("topics", "r", "_delta_log"))):
        if info.base_name.endswith(".json") and int(info.base_name[:20]) < checkpoint:
            fs.delete_file(info.path)
    for info in fs.get_file_info(FileSelector(root.path_for("topics", "r", "_lakelog", "index"),
                                              allow_not_found=True)):
        fs.delete_file(info.path)
    fresh = Log(root)
    assert [r[2] for r in table_rows(fresh, "r", 0)] == [b"0-0", b"1-0", b"2-0", b"3-0"]
    assert_reapplied_commits_are_duplicates(fresh, producer)
