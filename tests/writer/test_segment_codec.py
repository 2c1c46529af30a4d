"""A topic's ``compression.type`` is the Parquet codec of the segments written for it: by a single append, by
the accumulator's pipelined group commits (object stores), and by compaction's rewrite; altering it changes
the segments written from then on and leaves the others as they are; every codec reads back the same records.
``producer``, the default, lets the storage choose: zstd on an object store, snappy on a local disk."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from lakelog import Log
from lakelog.maintenance.cleaner import run_compaction
from lakelog.maintenance.spark_session import LazySession
from lakelog.storage.topic_config import SEGMENT_CODECS, TopicConfig

# compression.type -> the codec Parquet's metadata names for every column chunk (producer: on an object store)
PARQUET_NAMES = {"producer": "ZSTD", "zstd": "ZSTD", "lz4": "LZ4", "snappy": "SNAPPY", "gzip": "GZIP",
                 "uncompressed": "UNCOMPRESSED"}


def segment_codecs(log: Log, topic: str, partition: int = 0) -> list[set[str]]:
    """Per segment of the partition, in offset order: the codecs of its column chunks."""
    root = log.root
    out = []
    for seg in log.snapshot(topic).index.segments(partition):
        with root.filesystem.open_input_file(root.path_for("topics", topic, seg.path)) as f:
            meta = pq.ParquetFile(f).metadata
            out.append({meta.row_group(g).column(c).compression
                        for g in range(meta.num_row_groups) for c in range(meta.num_columns)})
    return out


def values(log: Log, topic: str, partition: int = 0) -> list[bytes]:
    return log.read(topic, partition).column("value").to_pylist()


def test_every_kafka_codec_name_has_a_parquet_codec():
    assert set(PARQUET_NAMES) == set(SEGMENT_CODECS)
    assert TopicConfig().segment_codec is None, "producer, Kafka's default, leaves the codec to the root"


@pytest.mark.parametrize("codec", sorted(PARQUET_NAMES))
def test_a_topics_segments_are_written_in_its_codec(log, codec):
    log.create_topic("t", 1, {"compression.type": codec})
    sent = [f"value {i} ".encode() * 10 for i in range(50)]
    log.append("t", [{"value": v} for v in sent], partition=0)
    expected = "SNAPPY" if codec == "producer" and log.root.is_local else PARQUET_NAMES[codec]
    assert segment_codecs(log, "t") == [{expected}]
    assert values(log, "t") == sent


def test_the_default_codec_is_the_roots(log):
    log.create_topic("t", 1)
    log.append("t", [{"value": b"x" * 100}], partition=0)
    assert segment_codecs(log, "t") == [{"SNAPPY" if log.root.is_local else "ZSTD"}]


def test_pipelined_group_commits_write_the_topics_codec(log):
    log.create_topic("t", 2, {"compression.type": "gzip"})
    acc = log.accumulator(linger_ms=5)
    try:
        futures = [acc.append("t", log.split_by_partition("t", [{"key": f"k{i}".encode(), "value": b"v" * 100}
                                                               for i in range(20)], num_partitions=2))
                   for _ in range(5)]
        for f in futures:
            f.result(timeout=60)
    finally:
        acc.close()
    for p in (0, 1):
        assert segment_codecs(log, "t", p) and all(c == {"GZIP"} for c in segment_codecs(log, "t", p))
    assert sum(len(values(log, "t", p)) for p in (0, 1)) == 100


def test_altering_the_codec_changes_only_later_segments(log):
    log.create_topic("t", 1, {"compression.type": "snappy"})
    log.append("t", [{"value": b"before"}], partition=0)
    log.alter_topic("t", {"compression.type": "uncompressed"})
    log.append("t", [{"value": b"after"}], partition=0)
    assert segment_codecs(log, "t") == [{"SNAPPY"}, {"UNCOMPRESSED"}]
    assert values(log, "t") == [b"before", b"after"]


def test_compaction_rewrites_in_the_topics_codec(tmp_path):
    log = Log(str(tmp_path / "root"))
    log.create_topic("c", 1, {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01",
                              "compression.type": "snappy"})
    sent = []
    for i in range(4):
        batch = [(b"k", f"v{i}".encode()), (f"u{i}".encode(), b"x")]
        log.append("c", [{"key": k, "value": v} for k, v in batch], partition=0)
        sent += batch
    log.alter_topic("c", {"compression.type": "gzip"})
    before = {s.path for s in log.snapshot("c").index.segments(0)}
    lazy = LazySession("lakelog-test")
    run_compaction(lazy, log.root, ["c"], now_ms=None)
    assert not lazy.started
    after = log.snapshot("c").index.segments(0)
    rewritten = [i for i, s in enumerate(after) if s.path not in before]
    codecs = segment_codecs(log, "c")
    assert rewritten and all(codecs[i] == {"GZIP"} for i in rewritten), codecs
    assert all(codecs[i] == {"SNAPPY"} for i in range(len(after)) if i not in rewritten), codecs
    table = log.read("c", 0)
    survivors = list(zip(table.column("key").to_pylist(), table.column("value").to_pylist()))
    assert len(survivors) < len(sent) and survivors[-1] == sent[-1]
    assert [r for r in sent if r in survivors] == survivors  # a subsequence, in order
