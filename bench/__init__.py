"""lakelog's benchmarks: ``python -m bench.run [names...] [--quick]`` (``make bench``).

A benchmark is a module ``bench/<name>.py`` defining ``TITLE`` (a heading) and
``run(ctx: BenchContext) -> BenchResult``.  :mod:`bench.run` discovers every such
module (no registry to edit), runs the selected ones, prints their summaries and
rewrites each one's own section of ``BENCHMARKS.md``, delimited by
``<!-- bench:<name> -->`` ... ``<!-- /bench:<name> -->``; text outside the
markers (hand-written findings) is kept.

Benchmarks measure throughput and latency; tests never do.  Every number is a
median (or a percentile) over several repetitions because the machines this
runs on are small and shared.
"""

from __future__ import annotations

import datetime
import os
import platform
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence


@dataclass
class BenchContext:
    """What a benchmark gets: a scratch directory on local disk, the mode, a progress printer.

    ``quick`` asks for a smoke run (tiny sizes, one repetition) that only proves
    the code path works; ``scale`` further shrinks sizes (tests use it).
    """

    workdir: Path
    quick: bool = False
    repeats: int = 3
    scale: float = 1.0
    progress: Callable[[str], None] = print

    def size(self, full: int, quick: int) -> int:
        """``full`` normally, ``quick`` in quick mode; both multiplied by ``scale`` (at least 1)."""
        return max(1, int((quick if self.quick else full) * self.scale))


@dataclass
class Goal:
    """A target from the issue and whether this run met it."""

    name: str
    met: bool
    detail: str


@dataclass
class BenchResult:
    """A benchmark's output: the markdown body of its section, printable lines, raw metrics, goals."""

    markdown: str
    summary: list[str] = field(default_factory=list)
    metrics: dict[str, float] = field(default_factory=dict)
    goals: list[Goal] = field(default_factory=list)


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100), nearest rank."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, int(round(q / 100.0 * len(ordered) + 0.5)) - 1))
    return ordered[rank]


def fill_partitions(log, topic: str, partitions: int, per_partition: int, batch: int, make) -> None:
    """Append ``per_partition`` records to each of ``partitions``, one commit per ``batch`` records;
    ``make(n, seed)`` builds each batch, with a seed that differs per batch."""
    seed = 0
    for p in range(partitions):
        left = per_partition
        while left > 0:
            n = min(batch, left)
            log.append(topic, make(n, seed), partition=p)
            seed += 1
            left -= n


def md_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A GitHub markdown table."""
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def goals_markdown(goals: Sequence[Goal]) -> str:
    return "\n".join(f"- {'MET' if g.met else 'NOT MET'}: {g.name} -- {g.detail}" for g in goals)


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _ram_gib() -> str:
    try:
        with open("/proc/meminfo") as f:
            kib = int(f.readline().split()[1])
        return f"{kib / 2**20:.1f} GiB"
    except (OSError, ValueError, IndexError):
        return "unknown"


def _load() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "unknown"


def _measuring_args(argv: Sequence[str]) -> list[str]:
    """The arguments that shape a run: where its results are written is left out."""
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg in ("--output", "--details"):
            skip = True
        elif not arg.startswith(("--output=", "--details=")):
            out.append(arg)
    return out


def environment() -> dict[str, str]:
    """Machine and versions, recorded with every result."""
    import deltalake
    import pyarrow

    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "cpus": str(os.cpu_count()),
        "cpu": _cpu_model(),
        "ram": _ram_gib(),
        "load": _load(),
        "python": platform.python_version(),
        "deltalake": deltalake.__version__,
        "pyarrow": pyarrow.__version__,
        "platform": platform.platform(),
        "command": " ".join(["python -m bench.run", *_measuring_args(sys.argv[1:])]),
    }


def environment_markdown(env: dict[str, str], load_after: str | None = None) -> str:
    load = f"load average {env['load']} at start" + (f", {load_after} at end" if load_after else "")
    return (f"_{env['date']} · `{env['command']}` · {env['cpus']} CPUs ({env['cpu']}), {env['ram']} RAM, "
            f"{load} · Python {env['python']}, deltalake {env['deltalake']}, pyarrow {env['pyarrow']}_")
