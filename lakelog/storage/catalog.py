"""The topic catalog: create, list, describe, alter and delete topics under a root.

A topic is the Delta table ``<root>/topics/<name>/`` (schema
:data:`~lakelog.storage.record_schema.TABLE_SCHEMA`, partitioned by ``partition``) whose
table properties hold the topic configs under Kafka's keys plus
``lakelog.partitions`` (the partition count).  Creation is a put-if-absent of
the table's first commit, so two concurrent creates of one name cannot both win.
Thread-safe (no shared mutable state).
"""

from __future__ import annotations

import time
import uuid
from dataclasses import asdict, dataclass, field
from typing import Callable, Sequence

from lakelog.errors import (InvalidConfig, InvalidPartitions, InvalidRequest, KafkaError, KafkaStorageError,
                            TopicAlreadyExists, UnknownTopicOrPartition)
from lakelog.storage.delta_commit import CommitConflict, put_if_absent, table_metadata
from lakelog.storage.delta_log import commit_path, encode_actions, file_exists
from lakelog.storage.record_schema import PARTITION_COLUMN, TABLE_SCHEMA
from lakelog.storage.storage_root import StorageRoot, list_dir
from lakelog.storage.topic_config import ConfigOp, TopicConfig, apply_ops, validate_configs
from lakelog.storage.topic_name import is_internal, validate_topic_name
from lakelog.storage.topic_snapshot import (DELETED_PROPERTY, OPERATION_KEY, PARTITIONS_PROPERTY, TOPIC_ID_PROPERTY,
                                            TopicSnapshot, load_snapshot)

MAX_PARTITIONS = 10_000
MAX_ADMIN_ATTEMPTS = 50


@dataclass(frozen=True)
class PartitionInfo:
    """One partition as ``topics describe`` shows it."""

    partition: int
    log_start_offset: int
    high_watermark: int
    segments: int
    bytes: int
    records: int


@dataclass(frozen=True)
class TopicDescription:
    """A topic's partitions, effective configs and the Delta version described."""

    name: str
    partitions: list[PartitionInfo]
    configs: dict[str, str]
    overrides: dict[str, str] = field(default_factory=dict)
    version: int = 0
    topic_id: str | None = None  # Kafka's topic id: new for every incarnation of the name

    def to_dict(self) -> dict:
        return asdict(self)


def describe_snapshot(snap: TopicSnapshot) -> TopicDescription:
    parts = []
    for p in range(snap.partition_count):
        segs = snap.index.segments(p)
        parts.append(PartitionInfo(p, snap.log_start_offset(p), snap.high_watermark(p), len(segs),
                                   sum(s.bytes for s in segs), sum(s.records for s in segs)))
    cfg = TopicConfig(snap.configuration)
    return TopicDescription(snap.topic, parts, cfg.raw(), cfg.overrides(), snap.version, snap.topic_id)


def _check_partitions(n: object) -> int:
    if isinstance(n, bool) or not isinstance(n, int):
        raise InvalidPartitions(f"partition count must be an integer, got {n!r}")
    if not 1 <= n <= MAX_PARTITIONS:
        raise InvalidPartitions(f"partition count must be between 1 and {MAX_PARTITIONS}, got {n}")
    return n


