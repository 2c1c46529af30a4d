"""``bench/http_produce.py`` runs end to end in quick mode (a real front, moto S3, the library ceiling),
so the benchmark cannot rot.  Its numbers are judged by ``make bench``, not here."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SYSTEMS = ["JSON produce", "v3 JSON produce", "JSON, HTTP ceiling", "JSON-sized batches, storage ceiling", "Arrow produce",
           "Arrow, HTTP ceiling", "Arrow-sized batches, storage ceiling", "JSON at half the max rate",
           "moto S3: JSON produce", "moto S3: Arrow produce"]


def test_http_produce_bench_quick(tmp_path):
    out = tmp_path / "BENCH.md"
    done = subprocess.run([sys.executable, "-m", "bench.run", "http_produce", "--quick", "--details", str(out),
                           "--workdir", str(tmp_path)], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    section = re.search(r"<!-- bench:http_produce -->(.*?)<!-- /bench:http_produce -->", out.read_text(), re.S)
    assert section is not None
    cells = [[c.strip() for c in line.strip().strip("|").split("|")] for line in section.group(1).splitlines()
             if line.startswith("| ") and not line.startswith("| system")]
    rows = {c[0]: c[1:] for c in cells}
    for system in SYSTEMS:
        row = next(v for k, v in rows.items() if k.startswith(system))
        assert float(row[0].replace(",", "")) > 0, (system, row)  # records/s
        assert int(row[-2]) > 0 and row[-1] == "0", (system, row)  # requests made, no errors
    assert "p99 <= 50 ms at half the max rate" in section.group(1)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("lakelog-bench-")], "scratch dirs left behind"
