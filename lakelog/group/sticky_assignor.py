"""Kafka's ``StickyAssignor`` and the ``AbstractStickyAssignor`` it shares with the cooperative one: as balanced
as the subscriptions allow, keeping as many of each member's owned partitions as balance permits.

The sticky fast path is taken only when every member's subscription is identical (Kafka can misjudge a group whose
first member subscribes to nothing); a partition is never moved back to a previous-generation owner that no longer
subscribes to its topic.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence

from lakelog.group.java_order import _java_hash_map_order, _JavaHashSet, _jkey
from lakelog.group.partition_assignor import (DEFAULT_GENERATION, Assignment, MemberSubscription, TopicPartition,
                                              _assignable_topics, _finish, _subscriptions)


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
