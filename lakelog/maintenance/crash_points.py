"""Named points at which a maintenance job can be made to die, to prove it is crash-safe.

Setting ``LAKELOG_CRASH_AT=<point>[,<point>...]`` in a job's environment makes
:func:`reach` kill the process with SIGKILL (no clean-up, no ``finally``) when it
gets there -- the same as a machine failing at that instant.  Unset, as in
production, :func:`reach` does nothing.  The points are listed in :data:`POINTS`.
"""

from __future__ import annotations

import os
import signal

ENV = "LAKELOG_CRASH_AT"

POINTS = (
    "files-written",  # a rewrite's new segment files exist; nothing committed
    "committed",  # the commit landed; the Arrow index is not persisted yet
    "deleting",  # vacuum deleted some of its files, not all
)


def reach(point: str) -> None:
    """Die here if ``$LAKELOG_CRASH_AT`` names ``point``."""
    spec = os.environ.get(ENV)
    if spec and point in spec.split(","):
        os.kill(os.getpid(), signal.SIGKILL)
