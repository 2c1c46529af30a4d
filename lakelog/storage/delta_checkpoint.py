"""Delta checkpoints of a topic on an object store, written by delta-rs from a local copy of the log segment.

delta-rs writes a checkpoint by replaying the log from the last checkpoint, and brings a table handle up to
date the same way: on S3 two GETs per commit since the last checkpoint, twice, all at once
(``tests/storage/test_delta_checkpoint.py`` counts them through ``bench/s3_proxy.py``). A writer already holds the bodies of the commits it
made. :func:`write_checkpoint` lays out the segment delta-rs needs in a local directory (the *mirror*):

    <mirror>/_delta_log/_last_checkpoint                   the store's, as read
    <mirror>/_delta_log/<start>.checkpoint.parquet         the store's last checkpoint (one GET per part)
    <mirror>/_delta_log/<start + 1 ... version>.json       the commits after it: the writer's own bodies,
                                                           one GET for each other writer's

has delta-rs write the checkpoint of ``version`` there, and uploads it: the checkpoint file, then
``_last_checkpoint`` (delta-rs's order: a reader that sees the pointer finds the file). The mirror keeps what
it wrote, so the next call downloads no checkpoint while the store's ``_last_checkpoint`` still names that one,
and reads no commit twice (a commit file never changes: put-if-absent). A topic deleted and recreated starts
its versions again: a mirror belongs to one writer of one incarnation of a topic.

Not thread-safe: one call at a time per mirror (a committer's single maintenance thread).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Mapping

from lakelog.storage.delta_log import LogTailGone, checkpoint_names, commit_path, read_object
from lakelog.storage.s3_objects import put_object
from lakelog.storage.storage_root import StorageRoot

_LOG_FILE = re.compile(r"^(\d{20})\.(json|checkpoint\.parquet|checkpoint\.\d{10}\.\d{10}\.parquet)$")


def write_checkpoint(root: StorageRoot, table_path: str, version: int, bodies: Mapping[int, bytes],
                     mirror: Path) -> int:
    """Write and upload the checkpoint of ``version`` (see the module's docstring); ``bodies``: commit files'
    bytes by version, as written. Returns how many commit files it had to GET; 0 with nothing written when
    the store already has a checkpoint at or after ``version``. Raises :class:`LogTailGone` when a commit it
    needs is gone, ``OSError`` when the store fails; the store is then unchanged or has a checkpoint file
    that no pointer names yet (as after delta-rs's own failures)."""
    from deltalake import DeltaTable

    log_dir = mirror / "_delta_log"
    log_dir.mkdir(parents=True, exist_ok=True)
    pointer = read_object(root, f"{table_path}/_delta_log/_last_checkpoint")
    start, names = -1, []
    if pointer is not None:
        info = json.loads(pointer.decode("utf-8"))
        start = int(info["version"])
        if start >= version:
            return 0
        names = checkpoint_names(start, info.get("parts"))
    for f in log_dir.iterdir():  # only the segment delta-rs is to read: no older checkpoint, no commit before it
        m = _LOG_FILE.match(f.name)
        keep = m is not None and (f.name in names or m.group(2) == "json" and start < int(m.group(1)) <= version)
        if f.is_dir():
            shutil.rmtree(f)
        elif not keep:
            f.unlink()
    for name in names:
        if not (log_dir / name).exists():
            data = read_object(root, f"{table_path}/_delta_log/{name}")
            if data is None:
                raise LogTailGone(f"checkpoint {name} of {table_path} is missing")
            (log_dir / name).write_bytes(data)
    if pointer is not None:
        (log_dir / "_last_checkpoint").write_bytes(pointer)
    fetched = 0
    for v in range(start + 1, version + 1):
        local = log_dir / f"{v:020d}.json"
        if local.exists():
            continue
        data = bodies.get(v)
        if data is None:
            data = read_object(root, commit_path(table_path, v))
            fetched += 1
            if data is None:
                raise LogTailGone(f"commit {v} of {table_path} is missing")
        local.write_bytes(data)
    table = DeltaTable(str(mirror))
    if table.version() != version:
        raise LogTailGone(f"the copy of {table_path}'s log reads as version {table.version()}, not {version}")
    table.create_checkpoint()
    for name in (*checkpoint_names(version, None), "_last_checkpoint"):
        put_object(root, f"{table_path}/_delta_log/{name}", (log_dir / name).read_bytes())
    return fetched
