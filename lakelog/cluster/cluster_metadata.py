"""The root's cluster metadata: ACLs, SCRAM credentials, client quotas and dynamic broker configs, which every
front of the root follows (Kafka keeps these in its ``__cluster_metadata`` log).

On-disk: ``_lakelog/metadata/<20-digit version>.json``, each the whole state
(a few KB: it changes only through admin requests).  A change is a
put-if-absent of the next version, retried on a lost race from the newer
state, so concurrent admins on several fronts serialise as a controller would.
Each front keeps the latest image in memory and looks for the next version
every ``poll_s`` (one GET of an absent object on S3), so a change made
through one front is in force on all of them within about that long; the
front that made it sees it at once. The newest :data:`KEEP` versions are kept.

Thread-safe: readers take :attr:`ClusterMetadata.image` (immutable); updates
serialise on a lock.
"""

from __future__ import annotations

import json
import logging
import threading
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Callable, Mapping

from lakelog.errors import KafkaStorageError
from lakelog.quota.client_quota import Entity
from lakelog.security.acl import AclBinding
from lakelog.security.scram import ScramCredential
from lakelog.storage.delta_commit import CommitConflict, put_if_absent
from lakelog.storage.delta_log import read_object
from lakelog.storage.storage_root import StorageRoot, list_dir

METADATA_DIR = "_lakelog/metadata"
KEEP = 100
POLL_S = 0.5
LIST_EVERY = 20  # polls between listings, which find the newest version after a front fell far behind
MAX_UPDATE_ATTEMPTS = 100
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class MetadataImage:
    """The cluster metadata at one version (-1: none written yet). Immutable."""

    version: int = -1
    acls: tuple[AclBinding, ...] = ()
    scram: Mapping[tuple[str, str], ScramCredential] = field(default_factory=dict)  # (user, mechanism) ->
    scram_seeded: frozenset[tuple[str, str]] = frozenset()  # SASL-file credentials ever written (never re-added)
    quotas: Mapping[Entity, Mapping[str, float]] = field(default_factory=dict)
    broker_configs: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # "" (cluster) or node id ->

    def to_json(self) -> bytes:
        doc = {
            "acls": [b.to_json() for b in sorted(self.acls)],
            "scram": [{"user": u, "mechanism": m, **c.to_json()} for (u, m), c in sorted(self.scram.items())],
            "scram_seeded": sorted([u, m] for u, m in self.scram_seeded),
            "quotas": [{"entity": [[t, n] for t, n in e], "values": dict(sorted(v.items()))}
                       for e, v in sorted(self.quotas.items(), key=lambda kv: json.dumps(kv[0]))],
            "broker_configs": {k: dict(sorted(v.items())) for k, v in sorted(self.broker_configs.items())},
        }
        return json.dumps(doc, separators=(",", ":"), sort_keys=True).encode()

    @classmethod
    def from_json(cls, version: int, data: bytes) -> "MetadataImage":
        """Raises ValueError (or KeyError, TypeError) for a document that is not one this module wrote."""
        doc = json.loads(data)
        quotas = {}
        for q in doc.get("quotas", []):
            entity = tuple((str(t), None if n is None else str(n)) for t, n in q["entity"])
            quotas[entity] = MappingProxyType({str(k): float(v) for k, v in q["values"].items()})
        return cls(
            version=version,
            acls=tuple(AclBinding.from_json(a) for a in doc.get("acls", [])),
            scram=MappingProxyType({(str(s["user"]), str(s["mechanism"])): ScramCredential.from_json(s)
                                    for s in doc.get("scram", [])}),
            scram_seeded=frozenset((str(u), str(m)) for u, m in doc.get("scram_seeded", [])),
            quotas=MappingProxyType(quotas),
            broker_configs=MappingProxyType({str(k): MappingProxyType({str(a): str(b) for a, b in v.items()})
                                             for k, v in doc.get("broker_configs", {}).items()}),
        )


