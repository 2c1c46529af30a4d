"""Reading planned slices as Arrow record batches in the Spark Kafka source's layout.

Runs inside Spark tasks (no Spark import needed).  A slice's row groups are
chosen by their ``offset`` statistics; rows are in offset order, so the slice's
bounds cut a batch by binary search (a zero-copy slice), never by a filter.
The ``topic`` and ``partition`` columns are constants: they are built once per
process and sliced, so a batch costs no per-row work beyond Parquet decoding.
Only the requested columns are decoded (a user schema naming fewer columns
reads fewer).

Stateless apart from the constant-column cache; safe from any thread.
"""

from __future__ import annotations

import logging
import threading
from typing import Iterable, Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from lakelog.errors import OffsetOutOfRange
from lakelog.spark.read_plan import SegmentSlice
from lakelog.reader.segment_reader import open_segment, row_group_ranges
from lakelog.spark.source_offsets import DATA_LOSS_HINT_FALSE, DATA_LOSS_HINT_TRUE
from lakelog.schema.typed_columns import TYPED_COLUMNS, conform
from lakelog.storage.record_schema import TIMESTAMP_TYPE
from lakelog.storage.storage_root import StorageRoot

log = logging.getLogger(__name__)

BATCH_ROWS = 16 * 1024  # smaller batches cost the JVM's Arrow-to-row conversion less

KAFKA_FIELDS = [
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()),
    pa.field("timestamp", TIMESTAMP_TYPE),
    pa.field("timestampType", pa.int32()),
]
KAFKA_ARROW_SCHEMA = pa.schema(KAFKA_FIELDS)
FILE_COLUMNS = ("offset", "timestamp", "timestampType", "key", "value", "headers")

_lock = threading.Lock()
_topic_columns: dict[str, pa.Array] = {}
_partition_columns: dict[int, pa.Array] = {}


def _constant_topic(topic: str, n: int) -> pa.Array:
    with _lock:
        arr = _topic_columns.get(topic)
        if arr is None or len(arr) < n:
            data = topic.encode()
            size = max(n, BATCH_ROWS)
            offsets = np.arange(0, (size + 1) * len(data), len(data), dtype=np.int32)[: size + 1]
            arr = pa.StringArray.from_buffers(size, pa.py_buffer(offsets.tobytes()), pa.py_buffer(data * size))
            _topic_columns[topic] = arr
    return arr.slice(0, n)


def _constant_partition(partition: int, n: int) -> pa.Array:
    with _lock:
        arr = _partition_columns.get(partition)
        if arr is None or len(arr) < n:
            arr = pa.array(np.full(max(n, BATCH_ROWS), partition, dtype=np.int32))
            _partition_columns[partition] = arr
    return arr.slice(0, n)


def _bounds(offsets: pa.Array, start: int, end: int) -> tuple[int, int]:
    values = offsets.to_numpy(zero_copy_only=False)
    if values[0] >= start and values[-1] < end:
        return 0, len(values)
    return int(np.searchsorted(values, start, "left")), int(np.searchsorted(values, end, "left"))


def read_slices(root: StorageRoot, slices: Iterable[SegmentSlice], schema: pa.Schema = KAFKA_ARROW_SCHEMA, *,
                fail_on_data_loss: bool = True, batch_rows: int = BATCH_ROWS) -> Iterator[pa.RecordBatch]:
    """Record batches of ``schema`` (columns of the Kafka source, any subset, any order) for ``slices``.

    A segment file that vanished after planning (retention, then vacuum) raises ``OFFSET_OUT_OF_RANGE``, or is
    skipped with a warning when ``fail_on_data_loss`` is false.
    """
    names = schema.names
    file_cols = [c for c in FILE_COLUMNS if c in names]
    if "offset" not in file_cols:
        file_cols.insert(0, "offset")
    typed = [c for c in TYPED_COLUMNS if c in names]  # read where a file has them, null where it has not
    for s in slices:
        try:
            f = open_segment(root, s.topic, s.path, s.file_bytes, whole_ok=s.whole)
        except FileNotFoundError:
            message = (f"Segment {s.path} of {s.topic}-{s.partition} holding offsets [{s.start}, {s.end}) was "
                       f"removed after the read was planned.")
            if fail_on_data_loss:
                raise OffsetOutOfRange(f"{message} {DATA_LOSS_HINT_TRUE}") from None
            log.warning("%s %s", message, DATA_LOSS_HINT_FALSE)
            continue
        with f:
            pf = pq.ParquetFile(f, pre_buffer=not root.is_local)
            groups = [rg for rg, lo, hi in row_group_ranges(pf) if hi >= s.start and lo < s.end]
            if not groups:
                continue
            cols = file_cols + [c for c in typed if c in pf.schema_arrow.names]
            for batch in pf.iter_batches(batch_size=batch_rows, row_groups=groups, columns=cols,
                                         use_threads=False):
                offsets = batch.column(0)
                i, j = _bounds(offsets, s.start, s.end)
                if j <= i:
                    continue
                if i or j < batch.num_rows:
                    batch = batch.slice(i, j - i)
                yield _assemble(batch, cols, names, schema, s.topic, s.partition)


def _assemble(batch: pa.RecordBatch, file_cols: Sequence[str], names: Sequence[str], schema: pa.Schema, topic: str,
              partition: int) -> pa.RecordBatch:
    n = batch.num_rows
    arrays = []
    for name in names:
        if name == "topic":
            arrays.append(_constant_topic(topic, n))
        elif name == "partition":
            arrays.append(_constant_partition(partition, n))
        elif name in TYPED_COLUMNS:
            t = schema.field(name).type
            arrays.append(conform(batch.column(file_cols.index(name)), t) if name in file_cols else pa.nulls(n, t))
        else:
            arrays.append(batch.column(file_cols.index(name)))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)
