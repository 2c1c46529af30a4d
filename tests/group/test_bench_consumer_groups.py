"""``bench/consumer_groups.py`` runs end to end in quick mode (tiny sizes), so the benchmark cannot rot.

Numbers are not asserted against goals here: performance is judged by ``make bench``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_quick_run_reports_rebalances_and_throughput(tmp_path):
    out = tmp_path / "BENCHMARKS.md"
    proc = subprocess.run([sys.executable, "-m", "bench.run", "consumer_groups", "--quick", "--scale", "0.2",
                           "--details", str(out), "--workdir", str(tmp_path)],
                          cwd=REPO, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # Milliseconds are printed with thousands separators (1,142 ms)
    assert re.search(r"range: join [\d,]+ ms, leave [\d,]+ ms, death [\d,]+ ms", proc.stdout), proc.stdout
    assert re.search(r"uniform: join [\d,]+ ms", proc.stdout), proc.stdout
    assert re.search(r"poll_arrow [\d,]+ records/s = [\d.]+x pyarrow scan", proc.stdout), proc.stdout
    body = re.search(r"<!-- bench:consumer_groups -->(.*?)<!-- /bench:consumer_groups -->", out.read_text(), re.S)
    assert body and "| range |" in body.group(1) and "Consumer.poll_arrow()" in body.group(1)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("lakelog-bench-")], "scratch dirs left behind"
