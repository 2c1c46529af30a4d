"""Single-request S3 object calls through a cached obstore client, for the paths where round trips count.

pyarrow's S3 filesystem turns a small read into a HEAD and a GET, and a written file into a multipart upload
(two POSTs and a part PUT) and a HEAD for its size; at object-store latency each is tens of milliseconds
in series. These calls are one request each: :func:`get_object` one GET (a missing key is ``None``),
:func:`object_exists` one HEAD, :func:`put_object` one PUT, and :func:`create_object` one conditional PUT
(``If-None-Match: *``; :func:`lakelog.storage.delta_commit.put_if_absent` commits with it). A failure is an
``OSError``, as a filesystem's would be. Thread-safe (obstore stores are).

The client is obstore's (Python bindings of Rust's ``object_store``, the crate delta-rs reads and writes
with), not boto3's: a PUT costs this process less CPU than boto3's, and its signing, sending and waiting
happen outside the GIL, which a front's event loop and its other uploads share (BENCHMARKS.md,
"Several fronts on one S3 root", measures the fronts' CPU). Like delta-rs's,
it sends no checksum of the body (TLS protects it in transit to S3) and no ``Expect: 100-continue``, which
would cost each PUT a round trip before its body.

Paths are the root's filesystem paths (:meth:`StorageRoot.path_for`): ``<bucket>/<key>``.
"""

from __future__ import annotations

import functools
import os
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from datetime import timedelta
from typing import Callable, TypeVar

import pyarrow as pa

from lakelog.storage.storage_root import InvalidStorageRoot, StorageRoot, duration_seconds

T = TypeVar("T")

# The root's options an obstore S3 store takes, by the names obstore gives them (lakelog's options are delta-rs's
# object_store keys, normalised by StorageRoot.resolve)
_STORE_OPTIONS = {"aws_endpoint_url": "endpoint", "aws_region": "region", "aws_access_key_id": "access_key_id",
                  "aws_secret_access_key": "secret_access_key", "aws_session_token": "session_token",
                  "aws_virtual_hosted_style_request": "virtual_hosted_style_request"}


def split_path(path: str) -> tuple[str, str]:
    """``<bucket>/<key>`` -> ``(bucket, key)``."""
    bucket, _, key = path.partition("/")
    return bucket, key


def get_object(root: StorageRoot, path: str) -> bytes | None:
    """The object's bytes in one GET, or None if there is no such key."""
    import obstore

    bucket, key = split_path(path)
    store = _store(bucket, root.options)
    return _unless_missing("GET", key, lambda: obstore.get(store, key).bytes().to_bytes())


def object_exists(root: StorageRoot, path: str) -> bool:
    """Whether the key exists, in one HEAD (pyarrow's probe of a missing key adds a LIST, to look for a
    "directory" of that name: a request priced as a PUT)."""
    import obstore

    bucket, key = split_path(path)
    store = _store(bucket, root.options)
    return _unless_missing("HEAD", key, lambda: obstore.head(store, key)) is not None


def _unless_missing(request: str, key: str, call: Callable[[], T]) -> T | None:
    """``call()``, one request about ``key``; None if the key does not exist, an ``OSError`` for any other
    failure."""
    from obstore.exceptions import BaseError, NotFoundError

    try:
        return call()
    except (FileNotFoundError, NotFoundError):
        return None
    except (BaseError, OSError) as e:
        raise _failure(request, key, e) from e


def _failure(request: str, key: str, e: Exception) -> OSError:
    """An ``OSError`` naming the request and the error's kind -- a ``TimeoutError`` when the request ran out
    of time -- but not the error's text, which holds the store's URL and response."""
    # obstore says so only in its error's debug text ("kind: Timeout", "source: TimedOut"), which also holds
    # the key: matched on those words, not on any "timeout" a key might contain
    text = str(e).lower()
    if isinstance(e, TimeoutError) or "kind: timeout" in text or "timedout" in text:
        return TimeoutError(f"the {request} of {key} timed out")
    return OSError(f"the {request} of {key} failed: {type(e).__name__}")


def put_object(root: StorageRoot, path: str, data: bytes | pa.Buffer) -> None:
    """Write the object in one PUT (overwriting). An Arrow buffer is sent without a copy."""
    _put(root, path, data, "overwrite")


