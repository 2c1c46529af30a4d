"""Writing a raw Delta commit with put-if-absent: the primitive every lakelog commit relies on.

The write is a put-if-absent of ``_delta_log/<version>.json`` (``If-None-Match: *`` on S3, an exclusive
rename or hard link locally), exactly what Delta's protocol requires of a store; a lost race raises
:class:`CommitConflict` and the caller re-reads and retries. Appends use it directly on every root
(:mod:`lakelog.writer.committer`), and every root's admin commits -- topic configs, partition counts,
delete-records -- are written this way (:meth:`lakelog.log.Log.alter_topic`): delta-rs 1.6's
``alter.set_table_properties`` hangs against some S3 endpoints, and its commits list the log, which under
concurrent appends can show a false gap.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import os
import uuid

from lakelog.storage.delta_log import read_commit, retry_listing_gaps
from lakelog.storage.s3_objects import create_object
from lakelog.storage.storage_root import StorageRoot


class CommitConflict(Exception):
    """Another commit already took this version."""


def put_if_absent(root: StorageRoot, rel_path: str, data: bytes, *, fsync: bool = True) -> None:
    """Create ``rel_path`` under the root with ``data`` unless it exists (then :class:`CommitConflict`).

    Locally the data goes to a temporary file (its directory created if missing) moved to its final
    name without replacing (``renameat2(RENAME_NOREPLACE)``, else a hard link and an unlink), so
    readers see a whole file or none.  ``fsync=False`` leaves durability to the
    page cache, as delta-rs's local store does (the append hot path uses it). On S3 it is one conditional
    PUT (:func:`lakelog.storage.s3_objects.create_object`); a failure other than the conflict is an
    ``OSError`` after which the object may or may not exist.
    """
    if root.is_local:
        final = root.path_for(rel_path)
        tmp = f"{os.path.dirname(final)}/.{uuid.uuid4().hex}.tmp"
        try:
            f = open(tmp, "wb")
        except FileNotFoundError:  # the first file of its directory: create the directory, not every time
            os.makedirs(os.path.dirname(final), exist_ok=True)
            f = open(tmp, "wb")
        try:
            with f:
                f.write(data)
                if fsync:
                    f.flush()
                    os.fsync(f.fileno())
        except OSError:  # e.g. ENOSPC while writing: no temporary file stays behind either
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise
        try:
            if _rename_noreplace(tmp, final):
                return
            try:
                os.link(tmp, final)
            finally:
                os.unlink(tmp)
        except FileExistsError:
            raise CommitConflict(rel_path) from None
        except OSError:  # e.g. ENOSPC or EACCES: nothing was created, and no temporary file stays behind
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise
        return
    try:
        create_object(root, root.path_for(rel_path), data)
    except FileExistsError:
        raise CommitConflict(rel_path) from None


@functools.cache
def _renameat2():
    try:
        fn = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    return fn


_AT_FDCWD = -100
_RENAME_NOREPLACE = 1


def _rename_noreplace(src: str, dst: str) -> bool:
    """Move ``src`` to ``dst`` unless ``dst`` exists (FileExistsError, ``src`` removed); False if the platform
    or filesystem has no such rename (the caller falls back to link + unlink).

    One inode and no unlink per commit: on ext4 the link + unlink pair costs the append path kernel time
    (allocating inodes next to recently deleted ones); BENCHMARKS.md, "Append throughput", times a commit.
    """
    fn = _renameat2()
    if fn is None:
        return False
    if fn(_AT_FDCWD, os.fsencode(src), _AT_FDCWD, os.fsencode(dst), _RENAME_NOREPLACE) == 0:
        return True
    err = ctypes.get_errno()
    if err == errno.EEXIST:
        os.unlink(src)
        raise FileExistsError(err, os.strerror(err), dst)
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), dst)


def table_metadata(root: StorageRoot, topic: str) -> dict:
    """The topic table's ``metaData`` action as first committed: what a metadata change keeps (the table id,
    name, schema, partition columns, creation time) around a new ``configuration``.

    Read from commit 0, or from delta-rs when the log's start was cleaned up after a checkpoint.
    """
    first = read_commit(root, root.path_for("topics", topic), 0)
    if first is not None and first.metadata is not None:
        return dict(first.metadata)
    from deltalake import DeltaTable

    dt = retry_listing_gaps(lambda: DeltaTable(root.uri_for("topics", topic), storage_options=root.storage_options,
                                               without_files=True))
    md = dt.metadata()
    return {"id": md.id, "name": md.name, "description": md.description,
            "format": {"provider": "parquet", "options": {}}, "schemaString": dt.schema().to_json(),
            "partitionColumns": list(md.partition_columns), "configuration": dict(md.configuration),
            "createdTime": md.created_time}
