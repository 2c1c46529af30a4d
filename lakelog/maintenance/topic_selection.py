"""Which topics a maintenance job works on; every check happens before anything is changed.

Without ``--topic`` a job takes every topic under the root (internal ones
included: ``__consumer_offsets`` is compacted like any other) whose
``cleanup.policy`` the job applies to, silently skipping the rest.  A topic
named explicitly must exist and have that policy, else the job fails with
``UNKNOWN_TOPIC_OR_PARTITION`` / ``INVALID_CONFIG`` before touching any topic.
"""

from __future__ import annotations

from typing import Sequence

from lakelog.storage.catalog import Catalog
from lakelog.errors import InvalidConfig, InvalidRequest, UnknownTopicOrPartition
from lakelog.storage.storage_root import StorageRoot
from lakelog.storage.topic_config import TopicConfig
from lakelog.storage.topic_snapshot import TopicSnapshot


def check_root(root: StorageRoot) -> None:
    """Fail with ``INVALID_REQUEST`` unless ``root`` is a lakelog storage root (it has ``topics/``)."""
    from pyarrow.fs import FileType

    info = root.filesystem.get_file_info(root.path_for("topics"))
    if info.type != FileType.Directory:
        raise InvalidRequest(f"{root.uri} is not a lakelog storage root (it has no topics/ directory)")


def select_topics(root: StorageRoot, topics: Sequence[str] | None, *, policy: str | None,
                  job: str) -> list[TopicSnapshot]:
    """Snapshots of the topics ``job`` works on (``policy``: 'delete', 'compact' or None for any)."""
    check_root(root)
    catalog = Catalog(root)
    if not topics:
        out = []
        for name in catalog.list(include_internal=True):
            try:
                snap = catalog.snapshot(name)
            except UnknownTopicOrPartition:
                continue  # deleted while we looked
            if policy is None or policy in TopicConfig(snap.configuration).cleanup_policy:
                out.append(snap)
        return out
    out = []
    for name in dict.fromkeys(topics):
        snap = catalog.snapshot(name)  # UNKNOWN_TOPIC_OR_PARTITION / INVALID_TOPIC_EXCEPTION
        policies = TopicConfig(snap.configuration).cleanup_policy
        if policy is not None and policy not in policies:
            raise InvalidConfig(f"{job} applies to topics whose cleanup.policy contains '{policy}'; topic {name} "
                                f"has cleanup.policy={','.join(policies)}")
        out.append(snap)
    return out