def create_object(root: StorageRoot, path: str, data: bytes | pa.Buffer) -> None:
    """Write the object in one PUT unless the key exists (``If-None-Match: *``): then ``FileExistsError``,
    and nothing was written. Any other failure is an ``OSError`` whose outcome is unknown: the PUT may have
    landed, and a retry of it by the client that found the key its own PUT had created is a
    ``FileExistsError`` too (the caller tells the two apart by the content).

    With the root's ``commit_put_copies`` at 2 or 3 the PUT goes out that many times at once, and the first
    answer that created the key wins: S3's latency tail is per request, so the slower copies' wait is not paid
    (their answer is ``412 Precondition Failed``, since a twin created the key). Only when no copy created it
    is there a failure: an ``OSError`` (unknown outcome) if any copy's outcome is unknown, else
    ``FileExistsError``. Each such call holds a thread per copy of a shared pool of :data:`COPY_THREADS` while
    the copies are in flight; callers beyond that wait for a thread."""
    copies = commit_put_copies(root)
    if copies == 1:
        return _put(root, path, data, "create")
    # refused here in a forked process: there the pool has no threads, though its count of idle ones says it has
    _store(split_path(path)[0], root.options)
    pending = {_copies().submit(_put, root, path, data, "create") for _ in range(copies)}
    failure: BaseException | None = None
    while pending:
        done, pending = wait(pending, return_when=FIRST_COMPLETED)
        for f in done:
            if (e := f.exception()) is None:
                return None
            if failure is None or isinstance(failure, FileExistsError):  # an unknown outcome outranks a conflict
                failure = e
    raise failure


COPY_THREADS = 32  # copies of conditional PUTs in flight at once (a thread each)


def commit_put_copies(root: StorageRoot) -> int:
    """How many copies of each conditional PUT the root sends at once: its ``commit_put_copies`` option, 1
    (the default), 2 or 3 (:meth:`StorageRoot.resolve` refuses any other value: ``COMMIT_PUT_COPIES``)."""
    return int(dict(root.options).get("commit_put_copies", "1"))


@functools.cache
def _copies() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=COPY_THREADS, thread_name_prefix="lakelog-put-copy")


def _put(root: StorageRoot, path: str, data: bytes | pa.Buffer, mode: str) -> None:
    import obstore
    from obstore.exceptions import AlreadyExistsError, BaseError, PreconditionError

    bucket, key = split_path(path)
    store = _store(bucket, root.options)  # its own OSError in a forked process, not one naming the PUT
    try:
        # obstore takes a one-dimensional buffer of unsigned bytes; an Arrow buffer's view is of signed ones
        body = memoryview(data).cast("B") if isinstance(data, pa.Buffer) else data
        obstore.put(store, key, body, mode=mode, use_multipart=False)
    except (AlreadyExistsError, PreconditionError, FileExistsError) as e:
        raise FileExistsError(f"{key} exists") from e
    except (BaseError, OSError) as e:
        raise _failure("PUT", key, e) from e


# The process whose obstore runtime the stores use (set at the first one's use)
_runtime_pid: int | None = None


def _store(bucket: str, options: tuple[tuple[str, str], ...]):
    """:func:`s3_store`, refused with an ``OSError`` in a process forked from one that had used it: obstore's
    runtime (tokio's) has no threads after a fork, and a request there would hang for ever, not fail (as
    delta-rs's runtime refuses to run in such a process, so does this one)."""
    global _runtime_pid
    pid = os.getpid()
    if _runtime_pid is None:
        _runtime_pid = pid
    elif _runtime_pid != pid:
        raise OSError("the S3 client cannot run in a process forked after it started (start processes with "
                      "multiprocessing's 'spawn' or 'forkserver' method)")
    return s3_store(bucket, options)


@functools.lru_cache(maxsize=16)
def s3_store(bucket: str, options: tuple[tuple[str, str], ...]):
    """An obstore S3 store of ``bucket`` for a root's storage options, cached (a store keeps its connections)
    and bounded in time: the root's ``connect_timeout``/``timeout`` (default 5 s / 30 s) and ``max_retries``
    (default 3; obstore retries a request on a 5xx, a connection error or, for a GET or HEAD, a timeout).
    Endpoint and credentials not in the options come from the ``AWS_*`` environment, as for delta-rs. An
    option obstore cannot parse is an :class:`InvalidStorageRoot` (a ``ValueError``) naming none of the values."""
    from obstore.exceptions import BaseError
    from obstore.store import S3Store

    opts = dict(options)
    config = {name: opts[key] for key, name in _STORE_OPTIONS.items() if opts.get(key)}
    client = {"connect_timeout": timedelta(seconds=duration_seconds(opts.get("connect_timeout", "5s"))),
              "timeout": timedelta(seconds=duration_seconds(opts.get("timeout", "30s"))),
              "allow_http": opts.get("aws_allow_http", "false").lower() == "true"}
    try:
        return S3Store(bucket, config=config, client_options=client,
                       retry_config={"max_retries": int(opts.get("max_retries", "3"))})
    except BaseError as e:
        raise InvalidStorageRoot(f"the storage root's S3 options are not valid: {type(e).__name__}") from e
