"""TopicSnapshot: persist/load, advancing over the log tail, rebuilding when the tail is gone (local and S3)."""

from __future__ import annotations

import pytest
from deltalake import DeltaTable

from lakelog import Log, PartitionBatch
from lakelog.storage.delta_log import LogTailGone, read_tail
from lakelog.storage.producer_state import ProducerStateManager
from lakelog.storage.segment_index import SegmentIndex
from lakelog.storage.topic_snapshot import (TopicSnapshot, advance, leo_app, load_persisted, load_snapshot, lso_app,
                                    rebuild_from_delta)
from lakelog.writer.records import normalize_records
from proc_support import Ack, check_log


def state(snap: TopicSnapshot, producers: bool = True) -> tuple:
    """Everything a snapshot derives from the log (producer state optional)."""
    out = (snap.topic, snap.version, snap.configuration, snap.txns, list(snap.index))
    return out + (sorted(snap.producers.to_rows()),) if producers else out


def replayed(root, topic: str) -> TopicSnapshot:
    """The snapshot replayed from version 0 (ignoring any persisted index)."""
    return load_snapshot(root, topic, base=TopicSnapshot(topic, -1, {}, SegmentIndex(), {}, ProducerStateManager()))


def fill(log: Log, topic: str, rounds: int, start: int = 0) -> list[Ack]:
    """Appends with varied timestamps to two partitions, and idempotent batches to partition 0."""
    acks = []
    pid = log.init_producer()
    for i in range(start, start + rounds):
        for p in (0, 1):
            values = tuple(f"{i}-{p}-{j}".encode() for j in range(1 + i % 3))
            recs = [{"value": v, "timestamp": 1_700_000_000_000 + ((i * 7919) % 50) * 1000 + j}
                    for j, v in enumerate(values)]
            res = log.append(topic, recs, partition=p)[0]
            acks.append(Ack(p, res.base_offset, values))
        recs = normalize_records([{"value": f"idem-{i}".encode()}])
        res = log.append_batches(topic, [PartitionBatch(0, recs, pid.producer_id, pid.producer_epoch, i - start)])[0]
        acks.append(Ack(0, res.base_offset, (f"idem-{i}".encode(),)))
    return acks


@pytest.fixture
def topic_log(root):
    log = Log(root)
    log.create_topic("t", 2, {"retention.ms": 3_600_000})
    return log


def test_persist_and_load_round_trip(root, topic_log):
    fill(topic_log, "t", 4)
    snap = load_snapshot(root, "t")
    assert snap.version > 0 and len(snap.index) == 12 and snap.producers.to_rows()
    path = snap.persist(root)
    assert path.endswith(f"_lakelog/index/{snap.version:020d}.arrow")
    loaded = load_persisted(root, "t")
    assert state(loaded) == state(snap)
    assert loaded.high_watermark(0) == snap.high_watermark(0) and loaded.config.get("retention.ms") == 3_600_000


def test_advance_over_the_tail_equals_a_full_replay(root, topic_log):
    fill(topic_log, "t", 2)
    old = load_snapshot(root, "t")
    old.persist(root)
    fill(topic_log, "t", 3, start=2)
    topic_log.delete_records("t", 1, 2)
    full = replayed(root, "t")
    assert full.version > old.version and full.txns[lso_app(1)] == 2
    assert state(load_snapshot(root, "t")) == state(full)  # persisted index + tail
    stale = old.copy()
    assert state(advance(root, stale)) == state(full)  # in place
    assert state(old) != state(full)  # copies are independent
    partial = advance(root, old.copy(), until_version=old.version + 1)
    assert partial.version == old.version + 1


def test_rebuild_from_delta_equals_the_replayed_snapshot(root, topic_log):
    fill(topic_log, "t", 3)
    topic_log.delete_records("t", 0, 1)
    topic_log.alter_topic("t", {"retention.ms": 1000})
    full = replayed(root, "t")
    rebuilt = rebuild_from_delta(root, "t")
    # configs, partition offsets and every segment (with its stats-derived timestamps) agree;
    # producer state lives only in commit metadata, so a rebuild cannot recover it
    assert state(rebuilt, producers=False) == state(full, producers=False)
    assert rebuilt.txns[leo_app(0)] == full.high_watermark(0) and rebuilt.config.get("retention.ms") == 1000


def test_log_tail_cleaned_up_behind_a_checkpoint_is_rebuilt(root, topic_log):
    acks = fill(topic_log, "t", 2)
    old = load_snapshot(root, "t")
    old.persist(root)  # an index that will predate the surviving log
    acks += fill(topic_log, "t", 2, start=2)
    dt = DeltaTable(root.uri_for("topics", "t"), storage_options=root.storage_options)
    checkpoint = dt.version()
    dt.create_checkpoint()
    acks += fill(topic_log, "t", 1, start=4)
    full = replayed(root, "t")
    for v in range(checkpoint):  # what Delta's log cleanup does after the checkpoint
        root.filesystem.delete_file(root.path_for("topics", "t", "_delta_log", f"{v:020d}.json"))

    with pytest.raises(LogTailGone):
        list(read_tail(root, root.path_for("topics", "t"), old.version))
    assert state(load_snapshot(root, "t"), producers=False) == state(full, producers=False)
    assert state(advance(root, old.copy()), producers=False) == state(full, producers=False)

    # a fresh writer and readers carry on: dense offsets, every acknowledged record readable
    log = Log(root)
    hw = log.describe_topic("t").partitions[1].high_watermark
    assert hw == full.high_watermark(1)
    res = log.append("t", [{"value": b"after"}], partition=1)[0]
    assert res.base_offset == hw
    check_log(root, "t", acks + [Ack(1, hw, (b"after",))])
