"""Consumer-group offsets for both fronts: commit (validated against the topics) and fetch with lag."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from lakelog.errors import UnknownTopicOrPartition
from lakelog.group.consumer_offsets import CommittedOffset, OffsetStore

if TYPE_CHECKING:
    from lakelog.broker.topic_metadata import TopicMetadata
    from lakelog.storage.topic_snapshot import TopicSnapshot


def commit_offsets(store: OffsetStore, metadata: "TopicMetadata", group: str,
                   offsets: list[tuple], *, min_offset: int = 0) -> list[CommittedOffset]:
    """Commit after checking every topic and partition exists (404 otherwise; nothing is written)."""
    for topic, partition, *_ in offsets:
        snap = metadata.get(topic)
        if partition >= snap.partition_count and partition >= metadata.get(topic, fresh=True).partition_count:
            raise UnknownTopicOrPartition(f"partition {partition} of topic {topic} does not exist "
                                          f"(the topic has {snap.partition_count} partitions)")
    return store.commit(group, offsets, min_offset=min_offset)


def fetch_offsets(store: OffsetStore, metadata: "TopicMetadata", group: str, topic: str | None,
                  visible: Callable[[str], bool]) -> list[dict]:
    """The group's committed offsets of topics ``visible`` to the caller, with high watermark and lag."""
    out = []
    snaps: dict[str, TopicSnapshot | None] = {}  # one fresh snapshot per topic, not per partition
    for e in store.fetch(group, topic):
        if not visible(e.topic):
            continue
        if e.topic not in snaps:
            try:
                snaps[e.topic] = metadata.get(e.topic, fresh=True)
            except UnknownTopicOrPartition:
                snaps[e.topic] = None
        snap = snaps[e.topic]
        hw = snap.high_watermark(e.partition) if snap is not None and e.partition < snap.partition_count else None
        out.append({"topic": e.topic, "partition": e.partition, "offset": e.offset, "metadata": e.metadata,
                    "commit_timestamp": e.commit_timestamp, "high_watermark": hw,
                    "lag": None if hw is None else max(hw - e.offset, 0)})
    return out
