"""Topic administration for both fronts: the catalog, guarded against changes to internal topics."""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from lakelog.errors import InvalidTopic
from lakelog.storage.topic_name import is_internal, validate_topic_name

if TYPE_CHECKING:
    from lakelog import Log, TopicDescription
    from lakelog.broker.topic_metadata import TopicMetadata
    from lakelog.storage.topic_config import ConfigOp


def writable(topic: str) -> str:
    """``topic`` if users may change it; internal topics (``__consumer_offsets``) are read-only to clients."""
    validate_topic_name(topic)
    if is_internal(topic):
        raise InvalidTopic(f"topic {topic} is internal and cannot be changed by clients")
    return topic


def create_topic(log: "Log", metadata: "TopicMetadata", name: str, partitions: int,
                 configs: dict) -> "TopicDescription":
    desc = log.create_topic(writable(name), partitions, configs)
    metadata.invalidate(name)
    return desc


def alter_topic(log: "Log", metadata: "TopicMetadata", name: str, configs: dict | None,
                partitions: int | None, ops: Sequence["ConfigOp"] = ()) -> "TopicDescription":
    desc = log.alter_topic(writable(name), configs, partitions, ops)
    metadata.invalidate(name)
    return desc


def delete_topic(log: "Log", metadata: "TopicMetadata", name: str) -> None:
    log.delete_topic(writable(name))
    metadata.invalidate(name)


def delete_records(log: "Log", metadata: "TopicMetadata", name: str, partition: int, before_offset: int) -> int:
    start = log.delete_records(writable(name), partition, before_offset)
    metadata.invalidate(name)
    return start
