"""Kafka's ``RangeAssignor``: per topic, contiguous ranges of partitions over the topic's subscribers."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from lakelog.group.java_order import _member_order_key
from lakelog.group.partition_assignor import (Assignment, MemberSubscription, TopicPartition, _assignable_topics, _finish,
                                              _subscriptions)


def range_assign(members: Sequence[MemberSubscription], partitions_per_topic: Mapping[str, int]) -> Assignment:
    """Kafka's ``RangeAssignor``.

    Per topic, partitions in numeric order are split into contiguous ranges
    over the topic's subscribers in member order (static members first by
    instance id, then dynamic members by member id); with P partitions and C
    subscribers each gets P // C and the first P % C get one more.
    """
    subs = _subscriptions(members)
    ppt = _assignable_topics(subs, partitions_per_topic)
    assignment: Assignment = {m.member_id: [] for m in members}
    subscribers: dict[str, list[MemberSubscription]] = {}
    for m in members:
        for topic in subs[m.member_id]:
            subscribers.setdefault(topic, []).append(m)
    for topic, count in ppt.items():
        consumers = sorted(subscribers[topic], key=_member_order_key)
        per_consumer, extra = divmod(count, len(consumers))
        start = 0
        for i, m in enumerate(consumers):
            length = per_consumer + (1 if i < extra else 0)
            assignment[m.member_id].extend(TopicPartition(topic, p) for p in range(start, start + length))
            start += length
    return _finish(members, assignment)
