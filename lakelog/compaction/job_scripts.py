"""The maintenance jobs by name, and their ``spark-submit`` entry points in the top-level ``jobs`` package.

Light on purpose (no pyarrow): the command line's parsers import it.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

#: The jobs, in the order the scheduler runs them on a topic.
JOB_ORDER = ("retention", "compaction", "merge", "vacuum")
SCRIPTS = {"retention": "retention.py", "compaction": "compact.py", "merge": "merge_segments.py",
           "vacuum": "vacuum.py"}


def script_path(job: str) -> Path:
    """The job's entry point: located, not imported (the jobs layer sits above the library)."""
    return Path(importlib.util.find_spec("jobs").origin).resolve().parent / SCRIPTS[job]
