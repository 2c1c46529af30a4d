"""Which fronts are alive: each front rewrites its own heartbeat object; the live ones are those heard from
within the session timeout.

On-disk: ``_lakelog/fronts/<node id>.json`` = ``{"node_id", "http_url", "kafka_host", "kafka_port",
"heartbeat_ms"}``, written only by that front (a plain overwrite: no other writer, so no conflict), removed
when it stops cleanly.  Liveness compares ``heartbeat_ms`` with this machine's clock: fronts' clocks must
agree to well within the session timeout (NTP).  Thread-safe (no shared mutable state).
"""

from __future__ import annotations

import ipaddress
import json
import os
import time
from dataclasses import asdict, dataclass
from urllib.parse import urlsplit

import msgspec

from lakelog.storage.delta_log import read_object
from lakelog.storage.partition_lease import MAX_NODE_ID
from lakelog.storage.s3_objects import put_object
from lakelog.storage.storage_root import StorageRoot, list_dir

FRONTS_DIR = "_lakelog/fronts"
DEFAULT_SESSION_TIMEOUT_MS = 10_000


def is_unspecified_address(host: str) -> bool:
    """Whether ``host`` is a bind-to-every-interface address (``0.0.0.0``, ``::``, empty): one a front may bind
    but never give to other fronts or clients, which could not connect to it (Kafka refuses to advertise it)."""
    try:
        return ipaddress.ip_address(host.strip("[]")).is_unspecified
    except ValueError:
        return host == ""


def is_advertisable_url(url: str) -> bool:
    """Whether ``url`` is an HTTP address other fronts and clients can connect to: ``http(s)://HOST[:PORT]``,
    HOST not an every-interface address, no path, query or fragment (routes are appended to it)."""
    try:
        parts = urlsplit(url)
        parts.port  # a port that is not a number in range raises
    except ValueError:
        return False
    return (parts.scheme in ("http", "https") and bool(parts.hostname) and not is_unspecified_address(parts.hostname)
            and parts.path in ("", "/") and not parts.query and not parts.fragment)


@dataclass(frozen=True)
class FrontInfo:
    node_id: int
    http_url: str
    kafka_host: str | None = None
    kafka_port: int | None = None
    heartbeat_ms: int = 0


class Membership:
    def __init__(self, root: StorageRoot, me: FrontInfo, session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS):
        self.root, self.me, self.session_timeout_ms = root, me, session_timeout_ms

    def _path(self, node_id: int) -> str:
        return self.root.path_for(FRONTS_DIR, f"{node_id}.json")

    def heartbeat(self) -> None:
        data = json.dumps(asdict(self.me) | {"heartbeat_ms": int(time.time() * 1000)}).encode()
        path = self._path(self.me.node_id)
        if self.root.is_local:  # replace atomically: a reader never sees half a file
            os.makedirs(os.path.dirname(path), exist_ok=True)
            tmp = f"{path}.{os.getpid()}.tmp"
            with open(tmp, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
        else:
            put_object(self.root, path, data)

    def leave(self) -> None:
        try:
            self.root.filesystem.delete_file(self._path(self.me.node_id))
        except (FileNotFoundError, OSError):
            pass

    def live(self) -> list[FrontInfo]:
        """Fronts heard from within the session timeout, by node id (this one included once it has beaten)."""
        now = int(time.time() * 1000)
        out = []
        for info in list_dir(self.root, FRONTS_DIR):
            if not info.path.endswith(".json"):
                continue
            data = read_object(self.root, info.path)
            try:
                front = msgspec.json.decode(data, type=FrontInfo) if data else None
            except msgspec.DecodeError:  # fields checked by type: a wrong one would fail the comparisons below
                continue  # not a heartbeat we wrote: ignored
            if front is None or info.base_name != f"{front.node_id}.json" or not 0 <= front.node_id <= MAX_NODE_ID:
                continue  # one file per front, named for its node id: another's name would count it twice
            if not is_advertisable_url(front.http_url):
                continue  # other fronts would hand their commits to it, and clients be sent there
            if now - front.heartbeat_ms <= self.session_timeout_ms:
                out.append(front)
        return sorted(out, key=lambda f: f.node_id)
