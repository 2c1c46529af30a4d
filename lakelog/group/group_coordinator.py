"""The group coordinator: membership, generations and rebalances of consumer groups.

Kafka's classic group protocol (JoinGroup/SyncGroup/Heartbeat, KIP-62, KIP-345), with one change in the
spirit of KIP-848: the coordinator computes the assignment itself with the
assignors of :mod:`lakelog.group.assignors` (it knows every subscription and every
partition count), so a join returns the member's assignment directly and
there is no SyncGroup round trip.

Group states: ``Empty`` -> ``PreparingRebalance`` -> ``Stable`` (and ``Dead``
once deleted).  A rebalance starts when a member joins, leaves, misses its
session timeout, changes its subscription, or when a subscribed topic's
partition count changes (Kafka's triggers).  During a rebalance
heartbeats answer ``REBALANCE_IN_PROGRESS``; :meth:`join` blocks until every
member has rejoined or the rebalance timeout passed (members that did not
rejoin are removed), then bumps the generation and hands out assignments.

* Eager strategies (range, roundrobin, sticky): members revoke everything
  before rejoining, so no partition is ever owned by two members.
* cooperative-sticky: partitions that move are first withheld (revoked from
  their old owner, given to nobody) and the coordinator immediately starts a
  follow-up rebalance that hands them to their new owner.
* Static members (``group.instance.id``) that rejoin with a new member id
  within their session timeout take over the old member's assignment without
  a rebalance; the old member id is fenced (``FENCED_INSTANCE_ID``).

Offset commits are validated against membership (:meth:`validate_commit`):
unknown members, stale generations and partitions not owned in the current
generation are refused, and so are commits of a member that already rejoined
a pending rebalance (``REBALANCE_IN_PROGRESS``; before rejoining, a member may
still commit what it owns, as Kafka accepts commits in PreparingRebalance).
Group metadata is saved through an optional :class:`GroupStore` after every
completed rebalance and restored on start.

Thread-safe: one lock and condition guard all groups; :meth:`join` blocks
(use it from a worker thread, never on an event loop).  Time comes from an
injectable ``clock`` (seconds) so tests can drive expiry deterministically.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping, Protocol, Sequence

from lakelog.group.assignors import (ASSIGNORS, MemberSubscription, TopicPartition, choose_protocol, get_assignor)
from lakelog.group.group_id import validate_group_id
from lakelog.storage.topic_name import validate_topic_name
from lakelog.errors import (FencedInstanceId, GroupIdNotFound, IllegalGeneration, InconsistentGroupProtocol,
                            InvalidRequest, InvalidSessionTimeout, NonEmptyGroup,
                            RebalanceInProgress, UnknownMemberId)

log = logging.getLogger(__name__)
INT32_MAX = 2**31 - 1  # Kafka's timeouts are int32 milliseconds

EMPTY, PREPARING_REBALANCE, STABLE, DEAD = "Empty", "PreparingRebalance", "Stable", "Dead"
COOPERATIVE = "cooperative-sticky"


@dataclass(frozen=True)
class CoordinatorConfig:
    """Broker-side group settings, with Kafka's names and defaults except where noted."""

    group_min_session_timeout_ms: int = 6_000
    group_max_session_timeout_ms: int = 1_800_000
    group_initial_rebalance_delay_ms: int = 0  # Kafka: 3000; 0 keeps a lone member's first join immediate
    metadata_check_interval_ms: int = 1_000   # how often subscribed topics' partition counts are re-read


