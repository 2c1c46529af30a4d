"""Reading records out of segment files.

Row groups whose ``offset`` statistics lie wholly outside the requested range
are skipped without being read; within a row group the range is applied with a
filter.  Handles are opened per call, so this is safe from any thread and on
Spark executors.

On an object store a segment that is small (up to :data:`SMALL_OBJECT_BYTES`),
or wanted whole and up to :data:`WHOLE_OBJECT_BYTES`, is fetched with one GET
(its size is in the log) and parsed in memory: pyarrow's S3 file would make it
a HEAD, a GET of the footer and a GET of the row groups, three round trips in
series. Other reads go by range, row group by row group.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lakelog.schema.typed_columns import TYPED_COLUMNS
from lakelog.storage.record_schema import FILE_SCHEMA
from lakelog.storage.s3_objects import get_object
from lakelog.storage.segment_index import Segment
from lakelog.storage.storage_root import StorageRoot

SMALL_OBJECT_BYTES = 1 << 20
WHOLE_OBJECT_BYTES = 64 << 20


def row_group_ranges(pf: pq.ParquetFile) -> list[tuple[int, int, int]]:
    """(row group, min offset, max offset) from the file's statistics."""
    col = pf.schema_arrow.get_field_index("offset")
    out = []
    md = pf.metadata
    for rg in range(md.num_row_groups):
        st = md.row_group(rg).column(col).statistics
        if st is None or not st.has_min_max:
            out.append((rg, -(2**63), 2**63 - 1))
        else:
            out.append((rg, st.min, st.max))
    return out


def read_segment(root: StorageRoot, topic: str, seg: Segment, *, start: int | None = None, end: int | None = None,
                 columns: list[str] | None = None, typed: bool = False) -> pa.Table:
    """Records of ``seg`` with start <= offset < end (either bound optional), in offset order: ``columns``, by
    default the record's (:data:`FILE_SCHEMA`), with ``typed`` also the typed columns the file has."""
    cols = columns or FILE_SCHEMA.names
    read_cols = cols if "offset" in cols else ["offset", *cols]
    wanted_whole = (start is None or start <= seg.base_offset) and (end is None or end > seg.last_offset)
    with open_segment(root, topic, seg.path, seg.bytes, whole_ok=wanted_whole) as f:
        pf = pq.ParquetFile(f)
        if typed:
            extra = [n for n in TYPED_COLUMNS if n in pf.schema_arrow.names and n not in cols]
            cols, read_cols = [*cols, *extra], [*read_cols, *extra]
        if start is None and end is None:
            table = pf.read(columns=read_cols)
        else:
            lo = start if start is not None else -(2**63)
            hi = end if end is not None else 2**63 - 1
            groups = [rg for rg, mn, mx in row_group_ranges(pf) if mx >= lo and mn < hi]
            if not groups:
                return (pf.schema_arrow if typed else FILE_SCHEMA).empty_table().select(cols)
            table = pf.read_row_groups(groups, columns=read_cols)
            offsets = table.column("offset")
            first = pc.min(offsets).as_py()
            last = pc.max(offsets).as_py()
            if first is not None and (first < lo or last >= hi):
                mask = pc.and_(pc.greater_equal(offsets, lo), pc.less(offsets, hi))
                table = table.filter(mask)
    return table.select(cols)


def get_segment(root: StorageRoot, topic: str, rel_path: str) -> bytes:
    """The whole segment file (table-relative ``rel_path``) of an object-store root in one GET;
    ``FileNotFoundError`` if it is gone (compacted or vacuumed away)."""
    path = root.path_for("topics", topic, rel_path)
    data = get_object(root, path)
    if data is None:
        raise FileNotFoundError(path)
    return data


def open_segment(root: StorageRoot, topic: str, rel_path: str, size: int, *, whole_ok: bool):
    """A readable file of the segment at ``rel_path`` (``size`` bytes as the log says; 0 if unknown): on an
    object store the whole object in one GET when it is small, or when ``whole_ok`` (the caller wants all
    of it) and it is up to :data:`WHOLE_OBJECT_BYTES`; else a file read by range. Raises
    ``FileNotFoundError`` if the segment is gone (compacted or vacuumed away)."""
    limit = WHOLE_OBJECT_BYTES if whole_ok else SMALL_OBJECT_BYTES
    if root.is_local or not 0 < size <= limit:
        return root.filesystem.open_input_file(root.path_for("topics", topic, rel_path))
    return pa.BufferReader(get_segment(root, topic, rel_path))
