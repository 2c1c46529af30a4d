"""The dirty-key scan: a Spark DataFrame of the dirty records' keys and offsets, read on the executors.

One Spark task per slice of planned segments; ``mapInArrow`` reads each file
with pyarrow on an executor (only the ``offset`` and ``key`` columns) and emits
``partition int, offset long, key binary`` for the records of the partition's
dirty range that have a key -- combined per task to each key's latest offset,
as Spark's own partial aggregation would, so only distinct keys cross into the
JVM.  Grouped by ``(partition, key)`` with ``max(offset)`` this is the
cleaner's offset map (:mod:`lakelog.maintenance.key_map`).

This reads the segment files planned from the driver's snapshot directly
rather than through ``spark.read.format("lakelog")``: the scan needs column
pruning (keys and offsets, never values), which the lakelog source does not
offer -- it always produces every column of the Kafka schema.  Swapping the
source means replacing :func:`scan_dirty_keys` with a lakelog read
(``assign`` + per-partition ``startingOffsets``/``endingOffsets`` = the dirty
range) selecting ``partition, offset, key``; nothing else changes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lakelog.reader.segment_reader import open_segment
from lakelog.storage.segment_index import Segment
from lakelog.storage.storage_root import StorageRoot

KEYS_DDL = "partition int, offset long, key binary"
KEYS_SCHEMA = pa.schema([("partition", pa.int32()), ("offset", pa.int64()), ("key", pa.binary())])
BATCH_ROWS = 128 * 1024


@dataclass(frozen=True)
class ScanTask:
    """One segment to scan, with the offset range whose records count (start <= offset < end)."""

    segment: Segment
    start: int
    end: int


def scan_file(root: StorageRoot, topic: str, task: ScanTask) -> pa.RecordBatch:
    """The keyed records of one segment within the task's range (vectorised, no per-record Python)."""
    seg = task.segment
    with open_segment(root, topic, seg.path, seg.bytes, whole_ok=False) as f:
        t = pq.ParquetFile(f).read(columns=["offset", "key"])
    offsets = t.column("offset").combine_chunks()
    keys = t.column("key").combine_chunks()
    mask = pc.and_(pc.and_(pc.greater_equal(offsets, task.start), pc.less(offsets, task.end)), pc.is_valid(keys))
    offsets, keys = offsets.filter(mask), keys.filter(mask)
    return pa.RecordBatch.from_arrays([pa.array(np.full(len(offsets), seg.partition, dtype=np.int32)), offsets,
                                       keys], schema=KEYS_SCHEMA)


SLICE_BYTES = 64 << 20  # below this much work per task, more tasks than cores only add scheduling


def slice_count(spark, total_bytes: int) -> int:
    """How many tasks to split ``total_bytes`` of segments into: the cores, up to 4 per core for big inputs."""
    cores = spark.sparkContext.defaultParallelism
    return max(cores, min(cores * 4, total_bytes // SLICE_BYTES))


def assign_slices(items: Sequence[tuple[object, int]], max_slices: int) -> list[list]:
    """Deal ``(item, weight)`` pairs into at most ``max_slices`` lists of similar total weight (heaviest first).

    ``spark.range(n, numPartitions=n)`` then gives one Spark task per list.
    """
    n = max(1, min(len(items), max_slices))
    slices: list[list] = [[] for _ in range(n)]
    load = [0] * n
    for item, weight in sorted(items, key=lambda x: -x[1]):
        k = load.index(min(load))
        slices[k].append(item)
        load[k] += weight
    return slices


def scan_dirty_keys(spark, root: StorageRoot, topic: str, tasks: Sequence[ScanTask]):
    """A DataFrame (:data:`KEYS_DDL`) of the tasks' keyed records, read on the executors."""
    slices = assign_slices([(t, t.segment.bytes) for t in tasks],
                           slice_count(spark, sum(t.segment.bytes for t in tasks)))

    def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for b in batches:
            for k in b.column(0).to_pylist():
                if not slices[k]:
                    continue
                # a combiner, as Spark's partial aggregation: only each key's latest offset leaves the task
                t = pa.Table.from_batches([scan_file(root, topic, task) for task in slices[k]], schema=KEYS_SCHEMA)
                t = t.group_by(["partition", "key"], use_threads=False).aggregate([("offset", "max")])
                t = t.rename_columns({"offset_max": "offset"}).select(KEYS_SCHEMA.names)
                for batch in t.to_batches(max_chunksize=BATCH_ROWS):
                    yield batch

    return spark.range(len(slices), numPartitions=len(slices)).mapInArrow(read, KEYS_DDL)
