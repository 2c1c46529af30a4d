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

Everything here is pure and standard-library only.
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from lakelog.errors import InconsistentGroupProtocol

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


# --------------------------------------------------------------------------
# Java compatibility: string order and hash-based iteration order
# --------------------------------------------------------------------------

_MASK32 = 0xFFFFFFFF
_UTF16_UNITS = struct.Struct(">H").iter_unpack


def _jkey(s: str) -> bytes:
    """Sort key matching Java's ``String.compareTo`` (UTF-16 code units).

    Big-endian UTF-16 bytes compare exactly like the code-unit sequence, which
    differs from Python's code-point order only for astral characters.
    """
    return s.encode("utf-16-be", "surrogatepass")


def _java_string_hash(s: str) -> int:
    h = 0
    for (unit,) in _UTF16_UNITS(_jkey(s)):
        h = (31 * h + unit) & _MASK32
    return h


def _tp_hash(tp: TopicPartition) -> int:
    # TopicPartition.hashCode: 31 * (31 + partition) + topic.hashCode()
    return (31 * (31 + tp.partition) + _java_string_hash(tp.topic)) & _MASK32


def _bucket(h: int, capacity: int) -> int:
    return (h ^ (h >> 16)) & (capacity - 1)  # HashMap.hash, then index


def _grow(capacity: int, size: int) -> int:
    # A default HashMap/HashSet starts at 16 buckets and doubles once size
    # exceeds 3/4 of them; it never shrinks.
    while size > capacity * 3 // 4:
        capacity *= 2
    return capacity


def _java_hash_map_order(keys: Sequence[str]) -> list[str]:
    """Iteration order of a default ``java.util.HashMap`` filled with ``keys`` in order.

    Buckets in index order, insertion order within a bucket (the rare
    treeified bucket of 8+ colliding keys is not modelled).
    """
    capacity = _grow(16, len(keys))
    ranked = sorted((_bucket(_java_string_hash(k), capacity), i) for i, k in enumerate(keys))
    return [keys[i] for _, i in ranked]


class _JavaHashSet:
    """Just enough of ``java.util.HashSet<TopicPartition>`` to know what ``iterator().next()`` yields."""

    __slots__ = ("_rank", "_counter", "_capacity")

    def __init__(self) -> None:
        self._rank: dict[TopicPartition, int] = {}
        self._counter = 0
        self._capacity = 16

    def add(self, tp: TopicPartition) -> None:
        if tp not in self._rank:
            # A re-added element goes to the tail of its bucket; resizing keeps
            # the relative order inside a bucket, so (bucket, rank) is the order.
            self._rank[tp] = self._counter
            self._counter += 1
            self._capacity = _grow(self._capacity, len(self._rank))

    def discard(self, tp: TopicPartition) -> None:
        self._rank.pop(tp, None)

    def __bool__(self) -> bool:
        return bool(self._rank)

    def first(self) -> TopicPartition:
        cap = self._capacity
        return min(self._rank, key=lambda tp: (_bucket(_tp_hash(tp), cap), self._rank[tp]))


def _member_order_key(m: MemberSubscription) -> tuple:
    # AbstractPartitionAssignor.MemberInfo.compareTo: static members (with a
    # group.instance.id) first, ordered by instance id, so their assignment
    # survives member-id changes; then dynamic members by member id.
    if m.group_instance_id is not None:
        return (0, _jkey(m.group_instance_id), _jkey(m.member_id))
    return (1, _jkey(m.member_id), b"")


# --------------------------------------------------------------------------
# Shared input handling
# --------------------------------------------------------------------------


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


# --------------------------------------------------------------------------
# Range and round robin
# --------------------------------------------------------------------------


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


# --------------------------------------------------------------------------
# Sticky (AbstractStickyAssignor)
# --------------------------------------------------------------------------


def _previous_owners(
    order: Sequence[str], by_id: Mapping[str, MemberSubscription], ppt: Mapping[str, int]
) -> tuple[dict[str, list[TopicPartition]], set[TopicPartition]]:
    """Each member's still-assignable owned partitions, and those claimed twice in one generation.

    Mirrors ``allSubscriptionsEqual``: on conflicting claims the higher
    generation wins; equal generations invalidate the partition for everyone.
    """
    owned: dict[str, list[TopicPartition]] = {}
    claimed_twice: set[TopicPartition] = set()
    claimant: dict[TopicPartition, str] = {}
    for member_id in order:
        member = by_id[member_id]
        mine = owned[member_id] = []
        for tp in dict.fromkeys(member.owned):
            if not 0 <= tp.partition < ppt.get(tp.topic, 0):
                continue
            other = claimant.get(tp)
            if other is None:
                mine.append(tp)
            else:
                other_generation = by_id[other].generation
                if member.generation == other_generation:
                    claimed_twice.add(tp)
                    if tp in owned[other]:
                        owned[other].remove(tp)
                elif member.generation > other_generation:
                    mine.append(tp)
                    if tp in owned[other]:
                        owned[other].remove(tp)
                else:
                    continue  # the other member's newer claim stands
            claimant[tp] = member_id
    return owned, claimed_twice


