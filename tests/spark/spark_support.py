"""Helpers of the Spark tests: readers with storage options, rows as comparable tuples, topic builders."""

from __future__ import annotations

from pathlib import Path

from spark_cluster import SPARK_ENV  # noqa: F401  (re-exported to this directory's tests)

REPO = Path(__file__).resolve().parents[2]


def storage_options(root) -> dict[str, str]:
    """A StorageRoot's options as the source's ``storage.<key>`` options."""
    return {f"storage.{k}": v for k, v in root.options}


def lakelog_reader(spark, root, *, stream: bool = False, **options):
    """``spark.read(Stream).format("lakelog")`` with ``options`` and the root's storage options (not loaded)."""
    reader = (spark.readStream if stream else spark.read).format("lakelog")
    for k, v in {**storage_options(root), **options}.items():
        reader = reader.option(k, v)
    return reader


def records_of(df, *cols: str) -> list[tuple]:
    """The DataFrame's rows as sorted tuples of ``cols`` (default topic, partition, offset, key, value)."""
    cols = cols or ("topic", "partition", "offset", "key", "value")
    return sorted(tuple(bytes(v) if isinstance(v, bytearray) else v for v in row) for row in df.select(*cols).collect())


def append_segment(root, topic: str, partition: int, offsets: list[int], timestamps_ms: list[int], *,
                   next_offset: int | None = None) -> None:
    """Commit one segment holding exactly ``offsets`` (gaps allowed, as after key compaction) to ``partition``.

    The partition's high watermark becomes ``next_offset`` (default ``offsets[-1] + 1``: compaction may have
    removed the segment's last offsets); offsets must start at or after the current one.
    """
    import pyarrow as pa
    from deltalake import CommitProperties, DeltaTable, Transaction

    from lakelog.storage.record_schema import FILE_SCHEMA, TABLE_SCHEMA, TIMESTAMP_TYPE
    from lakelog.storage.topic_snapshot import leo_app
    from lakelog.writer.segment_writer import write_segment

    n = len(offsets)
    values = [f"v{o}".encode() for o in offsets]
    table = pa.table({
        "offset": pa.array(offsets, pa.int64()),
        "timestamp": pa.array([t * 1000 for t in timestamps_ms], pa.int64()).cast(TIMESTAMP_TYPE),
        "timestampType": pa.array([0] * n, pa.int32()),
        "key": pa.array([f"k{o % 3}".encode() for o in offsets], pa.binary()),
        "value": pa.array(values, pa.binary()),
        "headers": pa.array([[] for _ in offsets], FILE_SCHEMA.field("headers").type),
        "producerId": pa.array([-1] * n, pa.int64()),
        "producerEpoch": pa.array([-1] * n, pa.int16()),
        "sequence": pa.array([-1] * n, pa.int32()),
    }, schema=FILE_SCHEMA)
    add = write_segment(root, topic, partition, table)
    dt = DeltaTable(root.uri_for("topics", topic), storage_options=root.storage_options)
    dt.create_write_transaction([add], mode="append", schema=TABLE_SCHEMA, partition_by=["partition"],
                                commit_properties=CommitProperties(
                                    app_transactions=[Transaction(leo_app(partition), next_offset or offsets[-1] + 1)],
                                    custom_metadata={"lakelog.operation": "compaction"}))


def produce(log, topic: str, partition: int, n: int, *, t0_ms: int = 1_700_000_000_000, step_ms: int = 1000,
            prefix: str = "v") -> None:
    """Append ``n`` records to one partition, timestamps ``t0 + i * step``."""
    log.append(topic, [{"key": f"k{i % 5}", "value": f"{prefix}{i}", "timestamp": t0_ms + i * step_ms}
                       for i in range(n)], partition=partition)
