"""When each tombstone was first cleaned, recorded in the segment file that holds it.

Kafka keeps a tombstone (a record with a null value) for
``delete.retention.ms`` after the cleaning pass that first reached it (KIP-534:
the cleaner stamps the batch with a delete horizon), so a consumer reading
the log from the start has that long to see the delete.  lakelog stamps the
segment file instead: a Parquet footer key-value entry
``lakelog.tombstones`` = ``{"count": N, "runs": [[first, last, passMs], ...]}``
where ``count`` is the number of tombstones in the file and each run says
that the tombstones with offsets in ``[first, last]`` were first reached by
the pass at ``passMs`` (epoch ms).  A tombstone no run covers has not been
cleaned yet.  Files written by producers carry no entry (count unknown, no
stamps).

Both the compaction and the merge job write the entry (merging keeps the
stamps); a file is the only place the stamp lives, so it moves with the data
and cannot disagree with it.  Pure functions; thread-safe.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Iterable, Sequence

METADATA_KEY = b"lakelog.tombstones"


@dataclass(frozen=True)
class TombstoneStamps:
    """A segment file's tombstone count (None = unknown) and stamp runs ``(first, last, pass_ms)``."""

    count: int | None = None
    runs: tuple[tuple[int, int, int], ...] = ()

    def pass_times(self, offsets: Sequence[int]) -> list[int | None]:
        """For each offset (any order), the time of the pass that first cleaned its tombstone, or None."""
        import numpy as np

        covered, times = self.pass_times_array(np.asarray(offsets, dtype=np.int64))
        return [int(t) if c else None for c, t in zip(covered, times)]

    def pass_times_array(self, offsets: "np.ndarray") -> tuple["np.ndarray", "np.ndarray"]:
        """Vectorised :meth:`pass_times`: (covered mask, pass times -- meaningful where covered)."""
        import numpy as np

        if not self.runs or len(offsets) == 0:
            return np.zeros(len(offsets), dtype=bool), np.zeros(len(offsets), dtype=np.int64)
        firsts = np.array([r[0] for r in self.runs], dtype=np.int64)
        lasts = np.array([r[1] for r in self.runs], dtype=np.int64)
        times = np.array([r[2] for r in self.runs], dtype=np.int64)
        i = np.searchsorted(firsts, offsets, side="right") - 1
        j = np.maximum(i, 0)
        return (i >= 0) & (offsets <= lasts[j]), times[j]

    @property
    def may_have_tombstones(self) -> bool:
        return self.count is None or self.count > 0

    def to_metadata(self) -> dict[bytes, bytes]:
        return {METADATA_KEY: json.dumps({"count": self.count, "runs": [list(r) for r in self.runs]}).encode()}

    @classmethod
    def from_metadata(cls, metadata: dict | None) -> "TombstoneStamps":
        raw = (metadata or {}).get(METADATA_KEY)
        if raw is None:
            return cls()
        try:
            doc = json.loads(raw)
            runs = tuple(sorted((int(a), int(b), int(t)) for a, b, t in doc.get("runs") or ()))
            count = doc.get("count")
            return cls(None if count is None else int(count), runs)
        except (ValueError, TypeError):
            return cls()  # unreadable: treat as a producer's file (tombstones unknown, none stamped)


def runs_for(offsets: Iterable[int], pass_times: Iterable[int]) -> tuple[tuple[int, int, int], ...]:
    """Stamp runs for tombstones at ``offsets`` (ascending) first cleaned at ``pass_times``.

    Consecutive tombstones with the same pass time share one run; a run may
    span non-tombstone offsets, which is harmless (stamps apply to tombstones only).
    """
    runs: list[list[int]] = []
    for o, t in zip(offsets, pass_times):
        if runs and runs[-1][2] == t:
            runs[-1][1] = o
        else:
            runs.append([o, o, t])
    return tuple((a, b, t) for a, b, t in runs)


def expired(pass_ms: int | None, now_ms: int, delete_retention_ms: int) -> bool:
    """Whether a tombstone first cleaned at ``pass_ms`` may be dropped by a pass at ``now_ms``.

    Kafka drops a tombstone once its delete horizon (pass time + delete.retention.ms)
    is not in the future; an unstamped tombstone is never dropped (it gets stamped).
    """
    return pass_ms is not None and pass_ms + delete_retention_ms <= now_ms
