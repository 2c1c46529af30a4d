"""Rewriting a group of adjacent segments into one: the executor side of compaction and merging.

:func:`rewrite_group` reads the group's segment files (pyarrow, on whichever
machine runs it), keeps the records the cleaner's rule selects (all of them
for a merge), carries the tombstone stamps over and stamps tombstones reached for the first
time, and writes one new segment whose base is the group's first base -- so
it covers exactly the offsets of the segments it replaces.  The result is the
new file's Delta add, as plain fields that travel back to the driver in a
Spark row.

A group that keeps no record writes nothing, except when it starts the
partition: then an empty segment keeps the partition's first base, so the log
start offset does not move (consumers positioned in the emptied range keep
reading instead of getting ``OFFSET_OUT_OF_RANGE``).

Nothing here is visible until the driver commits it; files of a job that
dies are orphans for vacuum.  Stateless; safe in any thread or process.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakelog.maintenance.tombstone_horizon import TombstoneStamps, runs_for
from lakelog.reader.segment_reader import read_segment
from lakelog.storage.record_schema import FILE_SCHEMA, PARTITION_COLUMN
from lakelog.storage.segment_index import Segment, segment_file_name
from lakelog.storage.storage_root import StorageRoot
from lakelog.writer.segment_writer import default_codec, stats_timestamp, write_file, write_segment
from lakelog.writer.typed_segments import unify_tables

#: The Spark schema of :func:`rewrite_group`'s result rows.
ADD_FIELDS_DDL = ("group_id int, path string, size long, modification_time long, stats string, "
                  "partition int, records long")
ADD_FIELDS_SCHEMA = pa.schema([("group_id", pa.int32()), ("path", pa.string()), ("size", pa.int64()),
                               ("modification_time", pa.int64()), ("stats", pa.string()),
                               ("partition", pa.int32()), ("records", pa.int64())])


@dataclass(frozen=True)
class RewriteGroup:
    """Adjacent segments of one partition to be rewritten as one (picklable, shipped to executors)."""

    group_id: int
    partition: int
    segments: tuple[Segment, ...]
    starts_partition: bool = False  # the group holds the partition's first segment

    @property
    def base_offset(self) -> int:
        return self.segments[0].base_offset


def read_stamped(root: StorageRoot, topic: str, seg: Segment) -> tuple[pa.Table, TombstoneStamps]:
    """Every record of ``seg`` (offset order, no schema metadata) and the file's tombstone stamps."""
    t = read_segment(root, topic, seg, typed=True)  # typed columns stay with their records
    return t.replace_schema_metadata(None), TombstoneStamps.from_metadata(t.schema.metadata)


def read_group(root: StorageRoot, topic: str, group: RewriteGroup,
               cache: dict[str, tuple[pa.Table, TombstoneStamps]] | None = None) -> tuple[pa.Table, TombstoneStamps]:
    """All records of the group's segments in offset order, and their tombstone stamps merged.

    ``cache``: segments already read (:func:`read_stamped`), by path.
    """
    tables, runs = [], []
    count: int | None = 0
    for seg in group.segments:
        t, stamps = (cache or {}).get(seg.path) or read_stamped(root, topic, seg)
        runs.extend(stamps.runs)
        count = None if count is None or stamps.count is None else count + stamps.count
        tables.append(t)
    table = pa.concat_tables(unify_tables(tables)) if tables else FILE_SCHEMA.empty_table()
    return table, TombstoneStamps(count, tuple(sorted(runs)))


def rewrite_group(root: StorageRoot, topic: str, group: RewriteGroup, *,
                  keep: np.ndarray | None = None,
                  pass_ms: int | None = None,
                  cache: dict[str, tuple[pa.Table, TombstoneStamps]] | None = None,
                  codec: str | None = None) -> dict | None:
    """Write the group's surviving records as one segment; return its add fields, or None if no file.

    ``keep``: the keep mask over the group's records in offset order (None keeps every record, as a merge does).
    ``pass_ms``: the cleaning pass's time, stamped on surviving tombstones not
    stamped yet (None for a merge, which stamps nothing new).
    ``cache``: segments already read, by path (see :func:`read_group`).
    ``codec``: the new segment's Parquet codec (the topic's ``compression.type``; None: the root's default).
    """
    table, stamps = read_group(root, topic, group, cache)
    if keep is not None:
        table = table.filter(pa.array(keep))
    tomb_offsets = table.column("offset").filter(pc.is_null(table.column("value"))).to_numpy()
    covered, times = stamps.pass_times_array(tomb_offsets)
    if pass_ms is not None:
        times, covered = np.where(covered, times, pass_ms), np.ones(len(tomb_offsets), dtype=bool)
    new_stamps = TombstoneStamps(len(tomb_offsets), runs_for(tomb_offsets[covered].tolist(), times[covered].tolist()))
    if table.num_rows == 0:
        if not group.starts_partition:
            return None
        return _fields(group, write_empty_segment(root, topic, group))
    table = table.replace_schema_metadata(new_stamps.to_metadata())
    add = write_segment(root, topic, group.partition, table, data_change=False, base_offset=group.base_offset,
                        codec=codec)
    return _fields(group, add, table.num_rows)


def write_empty_segment(root: StorageRoot, topic: str, group: RewriteGroup):
    """An empty segment at the group's base (its statistics keep the replaced segments' time range)."""
    from deltalake.transaction import AddAction

    rel = segment_file_name(group.partition, group.base_offset, uuid.uuid4().hex)
    empty = FILE_SCHEMA.empty_table().replace_schema_metadata(TombstoneStamps(0).to_metadata())
    size = write_file(root, root.path_for("topics", topic, rel), empty, compression=default_codec(root))
    with_ts = [s for s in group.segments if s.records > 0] or list(group.segments)
    lo = min(s.min_timestamp for s in with_ts)
    hi = max(s.max_timestamp for s in with_ts)
    stats = {"numRecords": 0, "minValues": {"timestamp": stats_timestamp(lo, ceil=False)},
             "maxValues": {"timestamp": stats_timestamp(hi, ceil=True)}, "nullCount": {}}
    return AddAction(path=rel, size=size,
                     partition_values={PARTITION_COLUMN: str(group.partition)},
                     modification_time=int(time.time() * 1000), data_change=False, stats=json.dumps(stats))


def _fields(group: RewriteGroup, add, records: int = 0) -> dict:
    return {"group_id": group.group_id, "path": add.path, "size": add.size,
            "modification_time": add.modification_time, "stats": add.stats, "partition": group.partition,
            "records": records}


def no_file_fields(group: RewriteGroup) -> dict:
    """The result row of a group that kept nothing and left no file (``path`` None)."""
    return {"group_id": group.group_id, "path": None, "size": 0, "modification_time": 0, "stats": None,
            "partition": group.partition, "records": 0}


def add_action(fields: dict):
    """The Delta add (``dataChange=false``) for a result row of :func:`rewrite_group`."""
    from deltalake.transaction import AddAction

    return AddAction(path=fields["path"], size=int(fields["size"]),
                     partition_values={PARTITION_COLUMN: str(fields["partition"])},
                     modification_time=int(fields["modification_time"]), data_change=False, stats=fields["stats"])
