"""The secret fronts on one root show each other: only a holder of the root's credentials can read it, so a
client of a front cannot pass for another front (and hand it a commit, writer/commit_handoff.py).

On-disk: ``_lakelog/cluster/secret`` = 64 hex digits, created once, put-if-absent (the first front to start
wins; the others read the winner's).
"""

from __future__ import annotations

import re
import secrets

from lakelog.storage.delta_commit import CommitConflict, put_if_absent
from lakelog.storage.delta_log import read_object
from lakelog.storage.storage_root import StorageRoot

SECRET_PATH = "_lakelog/cluster/secret"
SECRET_HEADER = "X-Lakelog-Cluster-Secret"
_SECRET = re.compile(rb"[0-9a-f]{64}\s*")


def cluster_secret(root: StorageRoot) -> str:
    """The root's cluster secret, created if there is none yet. ValueError for an object that is not 64 hex
    digits: a short or empty secret would let anyone pass for a front."""
    data = read_object(root, root.path_for(SECRET_PATH))
    if data is None:
        try:
            put_if_absent(root, SECRET_PATH, secrets.token_hex(32).encode())
        except CommitConflict:  # another front created it first: theirs stands
            pass
        data = read_object(root, root.path_for(SECRET_PATH))
    if data is None:
        raise OSError("the cluster secret could not be read back")
    if not _SECRET.fullmatch(data):
        raise ValueError(f"{SECRET_PATH} under the root is not 64 lower-case hex digits; stop every front of "
                         f"the root and delete it to have a new one created")
    return data.decode().strip()
