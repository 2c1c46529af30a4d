"""Writing one segment file: a partition's records, in offset order, as Parquet.

A segment is written before the commit that makes it visible; until then it is
an orphan that no reader can see (readers only follow the Delta log).  The
returned :class:`~deltalake.transaction.AddAction` carries Delta statistics for
``offset`` and ``timestamp`` (millisecond precision, rounded outwards so data
skipping stays conservative).
"""

from __future__ import annotations

import functools
import json
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lakelog.schema.typed_columns import TYPED_COLUMNS, leaf_paths
from lakelog.storage.record_schema import FILE_SCHEMA, PARTITION_COLUMN
from lakelog.storage.s3_objects import put_object
from lakelog.storage.segment_index import segment_file_name
from lakelog.storage.storage_root import StorageRoot

ROW_GROUP_SIZE = 256 * 1024  # rows, at most (a power of two)
# Row groups of about 8 MB of Arrow data: readers skip whole row groups by their offset statistics, so a read of
# the last records of a large segment (a consumer's tail, a Spark query on recent offsets) reads about this much
# of it, not all of it; 8 MB still amortises a row group's metadata and a column chunk's read.
ROW_GROUP_BYTES = 8 << 20
MIN_ROW_GROUP_ROWS = 4096


def row_group_rows(table: pa.Table) -> int:
    """Rows per row group for ``table``: about :data:`ROW_GROUP_BYTES` each, a power of two within [4,096,
    :data:`ROW_GROUP_SIZE`], so that split points at multiples of ``ROW_GROUP_SIZE`` rows (read_plan) stay on
    row-group boundaries."""
    per_row = max(table.nbytes / max(table.num_rows, 1), 1.0)
    rows = max(MIN_ROW_GROUP_ROWS, min(ROW_GROUP_SIZE, int(ROW_GROUP_BYTES // per_row)))
    return 1 << (rows.bit_length() - 1)


STATS_COLUMNS = ["offset", "timestamp"]
SINGLE_PUT_BYTES = 256 << 20  # larger files go to object stores as multipart uploads
LOCAL_CODEC, OBJECT_STORE_CODEC = "snappy", "zstd"  # compression.type=producer (topic_config.SEGMENT_CODECS)
UPLOAD_THREADS = 16  # segment uploads in flight at once, over all topics (object stores only)


def default_codec(root: StorageRoot) -> str:
    """The codec of a topic whose ``compression.type`` is ``producer``: zstd on an object store, snappy locally."""
    return LOCAL_CODEC if root.is_local else OBJECT_STORE_CODEC


def stats_timestamp(us: int, *, ceil: bool) -> str:
    """A µs timestamp as Delta statistics' millisecond ISO-8601 string, rounded outward (``ceil`` for a max)."""
    ms = -((-us) // 1000) if ceil else us // 1000
    dt = datetime.fromtimestamp(ms / 1000, tz=timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def segment_stats(table: pa.Table) -> str:
    """Delta add-action statistics JSON for a segment table of :data:`FILE_SCHEMA`."""
    offsets = table.column("offset")
    ts = table.column("timestamp").cast(pa.int64())
    omm, tmm = pc.min_max(offsets).as_py(), pc.min_max(ts).as_py()
    return json.dumps(
        {
            "numRecords": table.num_rows,
            "minValues": {"offset": omm["min"], "timestamp": stats_timestamp(tmm["min"], ceil=False)},
            "maxValues": {"offset": omm["max"], "timestamp": stats_timestamp(tmm["max"], ceil=True)},
            "nullCount": {"offset": 0, "timestamp": 0},
        }
    )


def write_segment(root: StorageRoot, topic: str, partition: int, table: pa.Table, *,
                  data_change: bool = True, base_offset: int | None = None, codec: str | None = None):
    """Write ``table`` (:data:`FILE_SCHEMA`, and any typed columns after it; offset order) as a new segment;
    return its AddAction.

    ``base_offset`` defaults to the first record's offset; a compacted segment
    passes the start of the range it covers. ``codec``: the Parquet codec of its pages (the topic's
    ``compression.type``, :attr:`~lakelog.storage.topic_config.TopicConfig.segment_codec`; None:
    :func:`default_codec`).
    """
    from deltalake.transaction import AddAction

    typed = [table.schema.field(n) for n in TYPED_COLUMNS if n in table.column_names]
    if table.schema != FILE_SCHEMA:
        meta = table.schema.metadata
        base_table = table.select(FILE_SCHEMA.names).cast(FILE_SCHEMA)
        for f in typed:  # (key_record, value_record: their Parquet statistics let readers skip row groups)
            base_table = base_table.append_column(f, table.column(f.name))
        table = base_table.replace_schema_metadata(meta)
    base = int(table.column("offset")[0].as_py()) if base_offset is None else base_offset
    rel = segment_file_name(partition, base, uuid.uuid4().hex)
    path = root.path_for("topics", topic, rel)
    stats = STATS_COLUMNS + [p for f in typed for p in leaf_paths(f.name, f.type)]
    size = write_file(root, path, table, compression=codec or default_codec(root), use_dictionary=False,
                      write_statistics=stats, row_group_size=row_group_rows(table))
    return AddAction(
        path=rel,
        size=size,
        partition_values={PARTITION_COLUMN: str(partition)},
        modification_time=int(time.time() * 1000),
        data_change=data_change,
        stats=segment_stats(table),
    )


def write_file(root: StorageRoot, path: str, table: pa.Table, **options) -> int:
    """Write ``table`` as a Parquet file at the root's ``path``; its size in bytes.

    On an object store a file up to :data:`SINGLE_PUT_BYTES` is built in memory and sent with one PUT: a
    filesystem stream would make it a multipart upload (two POSTs and a part PUT) and a HEAD for its size,
    four round trips in series. Larger ones (compaction's merged segments) stream as a multipart upload.
    """
    fs = root.filesystem
    if root.is_local or table.nbytes > SINGLE_PUT_BYTES:
        if root.is_local:
            fs.create_dir(path.rsplit("/", 1)[0], recursive=True)
        pq.write_table(table, path, filesystem=fs, **options)
        return fs.get_file_info(path).size
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, **options)
    data = sink.getvalue()
    put_object(root, path, data)
    return data.size


def write_segments(root: StorageRoot, topic: str, tables: dict[int, pa.Table],
                   codec: str | None) -> tuple[list, OSError | None]:
    """Write one segment per partition in ``codec``; ``(the adds written, the first failure or None)``.

    On an object store the uploads run in parallel (each is a round trip of the store's latency);
    locally, one after another.
    """
    adds: list = []
    if root.is_local or len(tables) == 1:
        for partition, table in tables.items():
            try:
                adds.append(write_segment(root, topic, partition, table, codec=codec))
            except OSError as e:
                return adds, e
        return adds, None
    futures = [uploads().submit(write_segment, root, topic, p, t, codec=codec) for p, t in tables.items()]
    failure = None
    for f in futures:
        try:
            adds.append(f.result())
        except OSError as e:
            failure = failure or e
    return adds, failure


@functools.cache
def uploads() -> ThreadPoolExecutor:
    """The threads that upload segments to an object store in parallel (shared by all topics)."""
    return ThreadPoolExecutor(max_workers=UPLOAD_THREADS, thread_name_prefix="lakelog-upload")
