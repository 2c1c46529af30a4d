"""The server-side assignors of KIP-848 consumer groups: ``uniform`` (the default) and ``range``.

Kafka 4's coordinator computes a consumer group's *target assignment* itself with one of
``group.consumer.assignors``; members name the one they want (``group.remote.assignor``). Both are the pure
functions of :mod:`lakelog.group.assignors`:

* ``uniform`` -- Kafka's ``UniformAssignor``: as balanced as subscriptions allow, and sticky (a partition stays
  with its current target owner unless balance requires a move). lakelog runs the sticky assignor with each
  member's current target as its owned partitions.
* ``range`` -- Kafka's server-side ``RangeAssignor``: per topic, contiguous ranges over members sorted by
  ``group.instance.id`` then member id, so co-partitioned topics land together.

The exact partition a tie goes to may differ from Kafka's own server-side assignors (no client sees how the
coordinator computed it); balance, stickiness and co-partitioning are the same. Pure.
"""

from __future__ import annotations

from typing import Mapping, Sequence

from lakelog.errors import UnsupportedAssignor
from lakelog.group.assignors import MemberSubscription, TopicPartition, range_assign, sticky_assign

UNIFORM, RANGE = "uniform", "range"
SERVER_ASSIGNORS = (UNIFORM, RANGE)  # group.consumer.assignors, the first is the default


def target_assignment(assignor: str, members: Sequence[MemberSubscription],
                      partitions_per_topic: Mapping[str, int]) -> dict[str, frozenset[TopicPartition]]:
    """``member_id -> partitions`` for every member; ``owned`` of each member is its current target."""
    counts = {t: n for t, n in partitions_per_topic.items() if n > 0}
    if assignor == UNIFORM:
        result = sticky_assign(members, counts)
    elif assignor == RANGE:
        result = range_assign(members, counts)
    else:
        raise UnsupportedAssignor(f"server assignor {assignor!r} is not one of {', '.join(SERVER_ASSIGNORS)}")
    return {m.member_id: frozenset(result.get(m.member_id, ())) for m in members}


def choose_assignor(requested: Sequence[str | None], default: str = UNIFORM) -> str:
    """The group's assignor: the one most members asked for (ties: the earlier in :data:`SERVER_ASSIGNORS`), or
    ``default`` when none asked (Kafka's ``ConsumerGroup.computePreferredServerAssignor``)."""
    votes = {name: sum(1 for r in requested if r == name) for name in SERVER_ASSIGNORS}
    best = max(SERVER_ASSIGNORS, key=lambda n: (votes[n], -SERVER_ASSIGNORS.index(n)))
    return best if votes[best] else default
