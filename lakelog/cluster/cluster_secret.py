"""The secret fronts on one root show each other: only a holder of the root's credentials can read it, so a
client of a front cannot pass for another front (and hand it a commit, writer/commit_handoff.py).

On-disk: ``_lakelog/cluster/secret`` = 64 hex digits, created once, put-if-absent (the first front to start
wins; the others read the winner's).
"""

from __future__ import annotations

import secrets

from lakelog.storage.delta_commit import CommitConflict, put_if_absent
from lakelog.storage.delta_log import read_object
from lakelog.storage.storage_root import StorageRoot

SECRET_PATH = "_lakelog/cluster/secret"
SECRET_HEADER = "X-Lakelog-Cluster-Secret"


def cluster_secret(root: StorageRoot) -> str:
    """The root's cluster secret, created if there is none yet."""
    data = read_object(root, root.path_for(SECRET_PATH))
    if data is None:
        try:
            put_if_absent(root, SECRET_PATH, secrets.token_hex(32).encode())
        except CommitConflict:  # another front created it first: theirs stands
            pass
        data = read_object(root, root.path_for(SECRET_PATH))
    if data is None:
        raise OSError("the cluster secret could not be read back")
    return data.decode().strip()
