"""Running lakelog writers as real child processes, and the log invariants the tests check.

The child is :mod:`proc_writer` (a script: ``python proc_writer.py '<json config>'``);
it reports every append result as one JSON line on stdout, flushed, so the
parent knows exactly what was acknowledged before it killed the child.

:func:`check_log` is the invariant every fencing, crash and fault test ends
with: per partition, offsets are exactly ``0..HW-1``; lakelog's reader and a
direct ``deltalake`` read of the table agree record for record; every
acknowledged batch sits exactly once at the offsets it was acknowledged with.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from lakelog.storage.storage_root import StorageRoot

WRITER_SCRIPT = str(Path(__file__).with_name("proc_writer.py"))


def value_of(writer: int, append: int, partition: int, record: int) -> bytes:
    """The unique value of one record a child writes (so every record is traceable to its batch)."""
    return f"w{writer}-a{append}-p{partition}-r{record}".encode()


@dataclass(frozen=True)
class Ack:
    """One acknowledged batch: where the log said it landed."""

    partition: int
    base_offset: int
    values: tuple[bytes, ...]
    duplicate: bool = False


def root_config(root: StorageRoot) -> dict:
    return {"uri": root.uri, "options": dict(root.options)}


def spawn_writer(config: dict) -> subprocess.Popen:
    """Start ``proc_writer.py`` with ``config``; stdout is a pipe of JSON lines."""
    return subprocess.Popen([sys.executable, WRITER_SCRIPT, json.dumps(config)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=str(Path(__file__).parent))


def wait_for(predicate, what: str, timeout: float = 20.0, interval: float = 0.02):
    """``predicate()``'s first truthy result, polled every ``interval`` s; an AssertionError naming ``what`` if
    there is none after ``timeout`` s. The one polling loop of the tests (front_process.wait_for takes it)."""
    deadline = time.monotonic() + timeout
    while True:
        got = predicate()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(interval)


def wait_for_file(path: Path, proc: subprocess.Popen, timeout: float = 120.0) -> None:
    """Wait until ``path`` exists; fail loudly if the child dies first or the wait times out."""
    deadline = time.monotonic() + timeout
    while not path.exists():
        if proc.poll() is not None:
            raise AssertionError(f"child exited with {proc.returncode} before {path.name}: {proc.stderr.read()}")
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"child did not reach {path.name} within {timeout}s")
        time.sleep(0.02)


def parse_report(lines: list[str], writer: int) -> tuple[list[Ack], list[dict], dict]:
    """(acks, errors, info) from a child's stdout lines; a torn last line (killed mid-write) is ignored.

    ``info`` merges the ``producer`` and ``done`` events (producer id, epoch, conflicts, ``event`` = "done"
    if the child finished).
    """
    acks, errors, header = [], [], {}
    for line in lines:
        try:
            ev = json.loads(line)
        except json.JSONDecodeError:
            continue
        if ev["event"] == "ack":
            values = tuple(value_of(writer, ev["i"], ev["p"], j) for j in range(ev["n"]))
            acks.append(Ack(ev["p"], ev["base"], values, ev.get("dup", False)))
        elif ev["event"] == "error":
            errors.append(ev)
        elif ev["event"] in ("producer", "done"):
            header.update(ev)
    return acks, errors, header


def read_direct(root: StorageRoot, topic: str) -> dict[int, list[tuple[int, bytes]]]:
    """(offset, value) per partition, read with deltalake directly (not through lakelog)."""
    from deltalake import DeltaTable

    dt = DeltaTable(root.uri_for("topics", topic), storage_options=root.storage_options)
    rows = pa.table(dt.to_pyarrow_table(columns=["partition", "offset", "value"])).to_pylist()
    out: dict[int, list[tuple[int, bytes]]] = {}
    for r in rows:
        out.setdefault(r["partition"], []).append((r["offset"], r["value"]))
    return {p: sorted(v) for p, v in out.items()}


def check_log(root: StorageRoot, topic: str, acks: list[Ack]) -> dict[int, list[tuple[int, bytes]]]:
    """Assert the log's invariants (see the module doc); returns the records per partition."""
    from lakelog import Log

    log = Log(root)
    snap = log.snapshot(topic)
    direct = read_direct(root, topic)
    records = {}
    for p in range(snap.partition_count):
        hw = snap.high_watermark(p)
        ours = [(r["offset"], r["value"]) for r in log.read(topic, p).select(["offset", "value"]).to_pylist()]
        assert [o for o, _ in ours] == list(range(hw)), f"partition {p}: offsets are not exactly 0..{hw - 1}"
        assert ours == direct.get(p, []), f"partition {p}: lakelog and a direct deltalake read disagree"
        dupes = [v for v, c in Counter(v for _, v in ours).items() if c > 1]
        assert not dupes, f"partition {p}: records written twice: {dupes[:5]}"
        records[p] = ours
    assert set(direct) <= set(range(snap.partition_count))
    for ack in acks:
        got = records[ack.partition][ack.base_offset:ack.base_offset + len(ack.values)]
        assert [v for _, v in got] == list(ack.values), f"acknowledged batch {ack} is not at its offsets"
    return records
