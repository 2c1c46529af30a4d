"""Reading (and, on local roots, writing) the Delta log directly: ``_delta_log/<20-digit version>.json``.

lakelog keeps its own derived state (the Arrow index, partition offsets,
producer state) keyed by a Delta version and advances it by replaying the
commits after that version.  A commit file either exists completely or not at
all (put-if-absent), so a probe that finds no file for ``v`` means the table's
latest version is ``v - 1`` -- unless the log was cleaned up behind a
checkpoint, which :func:`read_tail` detects and reports as
:class:`LogTailGone` so the caller rebuilds from a full snapshot.

:func:`encode_actions` builds a commit file's body; writing it is
:func:`lakelog.storage.delta_commit.put_if_absent` (exactly one writer wins a
version, readers see a whole file or none).
"""

from __future__ import annotations

import functools
import json
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Iterator

from lakelog.storage.s3_objects import get_object, object_exists
from lakelog.storage.storage_root import StorageRoot


TAIL_WINDOW = 16  # commit files read at once when catching up on an object store


class LogTailGone(Exception):
    """Commits after the requested version were cleaned up; rebuild from a snapshot."""


@dataclass
class Commit:
    """The actions of one Delta commit, grouped by kind."""

    version: int
    adds: list[dict] = field(default_factory=list)
    removes: list[dict] = field(default_factory=list)
    txns: dict[str, int] = field(default_factory=dict)
    configuration: dict[str, str] | None = None  # set when the commit changed metaData
    metadata: dict | None = None  # that metaData action, whole
    commit_info: dict = field(default_factory=dict)
    protocol: dict | None = None  # set when the commit changed the protocol


def commit_path(table_path: str, version: int) -> str:
    return f"{table_path}/_delta_log/{version:020d}.json"


def parse_commit(version: int, text: str) -> Commit:
    """A commit file's actions, one JSON object per ``\n``-separated line. Not ``str.splitlines()``: a JSON
    string may hold U+0085, U+2028 or U+2029 unescaped (delta-rs writes them so), which it would split on."""
    commit = Commit(version)
    for line in text.split("\n"):
        if not line.strip():
            continue
        action = json.loads(line)
        if "add" in action:
            commit.adds.append(action["add"])
        elif "remove" in action:
            commit.removes.append(action["remove"])
        elif "txn" in action:
            commit.txns[action["txn"]["appId"]] = int(action["txn"]["version"])
        elif "metaData" in action:
            commit.metadata = action["metaData"]
            commit.configuration = dict(action["metaData"].get("configuration") or {})
        elif "commitInfo" in action:
            commit.commit_info = action["commitInfo"]
        elif "protocol" in action:
            commit.protocol = action["protocol"]
    return commit


#: delta-rs's error for a log listing with a hole in it ("Expected contiguous commit files, but found gap").
LISTING_GAP = "found gap"


def retry_listing_gaps(call, *, attempts: int = 6, delay_s: float = 0.01):
    """``call()``, again if delta-rs reported a gap in the log's listing.

    A directory or object listing taken while commit files are being created can miss an earlier file and
    see a later one (ext4 hashes directory order; S3 lists are not snapshots): the gap is the listing's,
    not the log's, so it is retried, with a growing pause, instead of reported.
    """
    for attempt in range(attempts):
        try:
            return call()
        except Exception as e:
            if LISTING_GAP not in str(e) or attempt == attempts - 1:
                raise
            time.sleep(delay_s * 2**attempt)


def encode_actions(actions: list[dict]) -> bytes:
    """A commit file's body: one JSON action per line."""
    return "".join(json.dumps(a, separators=(",", ":")) + "\n" for a in actions).encode("utf-8")


def file_exists(root: StorageRoot, path: str) -> bool:
    """Whether a file exists: one HEAD on S3 (pyarrow's probe adds a LIST when it does not)."""
    if not root.is_local:
        return object_exists(root, path)
    from pyarrow.fs import FileType

    return root.filesystem.get_file_info(path).type == FileType.File


