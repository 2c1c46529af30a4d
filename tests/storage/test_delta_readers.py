"""A topic table read by delta-rs in the form docs/python-api.md shows exits cleanly, every time.

``DeltaTable.to_pyarrow_table()`` or ``to_pyarrow_dataset()`` followed by interpreter exit often aborts
with deltalake 1.6 (a delta-rs teardown race); the documented form (the live files from ``file_uris()``,
read by PyArrow) must not.  A plain Delta reader of a topic written by transactions sees exactly the
committed records: nothing of an aborted or an open transaction.
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


TXN_READER = """
import json
import os
import sys
import pyarrow as pa
import pyarrow.dataset as ds
from deltalake import DeltaTable

table = sys.argv[1]
out = {}
rows = DeltaTable(table).to_pyarrow_dataset().to_table(columns=["partition", "offset", "value"])
out["to_pyarrow_dataset"] = sorted([r["partition"], r["offset"], r["value"].decode()] for r in rows.to_pylist())
documented = ds.dataset(DeltaTable(table).file_uris(), format="parquet", partition_base_dir=table,
                        partitioning=ds.partitioning(pa.schema([("partition", pa.int32())]), flavor="hive"))
rows = documented.to_table(columns=["partition", "offset", "value"])
out["file_uris"] = sorted([r["partition"], r["offset"], r["value"].decode()] for r in rows.to_pylist())
sys.stdout.write(json.dumps(out))
sys.stdout.flush()
os._exit(0)  # skip the interpreter teardown that to_pyarrow_dataset() can abort (see the module docstring)
"""


def test_plain_delta_readers_see_only_committed_transactions(tmp_path):
    """After a committed, an aborted and a still-open transaction (and a plain append), delta-rs readers -- and
    even a reader of every Parquet file under the table, live or not -- see exactly the committed records."""
    import json

    import pyarrow.dataset as ds

    from lakelog.transaction.transaction_coordinator import TransactionCoordinator
    from lakelog.writer.records import PartitionBatch

    log = Log(str(tmp_path / "root"))
    log.create_topic("tx", 2)
    coord = TransactionCoordinator(log)

    def run_txn(tid: str, values: dict[int, list[str]], end: bool | None) -> None:
        ident = coord.init_producer_id(tid)
        pid, epoch = ident.producer_id, ident.producer_epoch
        coord.add_partitions(tid, pid, epoch, [("tx", p) for p in values])
        for p, vs in values.items():
            for seq, v in enumerate(vs):
                coord.stage_batch(tid, PartitionBatch(p, [{"key": "k", "value": v}], pid, epoch, seq), "tx")
        if end is not None:
            coord.end_txn(tid, pid, epoch, end)

    log.append("tx", [{"key": "k", "value": "plain-0"}], partition=0)
    run_txn("committer", {0: ["c0-0", "c0-1"], 1: ["c1-0"]}, True)
    run_txn("aborter", {0: ["a0-0"], 1: ["a1-0", "a1-1"]}, False)
    run_txn("opener", {0: ["o0-0"], 1: ["o1-0"]}, None)
    log.append("tx", [{"key": "k", "value": "plain-1"}], partition=1)
    log.close()
    want = [[0, 0, "plain-0"], [0, 1, "c0-0"], [0, 2, "c0-1"], [1, 0, "c1-0"], [1, 1, "plain-1"]]
    assert [[p, r["offset"], r["value"].decode()] for p in range(2) for r in log.read("tx", p).to_pylist()] == want

    table = str(tmp_path / "root" / "topics" / "tx")
    r = subprocess.run([sys.executable, "-c", TXN_READER, table], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout) == {"to_pyarrow_dataset": want, "file_uris": want}
    # no file under the table, referenced or not, holds a record of the aborted or the open transaction
    every_file = ds.dataset(table, format="parquet", exclude_invalid_files=True,
                            ignore_prefixes=["_delta_log", "_lakelog", "."])
    values = sorted(v.decode() for v in every_file.to_table(columns=["value"]).column("value").to_pylist())
    assert values == sorted(v for _, _, v in want)
