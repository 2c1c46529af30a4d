"""A group on Kafka's classic protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup): Kafka's ``ClassicGroup``.

The coordinator never looks inside a member's protocol metadata or assignment: it picks a protocol every member
supports (each member votes for its most preferred candidate, the most votes win), elects one member as leader,
hands the leader every member's metadata for that protocol, and relays the leader's assignment byte for byte.
So any protocol type (``consumer``, ``connect``, ``sr``, ...) and any protocol name is served.

States, as Kafka's ``ClassicGroupState``::

    Empty --join--> PreparingRebalance --all joined / timeout--> CompletingRebalance --leader's sync--> Stable
      ^                     ^                                            |                               |
      +-- last member gone -+------------ join, leave, expiry -----------+-------------------------------+

``Dead`` is a deleted group. This module holds the group's data and the rules that are pure (which protocols
are candidates, who is leader, which members still have to join); the transitions and timers are the
coordinator's (:mod:`lakelog.group.group_coordinator`). Not thread-safe: the coordinator's lock guards it.
"""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass, field

from lakelog.errors import FencedInstanceId
from lakelog.group.assignors import choose_protocol

EMPTY, PREPARING_REBALANCE, COMPLETING_REBALANCE, STABLE, DEAD = (
    "Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead")
CLASSIC = "classic"
# Kafka's ClassicGroupState.validPreviousStates of PreparingRebalance: where a rebalance may start.
CAN_REBALANCE_FROM = (STABLE, COMPLETING_REBALANCE, EMPTY)


@dataclass(frozen=True)
class JoinedMember:
    """One member as the leader's JoinGroup answer lists it."""

    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True)
class JoinResponse:
    """A JoinGroup answer (``error`` None on success)."""

    error: Exception | None
    member_id: str
    generation: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    skip_assignment: bool = False
    members: tuple[JoinedMember, ...] = ()


@dataclass(frozen=True)
class SyncResponse:
    """A SyncGroup answer (``error`` None on success)."""

    error: Exception | None
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass
class ClassicMember:
    """A member on the classic protocol. ``protocols`` are (name, metadata) by the member's preference."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    assignment: bytes = b""
    join_future: "Future[JoinResponse] | None" = None
    sync_future: "Future[SyncResponse] | None" = None
    is_new: bool = False
    heartbeat_deadline: float | None = None  # monotonic seconds; None: no expiry scheduled

    @property
    def awaiting_join(self) -> bool:
        return self.join_future is not None

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_future is not None

    def has_satisfied_heartbeat(self) -> bool:
        """Kafka's rule: a new member can expire while it waits in a join; others waiting do not."""
        return not self.is_new and (self.awaiting_join or self.awaiting_sync)

    def protocol_names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.protocols)

    def metadata(self, protocol: str | None) -> bytes:
        return next((md for name, md in self.protocols if name == protocol), b"")

    def matches(self, protocols: tuple[tuple[str, bytes], ...]) -> bool:
        return tuple(self.protocols) == tuple(protocols)