def _constrained_assign(
    order: Sequence[str],
    ppt: Mapping[str, int],
    owned: Mapping[str, list[TopicPartition]],
    claimed_twice: set[TopicPartition],
) -> tuple[dict[str, list[TopicPartition]], dict[TopicPartition, str]]:
    """``ConstrainedAssignmentBuilder``: the fast path when every member has the same subscription.

    Returns the assignment and the partitions it gives to a member other than
    their previous owner (``partitionsTransferringOwnership``).
    """
    total = sum(ppt.values())
    min_quota, expected_over_min = divmod(total, len(order))
    max_quota = min_quota + (1 if expected_over_min else 0)
    over_min = 0
    assignment: dict[str, list[TopicPartition]] = {m: [] for m in order}
    kept: set[TopicPartition] = set()
    revoked: set[TopicPartition] = set()
    under_min: list[str] = []
    at_min: list[str] = []  # members that may still take one partition above min_quota

    # 1. Keep previously owned partitions up to the member's quota.
    for member in order:
        mine = sorted(owned[member], key=lambda tp: (tp.partition, _jkey(tp.topic)))
        mine = [tp for tp in mine if tp not in claimed_twice]
        if len(mine) < min_quota:
            keep = mine
            under_min.append(member)
        elif len(mine) >= max_quota and over_min < expected_over_min:
            over_min += 1
            if over_min == expected_over_min:
                at_min.clear()  # every slot above min_quota is taken
            keep = mine[:max_quota]
        else:
            keep = mine[:min_quota]
            if over_min < expected_over_min:
                at_min.append(member)
        assignment[member].extend(keep)
        kept.update(keep)
        revoked.update(mine[len(keep):])

    # 2. Deal the rest round robin: first up to min_quota, then one more each.
    unassigned = [
        TopicPartition(topic, p)
        for topic in sorted(ppt, key=_jkey)
        for p in range(ppt[topic])
        if TopicPartition(topic, p) not in kept
    ]
    under_min.sort(key=_jkey)
    at_min_queue = deque(sorted(at_min, key=_jkey))
    transferring: dict[TopicPartition, str] = {}
    cursor = 0  # position of Java's iterator over under_min
    for tp in unassigned:
        from_under_min = True
        if cursor < len(under_min):
            member = under_min[cursor]
            cursor += 1
        elif under_min:
            member = under_min[0]
            cursor = 1
        elif at_min_queue:
            member = at_min_queue.popleft()
            from_under_min = False
        else:
            raise RuntimeError("sticky assignment ran out of members with spare capacity")
        assignment[member].append(tp)
        if tp in revoked or tp in claimed_twice:
            transferring[tp] = member
        count = len(assignment[member])
        if count == min_quota and from_under_min:
            cursor -= 1
            del under_min[cursor]
            at_min_queue.append(member)
        elif count == max_quota:
            over_min += 1

    if under_min and (over_min != expected_over_min or any(len(assignment[m]) != min_quota for m in under_min)):
        raise RuntimeError("sticky assignment left a member below its minimum quota")
    return assignment, transferring


class _PartitionMovements:
    """``AbstractStickyAssignor.PartitionMovements``: net moves made during one general assignment."""

    def __init__(self) -> None:
        self._by_topic: dict[str, dict[tuple[str, str], _JavaHashSet]] = {}
        self._moves: dict[TopicPartition, tuple[str, str]] = {}

    def _remove_record(self, tp: TopicPartition) -> tuple[str, str]:
        pair = self._moves.pop(tp)
        topic_moves = self._by_topic[tp.topic]
        topic_moves[pair].discard(tp)
        if not topic_moves[pair]:
            del topic_moves[pair]
        if not topic_moves:
            del self._by_topic[tp.topic]
        return pair

    def _add_record(self, tp: TopicPartition, pair: tuple[str, str]) -> None:
        self._moves[tp] = pair
        self._by_topic.setdefault(tp.topic, {}).setdefault(pair, _JavaHashSet()).add(tp)

    def move(self, tp: TopicPartition, old: str, new: str) -> None:
        if tp in self._moves:
            src, _ = self._remove_record(tp)
            if src != new:  # a partition moving back home leaves no record
                self._add_record(tp, (src, new))
        else:
            self._add_record(tp, (old, new))

    def partition_to_move(self, tp: TopicPartition, old: str, new: str) -> TopicPartition:
        # Prefer undoing an earlier move of the same topic in the opposite
        # direction over moving a second partition (stickiness).
        if tp.topic not in self._by_topic:
            return tp
        if tp in self._moves:
            old = self._moves[tp][0]
        reverse = self._by_topic[tp.topic].get((new, old))
        return reverse.first() if reverse else tp


