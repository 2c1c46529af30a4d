"""A topic table read by delta-rs in the form docs/python-api.md shows exits cleanly, every time.

``DeltaTable.to_pyarrow_table()`` or ``to_pyarrow_dataset()`` followed by interpreter exit often aborts
with deltalake 1.6 (a delta-rs teardown race); the documented form (the live files from ``file_uris()``,
read by PyArrow) must not.
"""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

from lakelog import Log

RUNS = 50

READER = """
import sys
import pyarrow as pa
import pyarrow.dataset as ds
from deltalake import DeltaTable

table = sys.argv[1]
dataset = ds.dataset(DeltaTable(table).file_uris(), format="parquet", partition_base_dir=table,
                     partitioning=ds.partitioning(pa.schema([("partition", pa.int32())]), flavor="hive"))
rows = dataset.to_table(columns=["partition", "offset", "key", "value"]).sort_by(
    [("partition", "ascending"), ("offset", "ascending")])
print(rows.num_rows, rows.column("value")[0].as_py().decode())
"""


def test_documented_delta_read_exits_cleanly_50_times(tmp_path):
    log = Log(str(tmp_path / "root"))
    log.create_topic("orders", 2)
    for p in range(2):
        log.append("orders", [{"key": f"k{i}", "value": f"p{p}-{i}"} for i in range(100)], partition=p)
        log.append("orders", [{"key": "late", "value": f"p{p}-late"}], partition=p)
    log.close()
    table = str(tmp_path / "root" / "topics" / "orders")

    def run(_):
        return subprocess.run([sys.executable, "-c", READER, table], capture_output=True, text=True, timeout=120)

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(run, range(RUNS)))
    failed = [(r.returncode, r.stderr[-500:]) for r in results if r.returncode != 0]
    assert not failed, f"{len(failed)} of {RUNS} runs failed: {failed[:3]}"
    assert {r.stdout.strip() for r in results} == {"202 p0-0"}