@dataclass
class ClassicGroup:
    """A classic group's state. ``members`` keeps join order (the leader of an empty group is the first)."""

    group_id: str
    state: str = EMPTY
    previous_state: str = EMPTY
    generation: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str | None = None
    members: dict[str, ClassicMember] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # group.instance.id -> member id
    pending_members: dict[str, float] = field(default_factory=dict)  # member id -> expiry (MEMBER_ID_REQUIRED)
    pending_sync: set[str] = field(default_factory=set)
    new_member_added: bool = False
    join_deadline: float | None = None
    initial_delay_ms: int = 0  # the initial rebalance's current delay, and what is left of its total
    initial_remaining_ms: int | None = None  # not None: the join deadline is the initial rebalance's
    sync_deadline: float | None = None
    type: str = CLASSIC

    # -- membership -------------------------------------------------------------------------------
    def add(self, member: ClassicMember) -> None:
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader is None:
            self.leader = member.member_id
        self.members[member.member_id] = member
        self.pending_members.pop(member.member_id, None)

    def remove(self, member_id: str) -> ClassicMember | None:
        member = self.members.pop(member_id, None)
        if member is not None and member.group_instance_id is not None:
            self.static_members.pop(member.group_instance_id, None)
        if self.leader == member_id:
            self.leader = next(iter(self.members), None)
        self.pending_members.pop(member_id, None)
        self.pending_sync.discard(member_id)
        return member

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> ClassicMember:
        """Give ``instance_id``'s member a new member id (KIP-345); a join or sync the old id waits in is
        answered ``FENCED_INSTANCE_ID``."""
        member = self.members.pop(old_id)
        fenced = FencedInstanceId(f"member {old_id} with group.instance.id {instance_id} was replaced by {new_id}")
        if member.join_future is not None:
            member.join_future.set_result(JoinResponse(fenced, old_id, leader=""))
            member.join_future = None
        if member.sync_future is not None:
            member.sync_future.set_result(SyncResponse(fenced))
            member.sync_future = None
        member.member_id = new_id
        self.members[new_id] = member
        if self.leader == old_id:
            self.leader = new_id
        self.static_members[instance_id] = new_id
        self.pending_sync.discard(old_id)
        return member

    @property
    def num_awaiting_join(self) -> int:
        return sum(1 for m in self.members.values() if m.awaiting_join)

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_awaiting_join and not self.pending_members

    def not_yet_rejoined(self) -> list[ClassicMember]:
        return [m for m in self.members.values() if not m.awaiting_join]

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep the leader if it rejoined, else elect the first member that did; False if none did."""
        if self.leader is None:
            return False
        if self.members[self.leader].awaiting_join:
            return True
        for m in self.members.values():
            if m.awaiting_join:
                self.leader = m.member_id
                return True
        return False

    # -- protocols -------------------------------------------------------------------------------
    def _candidates(self) -> set[str]:
        members = list(self.members.values())
        common = set(members[0].protocol_names())
        for m in members[1:]:
            common &= set(m.protocol_names())
        return common

    def supports_protocols(self, protocol_type: str, names: tuple[str, ...]) -> bool:
        """Kafka's ``supportsProtocols``: an empty group takes any non-empty type and names; otherwise the type must
        match and one name must be supported by every member."""
        if self.state == EMPTY or not self.members:
            return bool(protocol_type) and bool(names)
        return self.protocol_type == protocol_type and bool(set(names) & self._candidates())

    def select_protocol(self) -> str:
        """Each member votes for its most preferred candidate; the most votes win (Kafka's ``selectProtocol``)."""
        return choose_protocol([m.protocol_names() for m in self.members.values()])

    # -- state ----------------------------------------------------------------------------------------
    def transition(self, state: str) -> None:
        self.previous_state, self.state = self.state, state

    def can_rebalance(self) -> bool:
        return self.state in CAN_REBALANCE_FROM

    def init_next_generation(self) -> None:
        self.generation += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition(COMPLETING_REBALANCE)
        else:
            self.protocol_name = None
            self.transition(EMPTY)
        self.pending_sync.clear()

    def joined_members(self) -> tuple[JoinedMember, ...]:
        return tuple(JoinedMember(m.member_id, m.group_instance_id, m.metadata(self.protocol_name))
                     for m in self.members.values())

    def complete_join(self, member: ClassicMember, response: JoinResponse) -> bool:
        if member.join_future is None:
            return False
        future, member.join_future = member.join_future, None
        future.set_result(response)
        return True

    def complete_sync(self, member: ClassicMember, response: SyncResponse) -> bool:
        if member.sync_future is None:
            return False
        future, member.sync_future = member.sync_future, None
        future.set_result(response)
        return True

    @property
    def is_empty(self) -> bool:
        return self.state == EMPTY
