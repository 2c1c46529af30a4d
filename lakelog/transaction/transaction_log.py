"""The coordinator's durable state: one small object per state change of a transactional id.

On-disk (under the storage root)::

    _lakelog/transactions/<id key>/state/<version, 20 digits>.json   TxnMetadata.to_json()

``<id key>`` is the SHA-256 of the transactional id (hex, 32 characters): any id is a safe path.  A state is
written put-if-absent at the next version, so two fronts coordinating the same id at once cannot both write
a state change: the loser gets :class:`~lakelog.storage.delta_commit.CommitConflict` and must reload.  The
latest version is the state; the two before it are kept (a reader listing while a writer prunes still finds
one), older ones are deleted.  Thread-safe (no mutable state).
"""

from __future__ import annotations

import hashlib
import logging
import os
from dataclasses import replace

import pyarrow.fs as pafs

from lakelog.storage.delta_commit import put_if_absent
from lakelog.storage.delta_log import read_object
from lakelog.storage.storage_root import StorageRoot, list_dir
from lakelog.transaction.transaction_state import TxnMetadata

log = logging.getLogger(__name__)

TRANSACTIONS_DIR = "_lakelog/transactions"
KEEP_VERSIONS = 3


def id_key(transactional_id: str) -> str:
    return hashlib.sha256(transactional_id.encode("utf-8")).hexdigest()[:32]


class TransactionLog:
    def __init__(self, root: StorageRoot) -> None:
        self.root = root

    def _state_dir(self, transactional_id: str) -> str:
        return f"{TRANSACTIONS_DIR}/{id_key(transactional_id)}/state"

    def _versions(self, state_dir: str) -> list[int]:
        names = (os.path.basename(i.path) for i in list_dir(self.root, state_dir))
        return sorted(int(n[:-5]) for n in names if n.endswith(".json") and n[:-5].isdigit())

    def load(self, transactional_id: str) -> TxnMetadata | None:
        """The id's latest state, or None if it was never initialised."""
        state_dir = self._state_dir(transactional_id)
        for version in reversed(self._versions(state_dir)):
            data = read_object(self.root, self.root.path_for(f"{state_dir}/{version:020d}.json"))
            if data is not None:  # pruned between the listing and the read: an older one is not the latest
                meta = TxnMetadata.from_json(data, version)
                return meta if meta.transactional_id == transactional_id else None
        return None

    def save(self, meta: TxnMetadata) -> TxnMetadata:
        """Write ``meta`` as the version after the one it was read as; CommitConflict if another got there first."""
        state_dir = self._state_dir(meta.transactional_id)
        version = meta.version + 1
        saved = replace(meta, version=version)
        put_if_absent(self.root, f"{state_dir}/{version:020d}.json", saved.to_json())
        if version >= KEEP_VERSIONS:
            try:
                self.root.filesystem.delete_file(self.root.path_for(f"{state_dir}/{version - KEEP_VERSIONS:020d}.json"))
            except (FileNotFoundError, OSError):
                pass  # an old state left behind is never read as the latest
        return saved

    def all(self) -> list[TxnMetadata]:
        """Every initialised transactional id's latest state (for recovery after a restart)."""
        out = []
        for entry in list_dir(self.root, TRANSACTIONS_DIR):
            if entry.type != pafs.FileType.Directory:
                continue
            state_dir = f"{TRANSACTIONS_DIR}/{os.path.basename(entry.path)}/state"
            for version in reversed(self._versions(state_dir)):
                data = read_object(self.root, self.root.path_for(f"{state_dir}/{version:020d}.json"))
                if data is not None:
                    try:
                        out.append(TxnMetadata.from_json(data, version))
                    except (ValueError, KeyError, TypeError) as e:
                        log.warning("unreadable transaction state %s/%d: %s", state_dir, version, e)
                    break
        return out
