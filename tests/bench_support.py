"""Running a benchmark the way ``make bench`` does, in quick mode, into a scratch BENCHMARKS.md (its results
blocks) and a scratch report file (``--details``: every table and goal, which the smoke tests read).

The smoke tests of the benchmarks use it; each slow benchmark has its own test file, so the suite's workers
(one file at a time each) run them side by side instead of one after another.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def bench_process(tmp_path: Path, names: list[str], *, timeout: int,
                  scale: float | None = None) -> subprocess.CompletedProcess:
    """Run ``names`` with ``--quick`` (and ``--scale``) into ``tmp_path/BENCHMARKS.md`` and the whole reports into
    ``tmp_path/REPORTS.md``; fails unless it exits 0."""
    proc = subprocess.run(
        [sys.executable, "-m", "bench.run", *names, "--quick", *(("--scale", str(scale)) if scale else ()),
         "--output", str(tmp_path / "BENCHMARKS.md"), "--details", str(tmp_path / "REPORTS.md"),
         "--workdir", str(tmp_path)],
        cwd=REPO, capture_output=True, text=True, timeout=timeout, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def run_bench(tmp_path: Path, names: list[str], *, timeout: int, scale: float | None = None) -> str:
    """:func:`bench_process`; the whole reports it wrote (``tmp_path/REPORTS.md``)."""
    bench_process(tmp_path, names, timeout=timeout, scale=scale)
    return (tmp_path / "REPORTS.md").read_text()


def section(text: str, name: str) -> str:
    """The body of benchmark ``name``'s block of a BENCHMARKS.md or reports text (fails if it has none)."""
    found = re.search(rf"<!-- bench:{name} -->(.*?)<!-- /bench:{name} -->", text, re.S)
    assert found, text
    return found.group(1)


def bench_section(tmp_path: Path, name: str, timeout: int) -> str:
    """Run one benchmark in quick mode into a scratch BENCHMARKS.md; its section's text."""
    return section(run_bench(tmp_path, [name], timeout=timeout), name)