class _GeneralAssignmentBuilder:
    """``GeneralAssignmentBuilder``: sticky assignment when subscriptions differ."""

    def __init__(
        self,
        order: Sequence[str],
        by_id: Mapping[str, MemberSubscription],
        subs: Mapping[str, tuple[str, ...]],
        ppt: Mapping[str, int],
        owned: dict[str, list[TopicPartition]],
    ) -> None:
        self.order = order
        self.by_id = by_id
        self.subs = {m: frozenset(topics) for m, topics in subs.items()}
        self.ppt = ppt
        self.current = owned  # member -> partitions, mutated in place
        self.potential_consumers: dict[str, list[str]] = {t: [] for t in ppt}
        self.potential_topics: dict[str, list[str]] = {}
        for member in order:
            topics = [t for t in subs[member] if t in ppt]
            self.potential_topics[member] = topics
            for t in topics:
                self.potential_consumers[t].append(member)
        self.max_size = {m: sum(ppt[t] for t in topics) for m, topics in self.potential_topics.items()}
        self.owner = {tp: m for m, tps in owned.items() for tp in tps}
        sorted_topics = sorted(ppt, key=lambda t: (len(self.potential_consumers[t]), _jkey(t)))
        self.all_partitions = [TopicPartition(t, p) for t in sorted_topics for p in range(ppt[t])]
        self.sort_key = {m: _jkey(m) for m in order}
        self.in_play: set[str] = set(order)  # Kafka's sortedCurrentSubscriptions
        self.movements = _PartitionMovements()
        self.revocation_required = False

    def _by_load(self) -> list[str]:
        return sorted(self.in_play, key=lambda m: (len(self.current[m]), self.sort_key[m]))

    def build(self) -> dict[str, list[TopicPartition]]:
        previous = self._previous_generation_owners()
        assigned = self._keep_owned_partitions()
        unassigned = [tp for tp in self.all_partitions if tp not in assigned]
        self._balance(previous, unassigned)
        return self.current

    def _previous_generation_owners(self) -> dict[TopicPartition, tuple[str, int]]:
        # Claims from members older than the newest generation, newest first:
        # a partition is moved back to such an owner when that helps balance.
        max_generation = max([DEFAULT_GENERATION, *(self.by_id[m].generation for m in self.order)])
        previous: dict[TopicPartition, tuple[str, int]] = {}
        for member in self.order:
            generation = self.by_id[member].generation
            if generation < max_generation:
                for tp in self.by_id[member].owned:
                    if tp not in previous or generation > previous[tp][1]:
                        previous[tp] = (member, generation)
        return previous

    def _keep_owned_partitions(self) -> set[TopicPartition]:
        assigned: set[TopicPartition] = set()
        for member, tps in self.current.items():
            keep = []
            for tp in tps:
                if tp.topic not in self.subs[member]:
                    self.revocation_required = True
                else:
                    keep.append(tp)
                    assigned.add(tp)
            tps[:] = keep
        return assigned

    def _assign_to_least_loaded(self, tp: TopicPartition) -> None:
        for member in self._by_load():
            if tp.topic in self.subs[member]:
                self.current[member].append(tp)
                self.owner[tp] = member
                return

    def _can_participate(self, member: str) -> bool:
        tps = self.current[member]
        if len(tps) < self.max_size[member]:
            return True
        return any(len(self.potential_consumers[tp.topic]) >= 2 for tp in tps)

    def _balance(self, previous: dict[TopicPartition, tuple[str, int]], unassigned: list[TopicPartition]) -> None:
        initializing = not self.current[self._by_load()[-1]]
        for tp in unassigned:
            if self.potential_consumers[tp.topic]:
                self._assign_to_least_loaded(tp)

        # Only partitions with 2+ potential consumers, and members that could
        # still change, take part in the reassignment.
        fixed_topics = {t for t, consumers in self.potential_consumers.items() if len(consumers) < 2}
        reassignable = [tp for tp in self.all_partitions if tp.topic not in fixed_topics]
        reassignable_new = [tp for tp in unassigned if tp.topic not in fixed_topics]
        fixed: dict[str, list[TopicPartition]] = {}
        for member in self.order:
            if not self._can_participate(member):
                self.in_play.discard(member)
                fixed[member] = self.current.pop(member)

        before = {m: list(tps) for m, tps in self.current.items()}
        owner_before = dict(self.owner)
        if not self.revocation_required:
            # Try to balance by moving only the newly assigned partitions first.
            self._perform_reassignments(reassignable_new, previous)
        moved = self._perform_reassignments(reassignable, previous)

        # Keep the moves only if they improved balance over the sticky start.
        if not initializing and moved and _balance_score(self.current) >= _balance_score(before):
            self.current.clear()
            self.current.update(before)
            self.owner = owner_before
        self.current.update(fixed)

    def _is_balanced(self) -> bool:
        by_load = self._by_load()
        if len(self.current[by_load[0]]) >= len(self.current[by_load[-1]]) - 1:
            return True
        for member in by_load:
            count = len(self.current[member])
            if count == self.max_size[member]:
                continue
            mine = set(self.current[member])
            for topic in self.potential_topics[member]:
                for p in range(self.ppt[topic]):
                    tp = TopicPartition(topic, p)
                    if tp not in mine:
                        other = self.owner.get(tp)
                        if other in self.current and count + 1 < len(self.current[other]):
                            return False
        return True

    def _perform_reassignments(
        self, reassignable: list[TopicPartition], previous: dict[TopicPartition, tuple[str, int]]
    ) -> bool:
        performed = False
        while True:
            modified = False
            for tp in reassignable:
                if self._is_balanced():
                    break
                consumer = self.owner.get(tp)
                if consumer not in self.current:
                    continue
                size = len(self.current[consumer])
                prev_owner = previous.get(tp, (None, 0))[0]
                # Kafka also moves a partition back to an old owner that no longer
                # subscribes to its topic, making the assignment invalid; skip those.
                if (
                    prev_owner in self.current
                    and tp.topic in self.subs[prev_owner]
                    and size > len(self.current[prev_owner]) + 1
                ):
                    self._reassign(tp, prev_owner)
                    performed = modified = True
                    continue
                for other in self.potential_consumers[tp.topic]:
                    if other in self.current and size > len(self.current[other]) + 1:
                        new = next(m for m in self._by_load() if tp.topic in self.subs[m])
                        self._reassign(tp, new)
                        performed = modified = True
                        break
            if not modified:
                return performed

    def _reassign(self, tp: TopicPartition, new: str) -> None:
        tp = self.movements.partition_to_move(tp, self.owner[tp], new)
        old = self.owner[tp]
        self.movements.move(tp, old, new)
        self.current[old].remove(tp)
        self.current[new].append(tp)
        self.owner[tp] = new