def read_object(root: StorageRoot, path: str) -> bytes | None:
    """A small file's bytes, or None if it does not exist: one GET on S3 (not pyarrow's HEAD + GET)."""
    if not root.is_local:
        return get_object(root, path)
    try:
        with root.filesystem.open_input_stream(path) as f:
            return f.read()
    except FileNotFoundError:
        return None


def read_commit(root: StorageRoot, table_path: str, version: int) -> Commit | None:
    """The commit at ``version``, or None if there is no such file."""
    data = read_object(root, commit_path(table_path, version))
    return None if data is None else parse_commit(version, data.decode("utf-8"))


def checkpoint_names(version: int, parts: int | None) -> list[str]:
    """The file names of the checkpoint of ``version`` (one file, or ``parts`` of a multi-part one)."""
    if not parts:
        return [f"{version:020d}.checkpoint.parquet"]
    return [f"{version:020d}.checkpoint.{i:010d}.{int(parts):010d}.parquet" for i in range(1, int(parts) + 1)]


def last_checkpoint_version(root: StorageRoot, table_path: str) -> int:
    """Version of ``_delta_log/_last_checkpoint``, or -1 if there is none."""
    data = read_object(root, f"{table_path}/_delta_log/_last_checkpoint")
    try:
        return -1 if data is None else int(json.loads(data.decode("utf-8"))["version"])
    except (KeyError, ValueError):
        return -1


def txns_at(root: StorageRoot, table_path: str, version: int) -> dict[str, int]:
    """Every ``txn`` app id's version at ``version``: the last checkpoint's ``txn`` actions, then the commits after
    it.  (delta-rs answers only for an app id one names: a rebuilt snapshot would lose the ones it cannot name,
    such as the markers of committed transactions.)  Raises :class:`LogTailGone` if a needed commit is gone."""
    import pyarrow.parquet as pq

    txns: dict[str, int] = {}
    data = read_object(root, f"{table_path}/_delta_log/_last_checkpoint")
    checkpoint = -1
    if data is not None:
        info = json.loads(data.decode("utf-8"))
        checkpoint = int(info["version"])
        for name in checkpoint_names(checkpoint, info.get("parts")):
            table = pq.read_table(f"{table_path}/_delta_log/{name}", columns=["txn"], filesystem=root.filesystem)
            for txn in table.column("txn").to_pylist():
                if txn is not None:
                    txns[txn["appId"]] = int(txn["version"])
    if checkpoint < version:
        for commit in read_tail(root, table_path, checkpoint, version):
            txns.update(commit.txns)
    return txns


def read_tail(root: StorageRoot, table_path: str, after_version: int,
              until_version: int | None = None) -> Iterator[Commit]:
    """Commits ``after_version + 1`` ... latest (or ``until_version``), in order.

    On an object store the commits are read in parallel windows that double while every commit in them is
    there (1, 2, 4, ... up to :data:`TAIL_WINDOW`): a probe that finds nothing new costs one GET, and a
    reader catching up on many commits waits about one round trip per window, not one per commit.
    Raises :class:`LogTailGone` if a needed commit file no longer exists.
    """
    v = after_version + 1
    window = 1
    while until_version is None or v <= until_version:
        last = v + window - 1 if until_version is None else min(v + window - 1, until_version)
        if root.is_local or last == v:
            found = [read_commit(root, table_path, v)]
        else:
            found = list(_tail_readers().map(lambda n: read_commit(root, table_path, n), range(v, last + 1)))
        for commit in found:
            if commit is None:
                _check_end(root, table_path, v, until_version)
                return
            yield commit
            v += 1
        window = min(window * 2, TAIL_WINDOW)


def _check_end(root: StorageRoot, table_path: str, v: int, until_version: int | None) -> None:
    """Commit ``v`` is missing: the end of the log, unless it was wanted or cleaned up behind a checkpoint."""
    if until_version is not None:
        raise LogTailGone(f"commit {v} of {table_path} is missing")
    checkpoint = last_checkpoint_version(root, table_path)
    if v <= checkpoint:
        raise LogTailGone(f"commit {v} of {table_path} was cleaned up (checkpoint {checkpoint})")


@functools.cache
def _tail_readers() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=TAIL_WINDOW, thread_name_prefix="lakelog-log-read")