def _path(version: int) -> str:
    return f"{METADATA_DIR}/{version:020d}.json"


class ClusterMetadata:
    """The root's cluster metadata as this front sees it. Nothing is read until :meth:`start` (or the first
    :meth:`update` / :meth:`catch_up`)."""

    def __init__(self, root: StorageRoot, *, poll_s: float = POLL_S) -> None:
        self.root = root
        self.poll_s = poll_s
        self._image = MetadataImage()
        self._lock = threading.Lock()
        self._loaded = False
        self._polls = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def image(self) -> MetadataImage:
        return self._image

    def acls(self) -> tuple[AclBinding, ...]:
        """The ACLs created over Kafka's protocol (``lakelog.broker.authorizer.AclSource``)."""
        return self._image.acls

    def quotas(self) -> Mapping[Entity, Mapping[str, float]]:
        return self._image.quotas

    def start(self) -> "ClusterMetadata":
        """Read the newest version, then follow the root in a background thread."""
        self.catch_up()
        self._thread = threading.Thread(target=self._follow, name="lakelog-cluster-metadata", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _follow(self) -> None:
        while not self._stop.wait(self.poll_s):
            try:
                self.catch_up()
            except Exception:  # a storage hiccup: the next poll tries again
                log.warning("following the root's cluster metadata failed", exc_info=True)

    def catch_up(self) -> MetadataImage:
        """Take in every version written since the one held; the image now in force."""
        with self._lock:
            return self._catch_up()

    def _catch_up(self) -> MetadataImage:
        self._polls += 1
        version = self._image.version
        if not self._loaded or self._polls % LIST_EVERY == 0:
            version = max(version, self._newest_listed())
            self._loaded = True
        newest: tuple[int, bytes] | None = None
        if version > self._image.version:
            data = read_object(self.root, self.root.path_for(_path(version)))
            if data is not None:
                newest = (version, data)
        while True:  # a listing may lag behind the newest puts
            data = read_object(self.root, self.root.path_for(_path(version + 1)))
            if data is None:
                break
            version += 1
            newest = (version, data)
        if newest is not None:
            self._take(MetadataImage.from_json(*newest))
        return self._image

    def _newest_listed(self) -> int:
        infos = list_dir(self.root, METADATA_DIR)  # empty while another front creates it: read one by one then
        versions = [int(i.base_name[:20]) for i in infos
                    if len(i.base_name) == 25 and i.base_name.endswith(".json") and i.base_name[:20].isdigit()]
        return max(versions, default=-1)

    def _take(self, image: MetadataImage) -> None:
        self._image = image

    def update(self, change: Callable[[MetadataImage], MetadataImage]) -> MetadataImage:
        """Apply ``change`` (a pure function of the image in force, which raises to refuse) and write the result
        as the next version; on a lost race, again from the newer image. Returns the image now in force (the
        same one when ``change`` changed nothing). ``KAFKA_STORAGE_ERROR`` if the store keeps failing."""
        with self._lock:
            for _ in range(MAX_UPDATE_ATTEMPTS):
                current = self._catch_up()
                new = change(current)
                if new.to_json() == current.to_json():
                    return current
                version = current.version + 1
                try:
                    put_if_absent(self.root, _path(version), new.to_json())
                except CommitConflict:
                    continue
                except OSError as e:
                    raise KafkaStorageError(f"writing the cluster metadata failed: {type(e).__name__}") from None
                image = MetadataImage.from_json(version, new.to_json())
                self._take(image)
                self._clean(version)
                return image
        raise KafkaStorageError("the cluster metadata kept changing under this update; retry")

    def _clean(self, version: int) -> None:
        """Remove the version :data:`KEEP` behind this one (best effort: another front's update removes it too)."""
        old = version - KEEP
        if old < 0:
            return
        try:
            self.root.filesystem.delete_file(self.root.path_for(_path(old)))
        except (FileNotFoundError, OSError):
            pass
