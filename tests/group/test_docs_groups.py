"""docs/consumer-groups.md and docs/delivery-semantics.md stay true: their Python blocks run, as written,
against a real front (only the URL differs), and print what their comments promise."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

DOCS = Path(__file__).resolve().parents[2] / "docs"


def run_blocks(name: str, url: str, namespace: dict) -> str:
    blocks = re.findall(r"^```python\n(.*?)^```", (DOCS / name).read_text(), flags=re.S | re.M)
    assert blocks, f"docs/{name} lost its examples"
    out = io.StringIO()
    for i, code in enumerate(blocks, 1):
        with contextlib.redirect_stdout(out):
            try:
                exec(compile(code.replace("http://127.0.0.1:8080", url), f"docs/{name} block {i}", "exec"), namespace)
            except Exception as e:
                raise AssertionError(f"block {i} of docs/{name} failed: {e!r}\n{code}\n{out.getvalue()}") from e
    return out.getvalue()


def test_consumer_groups_doc_examples_run(start_group_front, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    front = start_group_front()
    printed = run_blocks("consumer-groups.md", front.url, {"__name__": "__docs__"})
    assert "range {'c0': ['t0p0', 't0p1', 't1p0', 't1p1'], 'c1': ['t0p2', 't1p2']}" in printed  # seed 001
    assert "roundrobin {'c0': ['t0p0', 't0p2', 't1p1'], 'c1': ['t0p1', 't1p0', 't1p2']}" in printed
    assert "assigned [0, 1, 2, 3]" in printed
    committed = re.search(r"8 records; committed: (\{.*\})", printed)
    assert committed, printed
    offsets = eval(committed.group(1))  # noqa: S307 -- our own printed dict of ints
    assert sum(offsets.values()) == 8  # every record's position is committed


def test_delivery_semantics_doc_examples_run(start_group_front, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    front = start_group_front()
    namespace: dict = {"__name__": "__docs__"}
    printed = run_blocks("delivery-semantics.md", front.url, namespace)
    processed = int(re.search(r"at-most-once: processed (\d+) records", printed).group(1))
    assert 1 <= processed <= 6
    assert "at-least-once: committed {0: 3, 1: 3}" in printed
    assert "a replayed batch writes 0 records" in printed and "sink rows: 6" in printed
    from deltalake import DeltaTable

    sink = DeltaTable(str(tmp_path / "payments-ledger"))
    rows = sink.to_pyarrow_table()
    assert sorted(zip(rows["partition"].to_pylist(), rows["offset"].to_pylist())) == \
        [(p, o) for p in (0, 1) for o in range(3)]  # each record exactly once
    assert [sink.transaction_version(f"lakelog:ledger:payments:{p}") for p in (0, 1)] == [3, 3]
    # a new member of the group starts where the sink stopped, whatever the group committed: nothing is re-written
    write = namespace["write_exactly_once"]
    from lakelog.client import Consumer, TopicPartition

    with Consumer(front.url, group_id="ledger-replay", enable_auto_commit=False, auto_offset_reset="earliest") as c:
        c.assign([TopicPartition("payments", 0), TopicPartition("payments", 1)])
        replayed = {}
        while sum(t.num_rows for t in replayed.values()) < 6:
            for tp, t in c.poll_arrow(timeout_ms=1000).items():
                replayed[tp] = t
        assert write(replayed) == 0
    assert DeltaTable(str(tmp_path / "payments-ledger")).to_pyarrow_table().num_rows == 6