@dataclass
class Member:
    """One member of a group as the coordinator tracks it."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    topics: tuple[str, ...]
    protocols: tuple[str, ...]
    session_timeout_ms: int
    rebalance_timeout_ms: int
    last_heartbeat: float
    assignment: tuple[TopicPartition, ...] = ()
    rejoined: bool = False  # has joined in the current rebalance round

    def to_dict(self) -> dict:
        return {"member_id": self.member_id, "group_instance_id": self.group_instance_id,
                "client_id": self.client_id, "topics": list(self.topics), "protocols": list(self.protocols),
                "session_timeout_ms": self.session_timeout_ms, "rebalance_timeout_ms": self.rebalance_timeout_ms,
                "assignment": [[tp.topic, tp.partition] for tp in self.assignment]}

    @classmethod
    def from_dict(cls, d: Mapping, now: float) -> "Member":
        return cls(d["member_id"], d.get("group_instance_id"), d.get("client_id", ""), tuple(d["topics"]),
                   tuple(d["protocols"]), int(d["session_timeout_ms"]), int(d["rebalance_timeout_ms"]), now,
                   tuple(TopicPartition(t, int(p)) for t, p in d.get("assignment", [])))


@dataclass
class Group:
    """A consumer group's membership and generation."""

    group_id: str
    state: str = EMPTY
    generation: int = 0
    protocol: str | None = None
    leader: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    rebalance_deadline: float = 0.0
    partition_counts: dict[str, int] = field(default_factory=dict)
    metadata_checked: float = 0.0

    def to_dict(self) -> dict:
        return {"group_id": self.group_id, "state": self.state, "generation": self.generation,
                "protocol": self.protocol, "leader": self.leader,
                "members": [m.to_dict() for m in self.members.values()],
                "partition_counts": dict(self.partition_counts)}

    @property
    def subscribed_topics(self) -> set[str]:
        return {t for m in self.members.values() for t in m.topics}


@dataclass(frozen=True)
class JoinResult:
    """What a member learns from a completed join."""

    member_id: str
    generation: int
    protocol: str
    leader: str
    members: list[str]
    assignment: list[TopicPartition]


@dataclass(frozen=True)
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    topics: list[str]
    assignment: list[TopicPartition]


@dataclass(frozen=True)
class GroupDescription:
    group_id: str
    state: str
    protocol: str | None
    generation: int
    leader: str | None
    members: list[MemberDescription]


class GroupStore(Protocol):
    """Where group metadata lives (``__consumer_offsets`` in the front)."""

    def save_group(self, group_id: str, metadata: dict | None) -> None: ...

    def load_groups(self) -> dict[str, dict]: ...


