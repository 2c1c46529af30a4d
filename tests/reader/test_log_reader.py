"""Reading the log (lakelog/reader): records, fetches by offset, offsets by time and the log start, on a local
root and on moto S3; and a plain Delta reader sees the same records."""

from __future__ import annotations

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from lakelog.errors import OffsetOutOfRange


def test_independent_reader_agrees(log, root):
    """Reading the table with deltalake directly (not lakelog) gives exactly lakelog's records."""
    log.create_topic("t", 3)
    for i in range(5):
        log.append("t", [{"key": f"k{j}", "value": f"v{i}-{j}"} for j in range(20)])
    dt = DeltaTable(root.uri_for("topics", "t"), storage_options=root.storage_options)
    direct = pa.table(dt.to_pyarrow_table()).select(["partition", "offset", "key", "value"]).to_pylist()
    ours = []
    for p in range(3):
        for r in log.read("t", p).select(["offset", "key", "value"]).to_pylist():
            ours.append({"partition": p, **r})
    key = lambda r: (r["partition"], r["offset"])
    assert sorted(direct, key=key) == sorted(ours, key=key)
    assert len(ours) == 100


def test_offsets_and_timestamps(log):
    log.create_topic("t", 1)
    log.append("t", [{"value": f"v{i}", "timestamp": 1000 + i * 10} for i in range(5)], partition=0)
    log.append("t", [{"value": f"w{i}", "timestamp": 900 + i} for i in range(3)], partition=0)  # not monotonic
    log.append("t", [{"value": "z", "timestamp": 5000}], partition=0)
    assert log.list_offsets("t", "earliest") == {0: 0}
    assert log.list_offsets("t", "latest") == {0: 9}
    assert log.list_offsets("t", 1015) == {0: 2}
    assert log.list_offsets("t", 900) == {0: 0}
    assert log.list_offsets("t", 1041) == {0: 8}
    assert log.offsets_for_times("t", {0: 6000}) == {0: None}
    with pytest.raises(OffsetOutOfRange):
        log.fetch("t", 0, 10)
    res = log.fetch("t", 0, 3, max_records=2)
    assert [r["offset"] for r in res.records.to_pylist()] == [3, 4] and res.high_watermark == 9


def test_delete_records_moves_log_start(log):
    log.create_topic("t", 1)
    for _ in range(3):
        log.append("t", [{"value": "x"}] * 4, partition=0)
    assert log.delete_records("t", 0, 6) == 6
    assert log.describe_topic("t").partitions[0].log_start_offset == 6
    with pytest.raises(OffsetOutOfRange):
        log.fetch("t", 0, 5)
    assert [r["offset"] for r in log.read("t", 0).to_pylist()] == [6, 7, 8, 9, 10, 11]
