"""Reading records out of segment files.

Row groups whose ``offset`` statistics lie wholly outside the requested range
are skipped without being read; within a row group the range is applied with a
filter.  Handles are opened per call, so this is safe from any thread and on
Spark executors.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lakelog.storage.record_schema import FILE_SCHEMA
from lakelog.storage.segment_index import Segment
from lakelog.storage.storage_root import StorageRoot


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
                 columns: list[str] | None = None) -> pa.Table:
    """Records of ``seg`` with start <= offset < end (either bound optional), in offset order."""
    path = root.path_for("topics", topic, seg.path)
    cols = columns or FILE_SCHEMA.names
    read_cols = cols if "offset" in cols else ["offset", *cols]
    with root.filesystem.open_input_file(path) as f:
        pf = pq.ParquetFile(f)
        if start is None and end is None:
            table = pf.read(columns=read_cols)
        else:
            lo = start if start is not None else -(2**63)
            hi = end if end is not None else 2**63 - 1
            groups = [rg for rg, mn, mx in row_group_ranges(pf) if mx >= lo and mn < hi]
            if not groups:
                return FILE_SCHEMA.empty_table().select(cols)
            table = pf.read_row_groups(groups, columns=read_cols)
            offsets = table.column("offset")
            first = pc.min(offsets).as_py()
            last = pc.max(offsets).as_py()
            if first is not None and (first < lo or last >= hi):
                mask = pc.and_(pc.greater_equal(offsets, lo), pc.less(offsets, hi))
                table = table.filter(mask)
    return table.select(cols)