class GroupCoordinator:
    """All consumer groups of one front process."""

    def __init__(self, *, partition_counts: Callable[[Iterable[str]], Mapping[str, int]],
                 store: GroupStore | None = None, config: CoordinatorConfig | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._partition_counts = partition_counts
        self._store = store
        self.config = config or CoordinatorConfig()
        self._clock = clock
        self._cv = threading.Condition()
        self._groups: dict[str, Group] = {}
        if store is not None:
            now = clock()
            for gid, md in store.load_groups().items():
                g = self._groups[gid] = self._restore(gid, md, now)
                if g.members and self._unassigned(g):
                    # saved between a cooperative round and its follow-up: hand the withheld partitions out
                    with self._cv:
                        self._prepare_rebalance(g, "restored with unassigned partitions")

    # -- persistence -----------------------------------------------------------------------
    @staticmethod
    def _restore(gid: str, md: Mapping, now: float) -> Group:
        g = Group(gid, generation=int(md.get("generation", 0)), protocol=md.get("protocol"),
                  leader=md.get("leader"), partition_counts=dict(md.get("partition_counts", {})))
        for m in md.get("members", []):
            member = Member.from_dict(m, now)  # restored members get a fresh session to reappear
            g.members[member.member_id] = member
        g.state = STABLE if g.members else EMPTY
        return g

    @staticmethod
    def _unassigned(g: Group) -> bool:
        owned = {tp for m in g.members.values() for tp in m.assignment}
        return any(TopicPartition(t, p) not in owned
                   for t in g.subscribed_topics for p in range(g.partition_counts.get(t, 0)))

    def _save(self, g: Group) -> None:
        if self._store is not None:
            self._store.save_group(g.group_id, None if g.state == DEAD else g.to_dict())

    # -- helpers --------------------------------------------------------------------------------
    def _group(self, group_id: str, create: bool = False) -> Group:
        validate_group_id(group_id)
        g = self._groups.get(group_id)
        if g is None or g.state == DEAD:
            if not create:
                raise GroupIdNotFound(f"group {group_id} does not exist")
            g = self._groups[group_id] = Group(group_id)
        return g

    def _member(self, g: Group, member_id: str, group_instance_id: str | None = None) -> Member:
        m = g.members.get(member_id)
        if m is None:
            if group_instance_id is not None and any(x.group_instance_id == group_instance_id
                                                     for x in g.members.values()):
                raise FencedInstanceId(f"member {member_id} of group {g.group_id} was fenced by a newer member "
                                       f"with group.instance.id {group_instance_id}")
            raise UnknownMemberId(f"member {member_id} is not a member of group {g.group_id} "
                                  f"(generation {g.generation})")
        return m

    def _prepare_rebalance(self, g: Group, reason: str) -> None:
        now = self._clock()
        if g.state != PREPARING_REBALANCE:
            g.state = PREPARING_REBALANCE
            for m in g.members.values():
                m.rejoined = False
            timeout = max((m.rebalance_timeout_ms for m in g.members.values()), default=0) / 1000
            delay = self.config.group_initial_rebalance_delay_ms / 1000 if g.generation == 0 else 0
            g.rebalance_deadline = now + max(timeout, delay)
        log.info("group %s: rebalance (generation %d): %s", g.group_id, g.generation, reason)
        self._cv.notify_all()

    def _maybe_complete(self, g: Group) -> None:
        if g.state != PREPARING_REBALANCE:
            return
        now = self._clock()
        pending = [m for m in g.members.values() if not m.rejoined]
        if pending and now < g.rebalance_deadline:
            return
        for m in pending:  # did not rejoin within the rebalance timeout
            del g.members[m.member_id]
        self._complete(g)

    def _complete(self, g: Group) -> None:
        now = self._clock()
        if not g.members:
            g.state, g.generation, g.protocol, g.leader = EMPTY, g.generation + 1, None, None
            g.partition_counts = {}
            self._save(g)
            self._cv.notify_all()
            return
        members = list(g.members.values())
        g.protocol = choose_protocol([m.protocols for m in members])
        topics = sorted({t for m in members for t in m.topics})
        counts = dict(self._partition_counts(topics))
        g.partition_counts = {t: counts.get(t, 0) for t in topics}
        subs = [MemberSubscription(m.member_id, m.topics, m.group_instance_id, m.assignment, g.generation)
                for m in members]
        assignment = get_assignor(g.protocol)(subs, {t: n for t, n in counts.items() if n > 0})
        g.generation += 1
        if g.leader not in g.members:
            g.leader = members[0].member_id
        withheld = False
        if g.protocol == COOPERATIVE:
            target = get_assignor("sticky")(subs, {t: n for t, n in counts.items() if n > 0})
            withheld = any(set(target.get(m.member_id, [])) != set(assignment.get(m.member_id, []))
                           for m in members)
        for m in members:
            m.assignment = tuple(assignment.get(m.member_id, []))
            m.rejoined = True
            m.last_heartbeat = now
        g.state = STABLE
        g.metadata_checked = now
        self._save(g)
        if withheld:  # cooperative: hand the revoked partitions over in a follow-up round
            self._prepare_rebalance(g, "cooperative follow-up")
        self._cv.notify_all()

    def _expire(self, g: Group) -> None:
        now = self._clock()
        # members waiting in a join are not heartbeating: their session is paused until the round ends
        candidates = [m for m in g.members.values() if not (g.state == PREPARING_REBALANCE and m.rejoined)]
        expired = [m for m in candidates if now - m.last_heartbeat > m.session_timeout_ms / 1000]
        if expired:
            for m in expired:
                del g.members[m.member_id]
            self._prepare_rebalance(g, f"session timeout of {', '.join(m.member_id for m in expired)}")
        if g.state == STABLE and g.members and now - g.metadata_checked >= self.config.metadata_check_interval_ms / 1000:
            g.metadata_checked = now
            topics = sorted(g.subscribed_topics)
            counts = dict(self._partition_counts(topics))
            if any(counts.get(t, 0) != g.partition_counts.get(t, 0) for t in topics):
                self._prepare_rebalance(g, "partition count change")
        self._maybe_complete(g)

    def tick(self) -> None:
        """Expire sessions, finish timed-out rebalances, detect partition changes (call every ~100 ms)."""
        with self._cv:
            for g in list(self._groups.values()):
                if g.state != DEAD:
                    self._expire(g)

    # -- protocol -----------------------------------------------------------------------------
    def join(self, group_id: str, *, topics: Sequence[str], protocols: Sequence[str] = ("range",),
             member_id: str | None = None, group_instance_id: str | None = None, client_id: str = "lakelog",
             session_timeout_ms: int = 45_000, rebalance_timeout_ms: int = 300_000,
             timeout_s: float | None = None) -> JoinResult:
        """JoinGroup: (re)join and wait for the rebalance to complete; returns this member's assignment."""
        lo, hi = self.config.group_min_session_timeout_ms, self.config.group_max_session_timeout_ms
        if not lo <= session_timeout_ms <= hi:
            raise InvalidSessionTimeout(f"session.timeout.ms {session_timeout_ms} is outside [{lo}, {hi}]")
        if not 0 < rebalance_timeout_ms <= INT32_MAX:
            raise InvalidRequest(f"rebalance.timeout.ms must be in (0, {INT32_MAX}], got {rebalance_timeout_ms}")
        protocols = tuple(protocols)
        bad = [p for p in protocols if p not in ASSIGNORS]
        if not protocols or bad:
            raise InconsistentGroupProtocol(f"unknown partition.assignment.strategy {bad or protocols!r}; "
                                            f"supported: {', '.join(ASSIGNORS)}")
        if not topics or not all(isinstance(t, str) and t for t in topics):
            raise InvalidRequest("a member must subscribe to at least one topic")
        for t in topics:
            validate_topic_name(t)
        validate_group_id(group_id)
        with self._cv:
            g = self._groups.get(group_id)
            if g is None or g.state == DEAD:
                g = Group(group_id)  # registered below, once the join is accepted: a refused join creates nothing
            else:
                self._expire(g)
            others = [m.protocols for mid, m in g.members.items() if mid != member_id]
            if others and not set(protocols) & set.intersection(*(set(p) for p in others)):
                raise InconsistentGroupProtocol(
                    f"strategies {list(protocols)} share none with group {group_id}'s members")
            now = self._clock()
            m = g.members.get(member_id) if member_id else None
            if member_id and m is None and group_instance_id is None:
                raise UnknownMemberId(f"member {member_id} is not a member of group {group_id}")
            self._groups[group_id] = g
            rebalance = False
            if m is None and group_instance_id is not None:
                old = next((x for x in g.members.values() if x.group_instance_id == group_instance_id), None)
                if old is not None:  # static member returning: take over its identity and assignment
                    del g.members[old.member_id]
                    m = Member(member_id or f"{group_instance_id}-{uuid.uuid4().hex[:12]}", group_instance_id,
                               client_id, tuple(topics), protocols, session_timeout_ms, rebalance_timeout_ms, now,
                               old.assignment, rejoined=old.rejoined)
                    g.members[m.member_id] = m
                    if g.leader == old.member_id:
                        g.leader = m.member_id
                    if tuple(old.topics) != tuple(topics):
                        rebalance = True
                    self._save(g)
            if m is None:
                m = Member(f"{client_id}-{uuid.uuid4().hex[:12]}", group_instance_id, client_id, tuple(topics),
                           protocols, session_timeout_ms, rebalance_timeout_ms, now)
                g.members[m.member_id] = m
                rebalance = True
            else:
                if tuple(m.topics) != tuple(topics) or m.protocols != protocols:
                    rebalance = True
                m.topics, m.protocols = tuple(topics), protocols
                m.session_timeout_ms, m.rebalance_timeout_ms = session_timeout_ms, rebalance_timeout_ms
                m.last_heartbeat = now
            if g.state == EMPTY:
                rebalance = True
            if rebalance:
                self._prepare_rebalance(g, f"member {m.member_id} joined")
            if g.state == PREPARING_REBALANCE:
                m.rejoined = True
                self._maybe_complete(g)
            deadline = None if timeout_s is None else now + timeout_s
            my_id = m.member_id
            while g.state == PREPARING_REBALANCE and my_id in g.members and g.members[my_id].rejoined:
                remaining = g.rebalance_deadline - self._clock()
                if deadline is not None:
                    remaining = min(remaining, deadline - self._clock())
                if remaining <= 0:
                    self._maybe_complete(g)
                    if deadline is not None and self._clock() >= deadline and g.state == PREPARING_REBALANCE:
                        raise RebalanceInProgress(f"group {group_id} is still rebalancing; join again")
                    continue
                self._cv.wait(min(remaining, 0.1))
                self._expire(g)
            if my_id not in g.members:
                raise UnknownMemberId(f"member {my_id} was removed from group {group_id} during the rebalance")
            m = g.members[my_id]
            return JoinResult(my_id, g.generation, g.protocol or protocols[0], g.leader or my_id,
                              list(g.members), sorted(m.assignment))

    def heartbeat(self, group_id: str, member_id: str, generation: int, group_instance_id: str | None = None) -> None:
        """Keep the session alive; raises ``REBALANCE_IN_PROGRESS`` when the member must rejoin."""
        with self._cv:
            g = self._group(group_id)
            self._expire(g)
            m = self._member(g, member_id, group_instance_id)
            m.last_heartbeat = self._clock()
            if g.state == PREPARING_REBALANCE:
                raise RebalanceInProgress(f"group {group_id} is rebalancing (generation {g.generation}); rejoin")
            if generation != g.generation:
                raise IllegalGeneration(f"member {member_id} of group {group_id} is at generation {generation}, "
                                        f"the group at {g.generation}")

    def leave(self, group_id: str, member_id: str) -> None:
        """LeaveGroup: remove the member now (no session timeout wait) and rebalance the rest."""
        with self._cv:
            g = self._group(group_id)
            self._member(g, member_id)
            del g.members[member_id]
            self._prepare_rebalance(g, f"member {member_id} left")
            self._maybe_complete(g)

    def validate_commit(self, group_id: str, member_id: str | None, generation: int,
                        partitions: Iterable[TopicPartition], group_instance_id: str | None = None) -> None:
        """Refuse offset commits from unknown members, stale generations or for partitions not owned; a static
        member's id replaced by a newer instance of its ``group_instance_id`` gets ``FENCED_INSTANCE_ID``."""
        with self._cv:
            g = self._groups.get(group_id)
            if g is not None:
                self._expire(g)
            if g is None or g.state == DEAD or not g.members:
                if member_id:
                    raise UnknownMemberId(f"member {member_id} is not a member of group {group_id}")
                return  # a simple (group-less) commit, like assign() + commitSync in Kafka
            if not member_id:
                raise UnknownMemberId(f"group {group_id} has active members; a commit must name its member id "
                                      f"and generation")
            m = self._member(g, member_id, group_instance_id)
            if generation != g.generation:
                raise IllegalGeneration(f"commit from member {member_id} of group {group_id} at generation "
                                        f"{generation}; the group is at {g.generation}")
            if g.state == PREPARING_REBALANCE and m.rejoined:
                # Kafka's CompletingRebalance case: the member already rejoined and awaits its new assignment;
                # members that have not rejoined yet may still commit what they own (before revoking it)
                raise RebalanceInProgress(f"member {member_id} of group {group_id} has rejoined the rebalance "
                                          f"of generation {g.generation}; commit after it completes")
            owned = set(m.assignment)
            foreign = sorted(tp for tp in partitions if tp not in owned)
            if foreign:
                raise IllegalGeneration(f"member {member_id} does not own {', '.join(map(str, foreign))} in "
                                        f"generation {g.generation} of group {group_id}")

    # -- admin ----------------------------------------------------------------------------------
    def describe(self, group_id: str) -> GroupDescription:
        with self._cv:
            g = self._group(group_id)
            self._expire(g)
            return GroupDescription(g.group_id, g.state, g.protocol, g.generation, g.leader, [
                MemberDescription(m.member_id, m.group_instance_id, m.client_id, list(m.topics),
                                  sorted(m.assignment)) for m in g.members.values()])

    def list_groups(self) -> list[tuple[str, str]]:
        """(group id, state) of every group with members or a generation."""
        with self._cv:
            return sorted((g.group_id, g.state) for g in self._groups.values() if g.state != DEAD)

    def delete_group(self, group_id: str) -> None:
        """Delete an empty group's metadata (``NON_EMPTY_GROUP`` while it has members)."""
        with self._cv:
            g = self._group(group_id)
            self._expire(g)
            if g.members:
                raise NonEmptyGroup(f"group {group_id} still has {len(g.members)} members")
            g.state = DEAD
            self._save(g)
            del self._groups[group_id]
