"""Vacuum planning: which segment files may be physically deleted.

A file leaves a topic in two ways:

* **removed** -- a retention, compaction or merge commit wrote a Delta
  ``remove`` for it.  Readers holding an older snapshot may still be reading
  it, so it is deleted only ``file.delete.delay.ms`` after the remove's
  ``deletionTimestamp`` (Kafka's delay before a deleted segment's file goes,
  Delta's deleted-file retention);
* **orphan** -- no commit ever referenced it (a commit that failed or was
  killed after writing its files).  Its age is its file modification time,
  and it must be older than ``max(file.delete.delay.ms, orphan minimum age)``:
  a file of a commit still in flight is also unreferenced until that commit
  lands, so the minimum age must exceed the longest a writer takes between
  writing a file and committing it.

A file the current snapshot references is never deleted, whatever its age.
Pure functions; the vacuum job (:mod:`lakelog.maintenance.vacuum`) lists,
reads the Delta log and deletes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping

REMOVED = "removed"
ORPHAN = "orphan"


@dataclass(frozen=True)
class StoredFile:
    """A segment file found by listing: table-relative ``path``, ``size``, ``modification_time`` (epoch ms)."""

    path: str
    size: int
    modification_time: int


@dataclass(frozen=True)
class Deletion:
    """A file to delete and why (:data:`REMOVED` or :data:`ORPHAN`)."""

    file: StoredFile
    reason: str


@dataclass(frozen=True)
class VacuumPlan:
    """Deletions for one topic, plus what is held back for now."""

    topic: str
    version: int
    now_ms: int
    deletions: list[Deletion] = field(default_factory=list)
    waiting: int = 0  # unreferenced files not old enough yet
    live: int = 0  # listed files the snapshot references

    @property
    def bytes(self) -> int:
        return sum(d.file.size for d in self.deletions)


def plan_vacuum(files: Iterable[StoredFile], *, live: "set[str] | frozenset[str]", removed_at: Mapping[str, int],
                now_ms: int, delete_delay_ms: int, orphan_min_age_ms: int, topic: str = "",
                version: int = -1) -> VacuumPlan:
    """Deletions among listed ``files``.

    ``live``: paths the current snapshot references; ``removed_at``: path ->
    ``deletionTimestamp`` (ms) of the Delta remove that dropped it.
    """
    plan = VacuumPlan(topic, version, now_ms)
    waiting = live_count = 0
    orphan_age = max(delete_delay_ms, orphan_min_age_ms)
    for f in files:
        if f.path in live:
            live_count += 1
            continue
        ts = removed_at.get(f.path)
        if ts is not None:
            if now_ms - ts >= delete_delay_ms:
                plan.deletions.append(Deletion(f, REMOVED))
            else:
                waiting += 1
        elif now_ms - f.modification_time >= orphan_age:
            plan.deletions.append(Deletion(f, ORPHAN))
        else:
            waiting += 1
    plan.deletions.sort(key=lambda d: d.file.path)
    return VacuumPlan(topic, version, now_ms, plan.deletions, waiting, live_count)
