"""A group on KIP-848's consumer protocol (ConsumerGroupHeartbeat): Kafka 4's ``ConsumerGroup``.

The coordinator assigns. Every change of a subscription, of membership or of a subscribed topic's partition
count bumps the **group epoch**; the coordinator then computes a new **target assignment** with the group's
server-side assignor (:mod:`lakelog.group.server_assignors`) and each member **reconciles** towards its target
on its own heartbeats, with no global barrier (:func:`reconcile`, Kafka's ``CurrentAssignmentBuilder``):

* partitions the member owns but its target does not are *revoked* first: the member stays at its epoch in
  ``unrevoked_partitions`` until a heartbeat no longer reports them;
* partitions of its target are *assigned* only once no other member owns them or still has to revoke them
  (until then the member is ``unreleased_partitions`` and gets them on a later heartbeat).

So no partition ever has two owners. Members that joined with the classic protocol (JoinGroup) sit in the same
group (``classic`` set): they are served the same reconciliation through JoinGroup/SyncGroup, as in Kafka 4.

Group states, as Kafka's ``ConsumerGroupState``: ``Empty``, ``Assigning`` (the target lags the group epoch),
``Reconciling`` (some member is not at the target yet), ``Stable``; ``Dead`` once deleted. Not thread-safe:
the coordinator's lock guards it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable, Iterable

from lakelog.group.assignors import TopicPartition

CONSUMER = "consumer"
EMPTY, ASSIGNING, RECONCILING, STABLE, DEAD = "Empty", "Assigning", "Reconciling", "Stable", "Dead"
# member states (Kafka's MemberState)
MEMBER_STABLE, UNREVOKED, UNRELEASED = "stable", "unrevoked_partitions", "unreleased_partitions"
LEAVE_EPOCH, STATIC_LEAVE_EPOCH = -1, -2

Partitions = frozenset[TopicPartition]


@dataclass(frozen=True)
class ClassicProtocol:
    """What a member that joined with JoinGroup sent: its session timeout and (name, metadata) protocols."""

    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]

    @property
    def name(self) -> str:
        return self.protocols[0][0]


@dataclass(frozen=True)
class ConsumerMember:
    """A consumer-group member (immutable: every change is a new value, as Kafka's builder)."""

    member_id: str
    instance_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rack_id: str | None = None
    member_epoch: int = 0
    previous_epoch: int = 0
    state: str = MEMBER_STABLE
    subscribed: tuple[str, ...] = ()
    server_assignor: str | None = None
    rebalance_timeout_ms: int = 300_000
    session_timeout_ms: int = 45_000
    assigned: Partitions = frozenset()
    pending_revocation: Partitions = frozenset()
    classic: ClassicProtocol | None = None
    subscribed_regex: str | None = None  # KIP-848's SubscribedTopicRegex, resolved by the group

    @property
    def owned(self) -> Partitions:
        """Partitions this member may still hold: assigned plus those it has to revoke."""
        return self.assigned | self.pending_revocation


@dataclass
class ConsumerGroup:
    """A consumer group: members, epochs, the target assignment and the partition counts it was computed for."""

    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    target: dict[str, Partitions] = field(default_factory=dict)
    partition_counts: dict[str, int] = field(default_factory=dict)
    resolved: dict[str, frozenset[str]] = field(default_factory=dict)  # members' regexes -> the topics they match
    assignor: str | None = None
    session_deadlines: dict[str, float] = field(default_factory=dict)  # member id -> monotonic seconds
    revocation_deadlines: dict[str, float] = field(default_factory=dict)
    metadata_checked: float = 0.0
    type: str = CONSUMER

    @property
    def state(self) -> str:
        if not self.members:
            return EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ASSIGNING
        if any(m.member_epoch != self.assignment_epoch or m.state != MEMBER_STABLE for m in self.members.values()):
            return RECONCILING
        return STABLE

    @property
    def is_empty(self) -> bool:
        return not self.members

    def topics_of(self, member: ConsumerMember) -> tuple[str, ...]:
        """The topics ``member`` subscribes to: its names, and what its regex resolved to."""
        if not member.subscribed_regex:
            return member.subscribed
        matched = self.resolved.get(member.subscribed_regex, frozenset())
        return tuple(dict.fromkeys((*member.subscribed, *sorted(matched))))

    def subscribed_topics(self) -> set[str]:
        return {t for m in self.members.values() for t in self.topics_of(m)}

    def regexes(self) -> set[str]:
        return {m.subscribed_regex for m in self.members.values() if m.subscribed_regex}

    def put(self, member: ConsumerMember) -> None:
        old = self.members.get(member.member_id)
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id
        if old is not None and old.subscribed_regex not in (None, member.subscribed_regex):
            self._forget_unused_regexes()

    def remove(self, member_id: str) -> ConsumerMember | None:
        member = self.members.pop(member_id, None)
        if member is not None and member.instance_id is not None \
                and self.static_members.get(member.instance_id) == member_id:
            del self.static_members[member.instance_id]
        self.target.pop(member_id, None)
        self.session_deadlines.pop(member_id, None)
        self.revocation_deadlines.pop(member_id, None)
        self._forget_unused_regexes()
        return member

    def _forget_unused_regexes(self) -> None:
        """Drop resolutions no member subscribes with any more: one brought back later is resolved anew."""
        used = self.regexes()
        for regex in [r for r in self.resolved if r not in used]:
            del self.resolved[regex]

    def owner_epochs(self) -> dict[TopicPartition, int]:
        """Partition -> epoch of the member that owns it or still has to revoke it (Kafka's partition epochs)."""
        out: dict[TopicPartition, int] = {}
        for m in self.members.values():
            for tp in m.owned:
                out[tp] = m.member_epoch
        return out

    def all_classic_except(self, member_id: str) -> bool:
        return all(m.classic is not None for mid, m in self.members.items() if mid != member_id)

    def waiting_on_unreleased(self, member: ConsumerMember) -> bool:
        """Whether a partition of ``member``'s target is still held by another member."""
        owners = {tp for mid, m in self.members.items() if mid != member.member_id for tp in m.owned}
        return any(tp in owners for tp in self.target.get(member.member_id, frozenset()) - member.assigned)


def reconcile(member: ConsumerMember, target_epoch: int, target: Partitions, owned: Iterable[TopicPartition] | None,
              owner_epoch: Callable[[TopicPartition], int]) -> ConsumerMember:
    """The member's next state towards ``target`` at ``target_epoch`` (Kafka's ``CurrentAssignmentBuilder``).

    ``owned`` is what the member reported holding (None: not reported, so it is assumed to hold everything it
    was given); ``owner_epoch(tp)`` is the epoch of the member currently holding ``tp``, -1 if none.
    """
    reported = None if owned is None else frozenset(owned)

    def still_owns(revoking: Partitions) -> bool:
        return reported is None or bool(reported & revoking)

    if member.state == MEMBER_STABLE:
        if member.member_epoch == target_epoch:
            return member
        return _next(member, member.member_epoch, target_epoch, target, still_owns, owner_epoch)
    if member.state == UNREVOKED:
        if still_owns(member.pending_revocation):
            return member
        return _next(member, member.member_epoch + 1, target_epoch, target, still_owns, owner_epoch)
    return _next(member, member.member_epoch, target_epoch, target, still_owns, owner_epoch)  # unreleased


def _next(member: ConsumerMember, epoch: int, target_epoch: int, target: Partitions,
          still_owns: Callable[[Partitions], bool], owner_epoch: Callable[[TopicPartition], int]) -> ConsumerMember:
    kept = member.assigned & target
    revoking = member.assigned - kept
    wanted = target - kept
    free = frozenset(tp for tp in wanted if owner_epoch(tp) == -1)
    unreleased = len(free) < len(wanted)
    if revoking and still_owns(revoking):
        return replace(member, state=UNREVOKED, previous_epoch=member.member_epoch, member_epoch=epoch,
                       assigned=kept, pending_revocation=revoking)
    return replace(member, state=UNRELEASED if unreleased else MEMBER_STABLE, previous_epoch=member.member_epoch,
                   member_epoch=target_epoch, assigned=kept | free, pending_revocation=frozenset())
