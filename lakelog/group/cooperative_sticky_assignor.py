"""Kafka's ``CooperativeStickyAssignor``: the sticky target minus the partitions that change owner, which are
handed over only in the follow-up rebalance (incremental rebalancing, KIP-429).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from lakelog.group.partition_assignor import Assignment, MemberSubscription, TopicPartition, _finish
from lakelog.group.sticky_assignor import _sticky


def cooperative_sticky_assign(
    members: Sequence[MemberSubscription], partitions_per_topic: Mapping[str, int]
) -> Assignment:
    """Kafka's ``CooperativeStickyAssignor``: this round's assignment under incremental rebalancing.

    The sticky target with every partition that changes owner left out: its
    previous owner revokes it now and it is assigned in the follow-up
    rebalance, so no partition is ever owned by two members at once.
    """
    assignment, transferring = _sticky(members, partitions_per_topic)
    if transferring is None:
        transferring = _partitions_changing_owner(members, assignment)
    for tp, member in transferring.items():
        assignment[member].remove(tp)
    return _finish(members, assignment)


def _partitions_changing_owner(
    members: Sequence[MemberSubscription], assignment: Mapping[str, list[TopicPartition]]
) -> dict[TopicPartition, str]:
    # CooperativeStickyAssignor.computePartitionsTransferringOwnership: newly
    # assigned partitions that some member is giving up.
    added: dict[TopicPartition, str] = {}
    given_up: set[TopicPartition] = set()
    for m in members:
        owned = set(m.owned)
        assigned = assignment[m.member_id]
        added.update((tp, m.member_id) for tp in assigned if tp not in owned)
        given_up.update(owned.difference(assigned))
    return {tp: member for tp, member in added.items() if tp in given_up}
