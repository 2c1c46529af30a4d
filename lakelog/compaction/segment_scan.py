"""The compaction scan: a Spark DataFrame of the planned segments' keys and offsets, read on the executors.

One input row per segment (partition, file, the partition's cleanable range);
``mapInArrow`` reads each file with pyarrow on an executor and emits one row
per record with only what the cleaner decides on::

    partition int, segment int, offset long, key binary,
    in_range boolean   -- log start <= offset < first uncleanable offset
    dirty boolean      -- in range and offset >= first dirty offset
    tombstone boolean  -- null value
    stamped_ms long    -- when a tombstone was first cleaned (null if not yet)

Values are read only from files that may hold tombstones (producers' files,
and cleaned files whose footer counts some), so a pass moves keys and offsets,
not payloads.

This reads the segment files planned from the driver's snapshot directly rather
than through ``spark.read.format("lakelog")``: the cleaner needs each record's
segment, the tombstone stamps in the file footers and column pruning, which
the lakelog source does not expose.  Swapping the source means replacing
:func:`scan_segments` with a lakelog read (``assign`` + per-partition
``startingOffsets``/``endingOffsets`` = the cleanable range) joined to the
segment ranges; nothing else changes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lakelog.compaction.tombstone_horizon import TombstoneStamps
from lakelog.segment_index import Segment
from lakelog.storage import StorageRoot

SCAN_DDL = ("partition int, segment int, offset long, key binary, in_range boolean, dirty boolean, "
            "tombstone boolean, stamped_ms long")
SCAN_SCHEMA = pa.schema([("partition", pa.int32()), ("segment", pa.int32()), ("offset", pa.int64()),
                         ("key", pa.binary()), ("in_range", pa.bool_()), ("dirty", pa.bool_()),
                         ("tombstone", pa.bool_()), ("stamped_ms", pa.int64())])


@dataclass(frozen=True)
class ScanTask:
    """One segment to scan, with its partition's cleanable range."""

    segment_id: int
    segment: Segment
    log_start_offset: int
    first_dirty_offset: int
    end_offset: int  # first uncleanable offset


def scan_file(root: StorageRoot, topic: str, task: ScanTask) -> pa.RecordBatch:
    """The scan rows of one segment file (see the module doc)."""
    seg = task.segment
    with root.filesystem.open_input_file(root.path_for("topics", topic, seg.path)) as f:
        pf = pq.ParquetFile(f)
        stamps = TombstoneStamps.from_metadata(pf.schema_arrow.metadata)
        cols = ["offset", "key", "value"] if stamps.may_have_tombstones else ["offset", "key"]
        t = pf.read(columns=cols)
    offsets = t.column("offset").combine_chunks()
    n = len(offsets)
    in_range = pc.and_(pc.greater_equal(offsets, task.log_start_offset), pc.less(offsets, task.end_offset))
    dirty = pc.and_(in_range, pc.greater_equal(offsets, task.first_dirty_offset))
    if "value" in cols:
        tomb = pc.is_null(t.column("value").combine_chunks())
        tomb_idx = pc.indices_nonzero(tomb).to_pylist()
        stamped: list[int | None] = [None] * n
        if stamps.runs and tomb_idx:
            times = stamps.pass_times(offsets.take(pa.array(tomb_idx)).to_pylist())
            for i, ms in zip(tomb_idx, times):
                stamped[i] = ms
        stamped_arr = pa.array(stamped, pa.int64())
    else:
        tomb = pa.array([False] * n, pa.bool_()) if n else pa.array([], pa.bool_())
        stamped_arr = pa.nulls(n, pa.int64())
    return pa.RecordBatch.from_arrays(
        [pa.array([seg.partition] * n, pa.int32()), pa.array([task.segment_id] * n, pa.int32()), offsets,
         t.column("key").combine_chunks(), in_range, dirty, tomb, stamped_arr], schema=SCAN_SCHEMA)


def scan_segments(spark, root: StorageRoot, topic: str, tasks: Sequence[ScanTask]):
    """A DataFrame (:data:`SCAN_DDL`) of every record of the ``tasks``' segments, read on the executors."""
    slices = assign_slices([(t, t.segment.bytes) for t in tasks], spark.sparkContext.defaultParallelism * 4)

    def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for b in batches:
            for k in b.column(0).to_pylist():
                for task in slices[k]:
                    out = scan_file(root, topic, task)
                    for i in range(0, max(out.num_rows, 1), BATCH_ROWS):
                        yield out.slice(i, BATCH_ROWS)

    return spark.range(len(slices), numPartitions=len(slices)).mapInArrow(read, SCAN_DDL)


BATCH_ROWS = 128 * 1024


def assign_slices(items: Sequence[tuple[object, int]], max_slices: int) -> list[list]:
    """Deal ``(item, weight)`` pairs into at most ``max_slices`` lists of similar total weight (heaviest first).

    ``spark.range(n, numPartitions=n)`` gives one Spark task per list.
    """
    n = max(1, min(len(items), max_slices))
    slices: list[list] = [[] for _ in range(n)]
    load = [0] * n
    for item, weight in sorted(items, key=lambda x: -x[1]):
        k = load.index(min(load))
        slices[k].append(item)
        load[k] += weight
    return slices
