"""The suite's schedule over pytest-xdist's workers: longest files first, each file on one worker.

``make test`` runs ``--dist loadfile --no-loadscope-reorder``: the tests of a file go to one worker (so its
module-scoped fixtures start once) unless the file is in :data:`SPLIT`, whose tests are independent and slow
(each handed out alone: :func:`scope`, by the conftest's ``pytest_xdist_make_scheduler``); the units are handed
out in collection order, which :func:`order` makes longest first (what pytest-split does with a durations file), so that the last minutes do
not run one long file on one worker while the others idle. ``DURATIONS`` holds each file's seconds in a full
run; ``python tests/schedule.py JUNIT.xml`` rewrites it from a run's ``--junitxml``.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

DURATIONS = Path(__file__).with_name("durations.json")
SPLIT = {"tests/test_docs.py"}  # each doc's shell blocks run apart: a few minutes each
UNKNOWN_S = 10.0  # a file the table does not know yet (a new one): a typical file's seconds


def durations() -> dict[str, float]:
    """Each test file's seconds (path from the repository root) in the run the table was made from."""
    return json.loads(DURATIONS.read_text()) if DURATIONS.exists() else {}


def scope(nodeid: str) -> str:
    """The unit xdist hands a worker for test ``nodeid``: its file, or the test itself in a :data:`SPLIT`
    file."""
    path = nodeid.split("::", 1)[0]
    return nodeid if path in SPLIT else path


def order(paths: list[str], seconds: dict[str, float]) -> list[str]:
    """``paths`` (each once, in the order first seen) sorted longest first by ``seconds``; ties keep that
    order."""
    unique = list(dict.fromkeys(paths))
    return sorted(unique, key=lambda p: -seconds.get(p, UNKNOWN_S))


def from_junit(xml_path: Path) -> dict[str, float]:
    """Per-file seconds of a pytest ``--junitxml`` report (``classname`` is the module's dotted path, with a
    test class's name after it when there is one); paths as of the report's run."""
    import xml.etree.ElementTree as ET

    total: Counter[str] = Counter()
    for case in ET.parse(xml_path).iter("testcase"):
        parts = case.get("classname", "").split(".")
        module = next((i for i, part in enumerate(parts) if part.startswith("test_")), len(parts) - 1)
        total["/".join(parts[:module + 1]) + ".py"] += float(case.get("time", 0))  # past it: a test class
    return {path: round(s, 1) for path, s in sorted(total.items(), key=lambda kv: -kv[1])}


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python tests/schedule.py JUNIT.xml")
    DURATIONS.write_text(json.dumps(from_junit(Path(sys.argv[1])), indent=0) + "\n")
