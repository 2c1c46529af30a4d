"""Single-request S3 object calls through a cached boto3 client, for the paths where round trips count.

pyarrow's S3 filesystem turns a small read into a HEAD and a GET, and a written file into a multipart upload
(two POSTs and a part PUT) and a HEAD for its size; at object-store latency each is tens of milliseconds
in series. These calls are one request each: :func:`get_object` one GET (a missing key is ``None``),
:func:`object_exists` one HEAD, :func:`put_object` one PUT, and :func:`lakelog.storage.delta_commit.put_if_absent`
one conditional PUT. A failure is an ``OSError``, as a filesystem's would be. Thread-safe (boto3 clients are).

Paths are the root's filesystem paths (:meth:`StorageRoot.path_for`): ``<bucket>/<key>``.
"""

from __future__ import annotations

import functools
from typing import Callable, TypeVar

import pyarrow as pa

from lakelog.storage.storage_root import StorageRoot, _seconds

T = TypeVar("T")


def split_path(path: str) -> tuple[str, str]:
    """``<bucket>/<key>`` -> ``(bucket, key)``."""
    bucket, _, key = path.partition("/")
    return bucket, key


def get_object(root: StorageRoot, path: str) -> bytes | None:
    """The object's bytes in one GET, or None if there is no such key."""
    bucket, key = split_path(path)
    client = s3_client(root.options)
    return _unless_missing("GET", key, lambda: client.get_object(Bucket=bucket, Key=key)["Body"].read())


def object_exists(root: StorageRoot, path: str) -> bool:
    """Whether the key exists, in one HEAD (pyarrow's probe of a missing key adds a LIST, to look for a
    "directory" of that name: a request priced as a PUT)."""
    bucket, key = split_path(path)
    client = s3_client(root.options)
    return _unless_missing("HEAD", key, lambda: client.head_object(Bucket=bucket, Key=key)) is not None


def _unless_missing(request: str, key: str, call: Callable[[], T]) -> T | None:
    """``call()``, one request about ``key``; None if the key does not exist, an ``OSError`` for any other
    failure."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        return call()
    except ClientError as e:
        if e.response.get("Error", {}).get("Code") in ("NoSuchKey", "404", "NotFound"):
            return None
        raise OSError(f"the {request} of {key} failed: {type(e).__name__}") from e
    except BotoCoreError as e:
        raise OSError(f"the {request} of {key} failed: {type(e).__name__}") from e


def put_object(root: StorageRoot, path: str, data: bytes | pa.Buffer) -> None:
    """Write the object in one PUT (overwriting). An Arrow buffer is sent without a copy."""
    from botocore.exceptions import BotoCoreError, ClientError

    bucket, key = split_path(path)
    try:
        body = pa.BufferReader(data) if isinstance(data, pa.Buffer) else data
        s3_client(root.options).put_object(Bucket=bucket, Key=key, Body=body)
    except (BotoCoreError, ClientError) as e:
        raise OSError(f"the PUT of {key} failed: {type(e).__name__}") from e


@functools.lru_cache(maxsize=16)
def s3_client(options: tuple[tuple[str, str], ...]):
    """A boto3 S3 client for a root's storage options, cached (a client costs milliseconds to build) and
    bounded in time: the root's ``connect_timeout``/``timeout`` (default 5 s / 30 s) and ``max_retries``
    (default 3). Endpoint and credentials not in the options come from the ``AWS_*`` environment, as for
    delta-rs. boto3 clients are thread-safe."""
    import boto3
    from botocore.config import Config
    from botocore.handlers import add_expect_header

    opts = dict(options)
    config = Config(connect_timeout=_seconds(opts.get("connect_timeout", "5s")),
                    read_timeout=_seconds(opts.get("timeout", "30s")),
                    retries={"total_max_attempts": int(opts.get("max_retries", "3")) + 1, "mode": "standard"},
                    max_pool_connections=32)
    client = boto3.client(
        "s3", endpoint_url=opts.get("aws_endpoint_url"), region_name=opts.get("aws_region"),
        aws_access_key_id=opts.get("aws_access_key_id"), aws_secret_access_key=opts.get("aws_secret_access_key"),
        aws_session_token=opts.get("aws_session_token"), config=config)
    # botocore asks the store for "100 Continue" before it sends any PutObject body, so that a body the store
    # would refuse is not sent. The store takes every PUT through this client (segments, commits, checkpoints,
    # member records) but a conditional commit that lost its version, a body of a few KB: the wait gains nothing
    # and costs one more round trip, a commit's on the topic's serial commit path (1.2 ms of each commit under
    # the S3 Standard profile with two fronts, traced by hand: docs/storage.md)
    client.meta.events.unregister("before-call.s3", add_expect_header)
    return client