def _balance_score(assignment: Mapping[str, list[TopicPartition]]) -> int:
    sizes = [len(tps) for tps in assignment.values()]
    return sum(abs(a - b) for i, a in enumerate(sizes) for b in sizes[i + 1:])


def _sticky(
    members: Sequence[MemberSubscription], partitions_per_topic: Mapping[str, int]
) -> tuple[dict[str, list[TopicPartition]], dict[TopicPartition, str] | None]:
    """``AbstractStickyAssignor.assignPartitions``: (assignment, partitions transferring ownership).

    The second item is None on the general path, where Kafka's cooperative
    assignor works the transfers out from the result instead.
    """
    subs = _subscriptions(members)
    if not members:
        return {}, {}
    ppt = _assignable_topics(subs, partitions_per_topic)
    by_id = {m.member_id: m for m in members}
    order = _java_hash_map_order([m.member_id for m in members])
    owned, claimed_twice = _previous_owners(order, by_id, ppt)
    if len({frozenset(topics) for topics in subs.values()}) == 1:
        return _constrained_assign(order, ppt, owned, claimed_twice)
    return _GeneralAssignmentBuilder(order, by_id, subs, ppt, owned).build(), None


def sticky_assign(members: Sequence[MemberSubscription], partitions_per_topic: Mapping[str, int]) -> Assignment:
    """Kafka's ``StickyAssignor`` (eager).

    As balanced as the subscriptions allow (member counts within one when
    every member subscribes to the same topics), keeping as many of each
    member's ``owned`` partitions as balance permits.  Owned partitions of
    topics the member no longer subscribes to, or that no longer exist, are
    dropped; of conflicting claims the highest ``generation`` wins, and a
    partition claimed by two members of the same generation is kept by neither.
    """
    assignment, _ = _sticky(members, partitions_per_topic)
    return _finish(members, assignment)


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
