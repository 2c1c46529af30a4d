"""Kafka's ``RoundRobinAssignor``: every subscribed partition dealt to the members in turn."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from lakelog.group.java_order import _jkey, _member_order_key
from lakelog.group.partition_assignor import (Assignment, MemberSubscription, TopicPartition, _assignable_topics, _finish,
                                              _subscriptions)


def roundrobin_assign(members: Sequence[MemberSubscription], partitions_per_topic: Mapping[str, int]) -> Assignment:
    """Kafka's ``RoundRobinAssignor``.

    All partitions of all subscribed topics, sorted by topic then number, are
    dealt in turn to the members in member order (static members first by
    instance id), skipping a member not subscribed to the partition's topic.
    """
    subs = _subscriptions(members)
    ppt = _assignable_topics(subs, partitions_per_topic)
    assignment: Assignment = {m.member_id: [] for m in members}
    ring = [(m.member_id, frozenset(subs[m.member_id])) for m in sorted(members, key=_member_order_key)]
    turn = 0
    for topic in sorted(ppt, key=_jkey):
        for p in range(ppt[topic]):
            # Someone subscribes to every topic in ppt, so this terminates.
            while topic not in ring[turn % len(ring)][1]:
                turn += 1
            assignment[ring[turn % len(ring)][0]].append(TopicPartition(topic, p))
            turn += 1
    return _finish(members, assignment)
