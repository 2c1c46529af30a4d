"""Orphan segment files: Parquet files under a topic's ``partition=P/`` that the Delta log never made live.

A commit writes its segment files first and then commits; if the commit fails
(a lost fencing race whose clean-up also failed, a process killed in between),
the files stay behind.  Readers never see them: they only follow the Delta log.
This module finds them for ``lakelog dump-log`` and the maintenance jobs, and removes a failed commit's
files at once (:func:`delete_quietly`).

An orphan is a file that is neither live in the table's latest version nor a
tombstone (a file removed by retention or compaction, awaiting vacuum after
``file.delete.delay.ms``).  The directory is listed *before* the table state
is loaded, so a file committed while we look is never reported; a file of a
commit still in flight is (it is unreferenced until that commit lands), which
is why :class:`OrphanFile` carries its modification time.

Stateless and thread-safe.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

from lakelog.storage.storage_root import StorageRoot
from lakelog.storage.topic_name import validate_topic_name

_SEGMENT_PATH = re.compile(r"^partition=(-?\d+)/[^/]+\.parquet$")


@dataclass(frozen=True)
class OrphanFile:
    """An unreferenced segment file: table-relative ``path``, ``size`` in bytes, ``modification_time`` epoch ms."""

    path: str
    partition: int
    size: int
    modification_time: int

    def to_dict(self) -> dict:
        return asdict(self)


def find_orphan_files(root: StorageRoot | str, topic: str, *, partition: int | None = None) -> list[OrphanFile]:
    """Orphan segment files of ``topic`` (optionally of one ``partition``), sorted by path.

    Raises ``UNKNOWN_TOPIC_OR_PARTITION`` if the topic does not exist.
    """
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError
    from pyarrow.fs import FileSelector, FileType

    import pyarrow as pa

    from lakelog.errors import UnknownTopicOrPartition

    root = StorageRoot.resolve(root)
    validate_topic_name(topic)
    table_path = root.path_for("topics", topic)
    listed = []
    for info in root.filesystem.get_file_info(FileSelector(table_path, recursive=True, allow_not_found=True)):
        if info.type != FileType.File:
            continue
        rel = info.path[len(table_path):].lstrip("/")
        m = _SEGMENT_PATH.match(rel)
        if m and (partition is None or int(m.group(1)) == partition):
            mtime = int(info.mtime.timestamp() * 1000) if info.mtime is not None else 0
            listed.append(OrphanFile(rel, int(m.group(1)), int(info.size or 0), mtime))
    try:
        dt = DeltaTable(root.uri_for("topics", topic), storage_options=root.storage_options)
    except TableNotFoundError:
        raise UnknownTopicOrPartition(f"topic {topic} does not exist under {root.uri}") from None
    live = set(pa.table(dt.get_add_actions(flatten=False)).column("path").to_pylist())
    # vacuum "lite" lists exactly the tombstoned files; dry_run never deletes
    tombstones = set(dt.vacuum(retention_hours=0, dry_run=True, enforce_retention_duration=False, full=False))
    return sorted((f for f in listed if f.path not in live and f.path not in tombstones), key=lambda f: f.path)


def delete_quietly(root: StorageRoot, topic: str, rel_paths: list[str]) -> None:
    """Best-effort removal of files that never became visible (a failed commit's segments)."""
    for rel in rel_paths:
        try:
            root.filesystem.delete_file(root.path_for("topics", topic, rel))
        except OSError:
            pass  # an orphan is harmless: never referenced, removed later by vacuum
