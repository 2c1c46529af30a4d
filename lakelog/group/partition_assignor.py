"""What every client-side assignor takes and returns (Kafka's ``ConsumerPartitionAssignor`` contract).

An assignor is a pure function ``(members, partitions_per_topic) -> member_id -> sorted partitions`` where every
member appears; it sees only subscribed topics that exist with at least one partition, as Kafka's
``AbstractPartitionAssignor`` hands them to its strategies.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

#: ``AbstractStickyAssignor.DEFAULT_GENERATION``: "no generation known".
DEFAULT_GENERATION = -1


@dataclass(frozen=True, order=True)
class TopicPartition:
    """One partition of a topic; sorts by topic, then partition number."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"  # Kafka's TopicPartition.toString


@dataclass(frozen=True)
class MemberSubscription:
    """What one group member tells the assignor when it joins.

    ``owned`` and ``generation`` describe the partitions the member held
    before this rebalance and the generation they were assigned in; only the
    sticky assignors use them.  ``generation`` -1 means unknown.
    """

    member_id: str
    topics: tuple[str, ...]
    group_instance_id: str | None = None
    owned: tuple[TopicPartition, ...] = ()
    generation: int = DEFAULT_GENERATION


#: ``member_id -> partitions`` (sorted); every member appears.
Assignment = dict[str, list[TopicPartition]]
Assignor = Callable[[Sequence[MemberSubscription], Mapping[str, int]], Assignment]


def _subscriptions(members: Sequence[MemberSubscription]) -> dict[str, tuple[str, ...]]:
    """member_id -> subscribed topics (duplicates dropped); rejects duplicate member ids."""
    subs: dict[str, tuple[str, ...]] = {}
    for m in members:
        if m.member_id in subs:
            raise ValueError(f"duplicate member id {m.member_id!r}")
        if isinstance(m.topics, str):
            raise TypeError(f"topics of member {m.member_id!r} must be a sequence of names, not a string")
        subs[m.member_id] = tuple(dict.fromkeys(m.topics))
    return subs


def _assignable_topics(subs: Mapping[str, Iterable[str]], partitions_per_topic: Mapping[str, int]) -> dict[str, int]:
    # AbstractPartitionAssignor.assign(Cluster, ...) hands its strategies only
    # subscribed topics that exist with at least one partition.
    subscribed = {t for topics in subs.values() for t in topics}
    return {t: n for t, n in partitions_per_topic.items() if t in subscribed and n > 0}


def _finish(members: Sequence[MemberSubscription], assignment: Mapping[str, list[TopicPartition]]) -> Assignment:
    return {m.member_id: sorted(assignment.get(m.member_id, ())) for m in members}