class Catalog:
    """Topic administration for one storage root."""

    def __init__(self, root: StorageRoot) -> None:
        self.root = root

    def _uri(self, name: str) -> str:
        return self.root.uri_for("topics", validate_topic_name(name))

    def table_exists(self, name: str) -> bool:
        """Whether the topic's table exists (its first commit, or a checkpoint once log cleanup removed that),
        deleted or not: two existence probes, no read."""
        table = f"topics/{validate_topic_name(name)}"
        return (file_exists(self.root, self.root.path_for(commit_path(table, 0)))
                or file_exists(self.root, self.root.path_for(table, "_delta_log", "_last_checkpoint")))

    def exists(self, name: str) -> bool:
        """Whether the topic exists: its table does, and its latest commit is not a delete."""
        return self.table_exists(name) and not load_snapshot(self.root, name).deleted

    def create(self, name: str, partitions: int = 1, configs: dict | None = None) -> TopicDescription:
        """Create a topic; ``TOPIC_ALREADY_EXISTS`` if it exists. Nothing is written on a bad argument."""
        from deltalake import DeltaTable

        validate_topic_name(name)
        n = _check_partitions(partitions)
        props = validate_configs(configs or {})
        props[PARTITIONS_PROPERTY] = str(n)
        props[TOPIC_ID_PROPERTY] = uuid.uuid4().hex
        if self.table_exists(name):
            self._recreate(name, props)
            return self.describe(name)
        if self.root.is_local:
            self.root.filesystem.create_dir(self.root.path_for("topics", name), recursive=True)
        try:
            DeltaTable.create(self._uri(name), schema=TABLE_SCHEMA, mode="error", partition_by=[PARTITION_COLUMN],
                              name=name, configuration=props, storage_options=self.root.storage_options,
                              raise_if_key_not_exists=False)
        except Exception as e:
            if "already exists" in str(e).lower() or self.exists(name):
                raise TopicAlreadyExists(f"Topic '{name}' already exists.") from None
            raise
        return self.describe(name)

    def _recreate(self, name: str, props: dict[str, str]) -> None:
        """A new incarnation of a deleted topic: the next commit of its table, with a new topic id and table id,
        every partition's offsets back at 0 (``TOPIC_ALREADY_EXISTS`` if the topic is not deleted)."""
        for _ in range(MAX_ADMIN_ATTEMPTS):
            snap = load_snapshot(self.root, name)
            if not snap.deleted:
                raise TopicAlreadyExists(f"Topic '{name}' already exists.")
            now = int(time.time() * 1000)
            meta = {**table_metadata(self.root, name), "id": str(uuid.uuid4()), "configuration": props,
                    "createdTime": now}
            actions = [{"commitInfo": {"timestamp": now, "operation": "CREATE TABLE", "clientVersion": "lakelog",
                                       OPERATION_KEY: "create"}},
                       {"metaData": meta},
                       *({"txn": {"appId": app, "version": 0, "lastUpdated": now}} for app in sorted(snap.txns))]
            try:
                put_if_absent(self.root, commit_path(f"topics/{name}", snap.version + 1), encode_actions(actions))
                return
            except CommitConflict:
                continue
        raise KafkaStorageError(f"recreating topic {name} kept conflicting with other commits; retry")

    @staticmethod
    def plan_delete(snap: TopicSnapshot, base_metadata: dict) -> list[dict]:
        """The actions of the commit that deletes a topic: every live segment removed, ``lakelog.deleted`` set
        on the table's metadata (``base_metadata``: :func:`~lakelog.storage.delta_commit.table_metadata`). Pure."""
        now = int(time.time() * 1000)
        removes = [{"remove": {"path": seg.path, "deletionTimestamp": now, "dataChange": True,
                               "partitionValues": {PARTITION_COLUMN: str(seg.partition)}, "size": seg.bytes}}
                   for seg in snap.index]
        configuration = {**snap.configuration, DELETED_PROPERTY: "true"}
        return [*removes, {"metaData": {**base_metadata, "configuration": configuration}}]

    def list(self, include_internal: bool = False, exists: Callable[[str], bool] | None = None) -> list[str]:
        """The topics, sorted; ``exists`` decides for each table found (default :meth:`exists`; a caller with
        cached snapshots passes a cheaper check)."""
        from pyarrow.fs import FileType

        names = []
        for info in list_dir(self.root, "topics"):
            if info.type != FileType.Directory:
                continue
            if not include_internal and is_internal(info.base_name):
                continue
            try:
                if (exists or self.exists)(info.base_name):
                    names.append(info.base_name)
            except KafkaError:
                continue
        return sorted(names)

    def snapshot(self, name: str) -> TopicSnapshot:
        validate_topic_name(name)
        snap = load_snapshot(self.root, name)
        if snap.version < 0 or snap.deleted:
            raise UnknownTopicOrPartition(f"topic {name} does not exist under {self.root.uri}")
        return snap

    def describe(self, name: str) -> TopicDescription:
        return describe_snapshot(self.snapshot(name))

    @staticmethod
    def plan_alter(snap: TopicSnapshot, configs: dict | None, partitions: int | None,
                   ops: Sequence[ConfigOp] = ()) -> dict[str, str | None]:
        """The table properties an alter sets on ``snap``: configs (a value of None: back to the default, the
        property removed), IncrementalAlterConfigs ``ops`` applied to the topic's current overrides, and the
        partition count if it grows.

        Raises ``INVALID_CONFIG``, ``INVALID_PARTITIONS`` (a decrease) or ``INVALID_REQUEST`` (nothing to
        alter); an empty result means the topic already is as asked. Pure.
        """
        if PARTITIONS_PROPERTY in (configs or {}) or any(o.key == PARTITIONS_PROPERTY for o in ops):
            raise InvalidConfig(f"{PARTITIONS_PROPERTY} is not a topic config; use the partitions argument")
        changes: dict[str, str | None] = dict(configs or {})
        if ops:
            changes.update(apply_ops(TopicConfig(snap.configuration).overrides(), ops))
        props: dict[str, str | None] = dict(validate_configs(changes, snap.configuration))
        props.update({k: None for k, v in changes.items() if v is None and k in snap.configuration})
        if partitions is not None:
            n = _check_partitions(partitions)
            if n < snap.partition_count:
                raise InvalidPartitions(f"topic {snap.topic} has {snap.partition_count} partitions; the count can "
                                        f"only be increased, not to {n}")
            if n > snap.partition_count:
                props[PARTITIONS_PROPERTY] = str(n)
        if not props and configs is None and partitions is None and not ops:
            raise InvalidRequest("nothing to alter: give configs and/or partitions")
        return props


def altered_configuration(configuration: dict[str, str], props: dict[str, str | None]) -> dict[str, str]:
    """A table's configuration after :meth:`Catalog.plan_alter`'s ``props``: set, or removed where None."""
    out = {**configuration, **props}
    return {k: v for k, v in out.items() if v is not None}  # type: ignore[misc]
