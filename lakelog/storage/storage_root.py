"""Storage roots: where topics live, and how to reach them.

A root is a local directory (the embedded default: ``$LAKELOG_ROOT`` or
``./lakelog-data``) or an ``s3://bucket/prefix`` URI on any S3-compatible
endpoint.  Layout under a root::

    <root>/topics/<topic>/                 a topic: one Delta table
    <root>/topics/<topic>/_delta_log/      the Delta log (delta-rs)
    <root>/topics/<topic>/partition=P/     segment files
    <root>/topics/<topic>/_lakelog/index/  persisted Arrow index, one file per Delta version
    <root>/_lakelog/producers/             a Delta table allocating producer ids

S3 settings come from the standard AWS environment variables, overridden by
explicit storage options (delta-rs / object_store keys, e.g.
``aws_endpoint_url``).  A :class:`StorageRoot` is a small picklable value; the
filesystem handle it opens is cached per process, never pickled.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field
from typing import Mapping
from urllib.parse import urlparse

import pyarrow.fs as pafs

DEFAULT_ROOT = "./lakelog-data"

_ENV_KEYS = {
    "AWS_ENDPOINT_URL_S3": "aws_endpoint_url",
    "AWS_ENDPOINT_URL": "aws_endpoint_url",
    "AWS_ACCESS_KEY_ID": "aws_access_key_id",
    "AWS_SECRET_ACCESS_KEY": "aws_secret_access_key",
    "AWS_SESSION_TOKEN": "aws_session_token",
    "AWS_REGION": "aws_region",  # before AWS_DEFAULT_REGION, as the AWS CLI and SDKs take them
    "AWS_DEFAULT_REGION": "aws_region",
    "AWS_ALLOW_HTTP": "aws_allow_http",
}
_ALIASES = {
    "endpoint": "aws_endpoint_url",
    "endpoint_url": "aws_endpoint_url",
    "aws_endpoint": "aws_endpoint_url",
    "access_key_id": "aws_access_key_id",
    "secret_access_key": "aws_secret_access_key",
    "session_token": "aws_session_token",
    "region": "aws_region",
    "allow_http": "aws_allow_http",
}


# The values of lakelog's own storage option commit_put_copies (lakelog.storage.s3_objects.create_object)
COMMIT_PUT_COPIES = ("1", "2", "3")
# Bounds of the clients' timeout and retry options: past them the S3 clients' own conversions overflow (a timeout
# of 1e15 s, a retry count over 2**64) at the first request instead of when the root is resolved
MAX_DURATION_S = 24 * 3600.0
MAX_RETRIES = 100


class InvalidStorageRoot(ValueError):
    """A root URI or storage option lakelog cannot use; its message names the root or option, never a
    credential."""


def _normalise_key(key: str) -> str:
    k = key.strip().lower()
    return _ALIASES.get(k, k)


@dataclass(frozen=True)
class StorageRoot:
    """A lakelog root: ``uri`` (absolute local path or ``s3://bucket/prefix``) and storage options."""

    uri: str
    options: tuple[tuple[str, str], ...] = field(default=())

    @classmethod
    def resolve(cls, root: str | os.PathLike | None = None, storage_options: Mapping[str, str] | None = None) -> "StorageRoot":
        """Resolve ``root`` (default ``$LAKELOG_ROOT`` or ``./lakelog-data``) and its effective options."""
        if isinstance(root, StorageRoot):
            return root
        raw = str(root) if root is not None else os.environ.get("LAKELOG_ROOT", DEFAULT_ROOT)
        scheme = urlparse(raw).scheme
        opts: dict[str, str] = {}
        if scheme in ("s3", "s3a"):
            parsed = urlparse(raw)
            if not parsed.netloc:
                raise InvalidStorageRoot(f"Storage root {raw!r} has no bucket")
            uri = f"s3://{parsed.netloc}{parsed.path.rstrip('/')}"
            for env, key in _ENV_KEYS.items():
                if os.environ.get(env) and key not in opts:
                    opts[key] = os.environ[env]
        elif scheme in ("", "file"):
            path = raw[len("file://"):] if scheme == "file" else raw
            uri = os.path.abspath(os.path.expanduser(path))
        else:
            raise InvalidStorageRoot(f"Unsupported storage root {raw!r}: use a local path or s3://bucket/prefix")
        for k, v in (storage_options or {}).items():
            opts[_normalise_key(k)] = str(v)
        for key in ("connect_timeout", "timeout"):
            if key in opts:
                try:
                    duration_seconds(opts[key])
                except ValueError:
                    raise InvalidStorageRoot(f"Storage option {key} must be a positive duration such as 5s, "
                                             "500ms or 2m, at most a day") from None
        retries = opts.get("max_retries", "0")
        if not (retries.isdecimal() and int(retries) <= MAX_RETRIES):  # isdigit() passes "²", which int() refuses
            raise InvalidStorageRoot(f"Storage option max_retries must be a whole number up to {MAX_RETRIES}")
        if opts.get("commit_put_copies", "1") not in COMMIT_PUT_COPIES:
            raise InvalidStorageRoot("Storage option commit_put_copies must be " + ", ".join(COMMIT_PUT_COPIES[:-1])
                                     + " or " + COMMIT_PUT_COPIES[-1])
        endpoint = opts.get("aws_endpoint_url", "")
        if endpoint.startswith("http://"):
            opts.setdefault("aws_allow_http", "true")
        return cls(uri=uri, options=tuple(sorted(opts.items())))

    @property
    def is_local(self) -> bool:
        return not self.uri.startswith("s3://")

    @property
    def storage_options(self) -> dict[str, str]:
        """Options for delta-rs (object_store keys)."""
        return dict(self.options)

    def uri_for(self, *parts: str) -> str:
        """URI of a path under the root, for delta-rs."""
        return "/".join([self.uri.rstrip("/"), *parts])

    def path_for(self, *parts: str) -> str:
        """Path of a path under the root, for :attr:`filesystem`."""
        base = self.uri[len("s3://"):] if not self.is_local else self.uri
        return "/".join([base.rstrip("/"), *parts])

    @property
    def filesystem(self) -> pafs.FileSystem:
        """A pyarrow filesystem for the root (cached per process)."""
        return _filesystem(self.is_local, self.options)


@functools.lru_cache(maxsize=32)
def _filesystem(is_local: bool, options: tuple[tuple[str, str], ...]) -> pafs.FileSystem:
    if is_local:
        return pafs.LocalFileSystem()
    opts = dict(options)
    kwargs: dict[str, object] = {}
    endpoint = opts.get("aws_endpoint_url")
    if endpoint:
        parsed = urlparse(endpoint)
        kwargs["endpoint_override"] = parsed.netloc or parsed.path
        kwargs["scheme"] = parsed.scheme or "https"
    if opts.get("aws_access_key_id"):
        kwargs["access_key"] = opts["aws_access_key_id"]
        kwargs["secret_key"] = opts.get("aws_secret_access_key", "")
        if opts.get("aws_session_token"):
            kwargs["session_token"] = opts["aws_session_token"]
    kwargs["region"] = opts.get("aws_region", "us-east-1")
    for key, arg in (("connect_timeout", "connect_timeout"), ("timeout", "request_timeout")):
        if key in opts:
            kwargs[arg] = duration_seconds(opts[key])
    if "max_retries" in opts:  # the same retry budget as delta-rs's and the commit client's
        kwargs["retry_strategy"] = pafs.AwsStandardS3RetryStrategy(max_attempts=int(opts["max_retries"]) + 1)
    return pafs.S3FileSystem(**kwargs)


def list_dir(root: StorageRoot, rel: str) -> list[pafs.FileInfo]:
    """The entries directly under ``rel`` (none if it does not exist).

    pyarrow's ``allow_not_found`` does not cover a directory another front creates while it lists: its listing
    fails, then it finds the directory and raises. The directory did not exist when the listing was made, so
    that listing is empty."""
    try:
        return root.filesystem.get_file_info(pafs.FileSelector(root.path_for(rel), allow_not_found=True))
    except FileNotFoundError:
        return []


def duration_seconds(text: str) -> float:
    """A timeout option's seconds: ``500ms``, ``5s``, ``2m`` or a bare number of seconds; a ``ValueError`` unless
    it is positive and at most :data:`MAX_DURATION_S` (:meth:`StorageRoot.resolve` refuses such a root)."""
    t = text.strip().lower()
    mult = 1.0
    for suffix, m in (("ms", 0.001), ("s", 1.0), ("m", 60.0)):
        if t.endswith(suffix):
            t, mult = t[: -len(suffix)], m
            break
    value = float(t) * mult
    if not 0 < value <= MAX_DURATION_S:
        raise ValueError(f"not a positive duration: {text!r}")
    return value
