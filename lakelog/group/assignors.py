"""Kafka's consumer-group partition assignment strategies, as pure functions.

Each assignor takes the group's members (their subscriptions, static ids and
previously owned partitions) and the partition count of each topic, and
returns ``member_id -> sorted partitions`` exactly as the Java client's
assignor of the same name would:

* ``range`` -- ``RangeAssignor``: per topic, contiguous ranges;
* ``roundrobin`` -- ``RoundRobinAssignor``: all partitions dealt in turn;
* ``sticky`` -- ``StickyAssignor`` (``AbstractStickyAssignor``): balanced,
  keeping previous owners where possible;
* ``cooperative-sticky`` -- ``CooperativeStickyAssignor``: the sticky target
  minus partitions that change owner, which are handed over only in the
  follow-up rebalance.

Kafka's results depend in a few tie-breaks on the iteration order of Java
``HashMap``/``HashSet`` (e.g. which of several over-full members keeps the
extra partition).  To return the same answer as the Java client, these
functions reproduce that order from ``String.hashCode``/``TopicPartition.hashCode``,
taking ``members`` as the insertion order of Kafka's subscription map (the
JoinGroup member order).  Rack-aware assignment (KIP-881) is not modelled:
results equal Kafka's when consumers or brokers have no rack.

Deliberate departures from Kafka, each only where Kafka would produce an
invalid assignment or crash: owned partitions whose number does not exist are
dropped; the sticky fast path is taken only when every member's subscription
is identical (Kafka can misjudge a group whose first member subscribes to
nothing); a partition is never moved back to a previous-generation owner that
no longer subscribes to its topic.

Each strategy lives in a module of its own (:mod:`~lakelog.group.range_assignor`, ...); this one registers them
under Kafka's protocol names, chooses a group's protocol, and is where callers import them (with the
:mod:`~lakelog.group.partition_assignor` types) from. Everything here is pure and standard-library only.
"""

from __future__ import annotations

from collections.abc import Sequence

from lakelog.errors import InconsistentGroupProtocol
from lakelog.group.cooperative_sticky_assignor import cooperative_sticky_assign
from lakelog.group.java_order import _java_hash_map_order
from lakelog.group.partition_assignor import (DEFAULT_GENERATION, Assignment, Assignor, MemberSubscription,
                                              TopicPartition)
from lakelog.group.range_assignor import range_assign
from lakelog.group.round_robin_assignor import roundrobin_assign
from lakelog.group.sticky_assignor import sticky_assign

__all__ = [
    "DEFAULT_GENERATION",
    "TopicPartition",
    "MemberSubscription",
    "Assignment",
    "Assignor",
    "range_assign",
    "roundrobin_assign",
    "sticky_assign",
    "cooperative_sticky_assign",
    "ASSIGNORS",
    "get_assignor",
    "choose_protocol",
    "revoked_partitions",
]


# --------------------------------------------------------------------------
# Strategy lookup and selection
# --------------------------------------------------------------------------

ASSIGNORS: dict[str, Assignor] = {
    "range": range_assign,
    "roundrobin": roundrobin_assign,
    "sticky": sticky_assign,
    "cooperative-sticky": cooperative_sticky_assign,
}


def get_assignor(name: str) -> Assignor:
    """The assignor registered under Kafka's protocol ``name``; InconsistentGroupProtocol if unknown."""
    try:
        return ASSIGNORS[name]
    except (KeyError, TypeError):
        raise InconsistentGroupProtocol(
            f"unknown partition assignment strategy {name!r}; valid strategies are: {', '.join(ASSIGNORS)}"
        ) from None


def choose_protocol(preferences: Sequence[Sequence[str]]) -> str:
    """The group's protocol, chosen as Kafka's group coordinator does (``selectProtocol``).

    ``preferences`` holds each member's strategy names, most preferred first.
    Only strategies every member supports are candidates; each member votes
    for its most preferred candidate and the most votes win.  Ties go to the
    first in Java ``HashMap`` order of the names, as in Kafka's ``ClassicGroup``.
    Raises InconsistentGroupProtocol when the members share no strategy and
    ValueError for an empty group.
    """
    if not preferences:
        raise ValueError("cannot select a protocol for an empty group")
    if any(isinstance(p, str) for p in preferences):
        raise TypeError("each member's preferences must be a sequence of names, not a string")
    members = [list(dict.fromkeys(p)) for p in preferences]
    candidates = set(members[0]).intersection(*members[1:])
    if not candidates:
        raise InconsistentGroupProtocol(
            "members share no partition assignment strategy: " + "; ".join(", ".join(p) or "(none)" for p in members)
        )
    votes: dict[str, int] = {}
    for p in members:
        vote = next(name for name in p if name in candidates)
        votes[vote] = votes.get(vote, 0) + 1
    best = None
    for name in _java_hash_map_order(list(votes)):
        if best is None or votes[name] > votes[best]:  # Stream.max keeps the first of equals
            best = name
    return best


def revoked_partitions(previous: Assignment, new: Assignment) -> dict[str, list[TopicPartition]]:
    """Per member (of either assignment), the sorted partitions it held in ``previous`` but not in ``new``."""
    return {
        member: sorted(set(previous.get(member, ())).difference(new.get(member, ())))
        for member in dict.fromkeys([*previous, *new])
    }
