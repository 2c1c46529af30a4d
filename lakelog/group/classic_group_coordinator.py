"""Kafka's classic group protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) on classic groups, as Kafka's
``GroupMetadataManager`` runs it: assignor-agnostic, a real member elected leader that alone gets every member's
metadata, its SyncGroup assignment relayed byte for byte; static membership (KIP-345),
``group.initial.rebalance.delay.ms``, MEMBER_ID_REQUIRED (KIP-394). A classic member of a consumer group is served
by :class:`~lakelog.group.consumer_group_coordinator.ConsumerGroupCoordinator`.
"""

from __future__ import annotations

import logging
import uuid
from concurrent.futures import Future
from dataclasses import replace
from typing import TYPE_CHECKING, Mapping, Sequence

from lakelog.errors import (CoordinatorNotAvailable, FencedInstanceId, GroupMaxSizeReached, IllegalGeneration,
                            InconsistentGroupProtocol, InvalidSessionTimeout, KafkaError, MemberIdRequired,
                            RebalanceInProgress, UnknownMemberId)
from lakelog.group import classic_group as C
from lakelog.group.classic_group import ClassicGroup, ClassicMember, JoinResponse, SyncResponse
from lakelog.group.consumer_group import ConsumerGroup
from lakelog.group.group_id import validate_group_id

if TYPE_CHECKING:
    import threading
    from typing import Callable

    from lakelog.group.group_coordinator_config import CoordinatorConfig
    from lakelog.group.group_records import Group

log = logging.getLogger(__name__)


class ClassicGroupCoordinator:
    """The classic protocol's requests and timers, a part of
    :class:`~lakelog.group.group_coordinator.GroupCoordinator`: it holds the state below and the consumer protocol's
    handling of classic members (:class:`~lakelog.group.consumer_group_coordinator.ConsumerGroupCoordinator`).
    Public methods take the lock; the others run under it."""

    config: CoordinatorConfig
    _clock: Callable[[], float]
    _dirty: set[str]
    _groups: dict[str, Group]
    _lock: threading.RLock

    def join_group(self, group_id: str, *, member_id: str, protocol_type: str,
                   protocols: Sequence[tuple[str, bytes]], session_timeout_ms: int, rebalance_timeout_ms: int,
                   group_instance_id: str | None = None, client_id: str = "", client_host: str = "",
                   require_known_member_id: bool = False) -> "Future[JoinResponse]":
        """JoinGroup. The future completes when the member's rebalance reaches its sync phase (or at once)."""
        future: Future[JoinResponse] = Future()
        validate_group_id(group_id)
        lo, hi = self.config.group_min_session_timeout_ms, self.config.group_max_session_timeout_ms
        if not lo <= session_timeout_ms <= hi:
            future.set_result(JoinResponse(InvalidSessionTimeout(
                f"session.timeout.ms {session_timeout_ms} is outside [{lo}, {hi}] (group.min/max.session.timeout.ms)"),
                member_id))
            return future
        if rebalance_timeout_ms <= 0:
            rebalance_timeout_ms = session_timeout_ms  # JoinGroup v0 has none: Kafka uses the session timeout
        protocols = tuple((str(n), bytes(md or b"")) for n, md in protocols)
        with self._lock:
            g = self._groups.get(group_id)
            if isinstance(g, ConsumerGroup) and not g.is_empty:
                try:
                    self._classic_join_consumer_group(g, future, member_id, group_instance_id, protocol_type,
                                                      protocols, session_timeout_ms, rebalance_timeout_ms, client_id,
                                                      client_host, require_known_member_id)
                except KafkaError as e:
                    future.set_result(JoinResponse(e, member_id))
                return future
            if isinstance(g, ConsumerGroup):
                self._drop(group_id)  # an empty consumer group becomes a classic group (Kafka does the same)
                g = None
            unknown = not member_id
            if g is None:
                if not unknown:
                    future.set_result(JoinResponse(UnknownMemberId(f"group {group_id} does not exist"), member_id))
                    return future
                g = self._groups[group_id] = ClassicGroup(group_id)
            assert isinstance(g, ClassicGroup)
            if not self._accept_joining_member(g, member_id):
                g.remove(member_id)
                future.set_result(JoinResponse(GroupMaxSizeReached(
                    f"group {group_id} has reached group.max.size={self.config.group_max_size}"), ""))
            elif unknown:
                self._join_new_member(g, future, protocol_type, protocols, group_instance_id, client_id, client_host,
                                      session_timeout_ms, rebalance_timeout_ms, require_known_member_id)
            else:
                self._join_existing_member(g, future, member_id, protocol_type, protocols, group_instance_id,
                                           session_timeout_ms, rebalance_timeout_ms, client_id, client_host)
        return future

    def _accept_joining_member(self, g: ClassicGroup, member_id: str) -> bool:
        limit = self.config.group_max_size
        if g.state in (C.EMPTY, C.DEAD):
            return True
        if g.state == C.PREPARING_REBALANCE:
            m = g.members.get(member_id)
            return (m is not None and m.awaiting_join) or g.num_awaiting_join < limit
        return member_id in g.members or len(g.members) < limit

    def _join_new_member(self, g: ClassicGroup, future: Future, protocol_type: str, protocols, instance_id,
                         client_id, client_host, session_ms, rebalance_ms, require_known_member_id) -> None:
        if g.state == C.DEAD:
            future.set_result(JoinResponse(CoordinatorNotAvailable(f"group {g.group_id} is being deleted"), ""))
            return
        if not g.supports_protocols(protocol_type, tuple(n for n, _ in protocols)):
            future.set_result(JoinResponse(InconsistentGroupProtocol(
                f"protocol type {protocol_type!r} with protocols {[n for n, _ in protocols]} shares no protocol "
                f"with the members of group {g.group_id} (type {g.protocol_type!r})"), ""))
            return
        new_id = f"{instance_id or client_id}-{uuid.uuid4()}"
        if instance_id is not None:
            existing = g.static_members.get(instance_id)
            if existing is not None:
                self._update_static_member(g, future, existing, new_id, protocols, session_ms, rebalance_ms)
                return
        elif require_known_member_id:
            g.pending_members[new_id] = self._clock() + session_ms / 1000
            future.set_result(JoinResponse(MemberIdRequired(f"rejoin group {g.group_id} with member id {new_id}"),
                                           new_id))
            return
        self._add_member(g, future, new_id, instance_id, client_id, client_host, protocol_type, protocols,
                         session_ms, rebalance_ms)

    def _join_existing_member(self, g: ClassicGroup, future: Future, member_id: str, protocol_type: str, protocols,
                              instance_id, session_ms, rebalance_ms, client_id: str, client_host: str) -> None:
        if g.state == C.DEAD:
            future.set_result(JoinResponse(CoordinatorNotAvailable(f"group {g.group_id} is being deleted"),
                                           member_id))
            return
        if not g.supports_protocols(protocol_type, tuple(n for n, _ in protocols)):
            future.set_result(JoinResponse(InconsistentGroupProtocol(
                f"member {member_id}'s protocols {[n for n, _ in protocols]} are not supported by group "
                f"{g.group_id}"), member_id))
            return
        if member_id in g.pending_members:
            self._add_member(g, future, member_id, None, client_id, client_host, protocol_type, protocols,
                             session_ms, rebalance_ms)
            return
        try:
            self._validate_member(g, member_id, instance_id)
        except KafkaError as e:
            future.set_result(JoinResponse(e, member_id))
            return
        m = g.members[member_id]
        if g.state == C.PREPARING_REBALANCE:
            self._update_member(g, m, future, protocols, session_ms, rebalance_ms,
                                f"member {member_id} joined during PreparingRebalance")
        elif g.state == C.COMPLETING_REBALANCE:
            if m.matches(protocols):  # a retried join: answer this generation again
                future.set_result(self._join_answer(g, m))
            else:
                self._update_member(g, m, future, protocols, session_ms, rebalance_ms,
                                    f"member {member_id} changed its metadata during CompletingRebalance")
        elif g.state == C.STABLE:
            if g.leader == member_id or not m.matches(protocols):
                self._update_member(g, m, future, protocols, session_ms, rebalance_ms,
                                    f"{'leader' if g.leader == member_id else 'member'} {member_id} rejoined")
            else:
                future.set_result(replace(self._join_answer(g, m), members=()))
        else:
            future.set_result(JoinResponse(UnknownMemberId(f"group {g.group_id} is {g.state}; join as a new member"),
                                           member_id))

    def _join_answer(self, g: ClassicGroup, m: ClassicMember, skip_assignment: bool = False) -> JoinResponse:
        return JoinResponse(None, m.member_id, g.generation, g.protocol_type, g.protocol_name, g.leader or "",
                            skip_assignment, g.joined_members() if g.leader == m.member_id else ())

    def _add_member(self, g: ClassicGroup, future: Future, member_id: str, instance_id, client_id, client_host,
                    protocol_type, protocols, session_ms, rebalance_ms) -> None:
        m = ClassicMember(member_id, instance_id, client_id, client_host, rebalance_ms, session_ms, protocol_type,
                          tuple(protocols), join_future=future, is_new=True)
        if g.state == C.PREPARING_REBALANCE and g.previous_state == C.EMPTY:
            g.new_member_added = True
        g.add(m)
        # a new member cannot heartbeat while its join is parked: time its join out instead (Kafka's rule)
        m.heartbeat_deadline = self._clock() + self.config.group_new_member_join_timeout_ms / 1000
        self._maybe_prepare_rebalance_or_complete_join(g, f"member {member_id} joined")

    def _update_member(self, g: ClassicGroup, m: ClassicMember, future: Future, protocols, session_ms, rebalance_ms,
                       reason: str) -> None:
        if m.join_future is not None and m.join_future is not future:
            m.join_future.set_result(JoinResponse(RebalanceInProgress("superseded by a newer JoinGroup"),
                                                  m.member_id))
        m.protocols, m.session_timeout_ms, m.rebalance_timeout_ms = tuple(protocols), session_ms, rebalance_ms
        m.join_future = future
        self._maybe_prepare_rebalance_or_complete_join(g, reason)

    def _update_static_member(self, g: ClassicGroup, future: Future, old_id: str, new_id: str, protocols,
                              session_ms, rebalance_ms) -> None:
        instance = next(i for i, mid in g.static_members.items() if mid == old_id)
        m = g.replace_static_member(instance, old_id, new_id)
        self._reschedule_heartbeat(m)
        if g.state == C.STABLE:
            old_protocols = m.protocols
            m.protocols, m.session_timeout_ms, m.rebalance_timeout_ms = tuple(protocols), session_ms, rebalance_ms
            if g.protocol_name == g.select_protocol():
                # the selected protocol stays: no rebalance, the static member gets its old assignment back
                self._dirty.add(g.group_id)
                future.set_result(self._join_answer(g, m, skip_assignment=g.leader == new_id))
                return
            m.protocols = old_protocols
            self._update_member(g, m, future, protocols, session_ms, rebalance_ms,
                                f"static member {new_id} changed the selected protocol")
        elif g.state == C.COMPLETING_REBALANCE:
            m.protocols, m.session_timeout_ms, m.rebalance_timeout_ms = tuple(protocols), session_ms, rebalance_ms
            m.join_future = future
            self._prepare_rebalance(g, f"static member {new_id} replaced {old_id} during CompletingRebalance")
        else:
            m.protocols, m.session_timeout_ms, m.rebalance_timeout_ms = tuple(protocols), session_ms, rebalance_ms
            m.join_future = future
            self._maybe_complete_join_phase(g)

    def _validate_member(self, g: ClassicGroup, member_id: str, instance_id: str | None) -> None:
        if instance_id is not None:
            existing = g.static_members.get(instance_id)
            if existing is None:
                raise UnknownMemberId(f"group.instance.id {instance_id} is not a member of group {g.group_id}")
            if existing != member_id:
                raise FencedInstanceId(f"member {member_id} with group.instance.id {instance_id} was replaced by "
                                       f"{existing} in group {g.group_id}")
        if member_id not in g.members:
            raise UnknownMemberId(f"member {member_id} is not a member of group {g.group_id} "
                                  f"(generation {g.generation})")

    # -- rebalance -------------------------------------------------------------------------------
    def _maybe_prepare_rebalance_or_complete_join(self, g: ClassicGroup, reason: str) -> None:
        if g.can_rebalance():
            self._prepare_rebalance(g, reason)
        else:
            self._maybe_complete_join_phase(g)

    def _prepare_rebalance(self, g: ClassicGroup, reason: str) -> None:
        if g.state == C.COMPLETING_REBALANCE:  # syncs waiting for the leader must rejoin
            for m in g.members.values():
                m.assignment = b""
            self._propagate(g, RebalanceInProgress(f"group {g.group_id} started another rebalance"))
        g.pending_sync.clear()
        g.sync_deadline = None
        initial = g.state == C.EMPTY
        now = self._clock()
        if initial:
            delay = self.config.group_initial_rebalance_delay_ms
            g.initial_delay_ms = delay
            g.initial_remaining_ms = max(g.rebalance_timeout_ms() - delay, 0)
            g.join_deadline = now + delay / 1000
        g.transition(C.PREPARING_REBALANCE)
        log.info("group %s: preparing to rebalance (generation %d): %s", g.group_id, g.generation, reason)
        if initial:
            if g.join_deadline <= now:
                self._fire_join_timer(g)
            return
        if g.has_all_members_joined():
            self._complete_join(g)
        else:
            g.initial_remaining_ms = None
            g.join_deadline = now + g.rebalance_timeout_ms() / 1000

    def _maybe_complete_join_phase(self, g: ClassicGroup) -> None:
        if g.state != C.PREPARING_REBALANCE or g.previous_state == C.EMPTY or not g.has_all_members_joined():
            return
        self._complete_join(g)

    def _fire_join_timer(self, g: ClassicGroup) -> None:
        if g.initial_remaining_ms is None:
            self._complete_join(g)
            return
        if g.new_member_added and g.initial_remaining_ms != 0:  # more members arrived: wait a little longer
            g.new_member_added = False
            delay = min(self.config.group_initial_rebalance_delay_ms, g.initial_remaining_ms)
            g.initial_remaining_ms = max(g.initial_remaining_ms - g.initial_delay_ms, 0)
            g.initial_delay_ms = delay
            g.join_deadline = self._clock() + delay / 1000
            return
        self._complete_join(g)

    def _complete_join(self, g: ClassicGroup) -> None:
        g.join_deadline, g.initial_remaining_ms = None, None
        for m in g.not_yet_rejoined():
            if m.group_instance_id is None:  # static members keep their place until their session ends
                g.remove(m.member_id)
        if g.state == C.DEAD:
            return
        if not g.maybe_elect_new_joined_leader() and g.members:
            g.join_deadline = self._clock() + g.rebalance_timeout_ms() / 1000  # nobody rejoined: wait again
            return
        g.init_next_generation()
        self._dirty.add(g.group_id)
        if g.state == C.EMPTY:
            log.info("group %s: generation %d is empty", g.group_id, g.generation)
            return
        log.info("group %s: generation %d with %d members, protocol %s, leader %s", g.group_id, g.generation,
                 len(g.members), g.protocol_name, g.leader)
        for m in list(g.members.values()):
            g.complete_join(m, self._join_answer(g, m))
            self._reschedule_heartbeat(m)
            m.is_new = False
            g.pending_sync.add(m.member_id)
        g.sync_deadline = self._clock() + g.rebalance_timeout_ms() / 1000

    def _propagate(self, g: ClassicGroup, error: KafkaError | None) -> None:
        for m in g.members.values():
            done = g.complete_sync(m, SyncResponse(error, g.protocol_type, g.protocol_name, m.assignment)
                                   if error is None else SyncResponse(error))
            if done:
                self._reschedule_heartbeat(m)

    def _reschedule_heartbeat(self, m: ClassicMember, timeout_ms: int | None = None) -> None:
        m.heartbeat_deadline = self._clock() + (timeout_ms if timeout_ms is not None else m.session_timeout_ms) / 1000

    # -- sync, heartbeat, leave ----------------------------------------------------------------------
    def sync_group(self, group_id: str, *, member_id: str, generation: int, group_instance_id: str | None = None,
                   protocol_type: str | None = None, protocol_name: str | None = None,
                   assignments: Mapping[str, bytes] | None = None) -> "Future[SyncResponse]":
        """SyncGroup: the leader hands in every member's assignment; each member gets its own bytes back."""
        future: Future[SyncResponse] = Future()
        with self._lock:
            g = self._groups.get(group_id)
            if g is None or g.is_empty:
                future.set_result(SyncResponse(UnknownMemberId(f"group {group_id} has no member {member_id}")))
                return future
            if isinstance(g, ConsumerGroup):
                try:
                    future.set_result(self._classic_sync_consumer_group(g, member_id, generation, group_instance_id,
                                                                        protocol_type, protocol_name))
                except KafkaError as e:
                    future.set_result(SyncResponse(e))
                return future
            try:
                if g.state == C.DEAD:
                    raise CoordinatorNotAvailable(f"group {group_id} is being deleted")
                self._validate_member(g, member_id, group_instance_id)
                if generation != g.generation:
                    raise IllegalGeneration(f"SyncGroup of member {member_id} at generation {generation}; group "
                                            f"{group_id} is at {g.generation}")
                if (protocol_type is not None and protocol_type != g.protocol_type) or \
                        (protocol_name is not None and protocol_name != g.protocol_name):
                    raise InconsistentGroupProtocol(
                        f"SyncGroup names protocol {protocol_type}/{protocol_name}; group {group_id} uses "
                        f"{g.protocol_type}/{g.protocol_name}")
                if g.state == C.PREPARING_REBALANCE:
                    raise RebalanceInProgress(f"group {group_id} is rebalancing; rejoin")
            except KafkaError as e:
                future.set_result(SyncResponse(e))
                return future
            m = g.members[member_id]
            if g.state == C.COMPLETING_REBALANCE:
                m.sync_future = future
                g.pending_sync.discard(member_id)
                if not g.pending_sync:
                    g.sync_deadline = None
                if g.leader == member_id:
                    given = dict(assignments or {})
                    for mm in g.members.values():
                        mm.assignment = bytes(given.get(mm.member_id, b""))
                    self._propagate(g, None)
                    g.transition(C.STABLE)
                    self._dirty.add(group_id)
                    log.info("group %s: generation %d stable (assignment from leader %s)", group_id, g.generation,
                             member_id)
            else:  # Stable: answer the current assignment
                g.pending_sync.discard(member_id)
                if not g.pending_sync:
                    g.sync_deadline = None
                future.set_result(SyncResponse(None, g.protocol_type, g.protocol_name, m.assignment))
        return future

    def heartbeat(self, group_id: str, member_id: str, generation: int, group_instance_id: str | None = None) -> None:
        """Heartbeat (classic): raises ``REBALANCE_IN_PROGRESS`` when the member must rejoin."""
        with self._lock:
            g = self._groups.get(group_id)
            if g is None:
                raise UnknownMemberId(f"group {group_id} does not exist")
            if isinstance(g, ConsumerGroup):
                self._classic_heartbeat_consumer_group(g, member_id, generation, group_instance_id)
                return
            if g.state == C.DEAD:
                raise CoordinatorNotAvailable(f"group {group_id} is being deleted")
            self._validate_member(g, member_id, group_instance_id)
            if generation != g.generation:
                raise IllegalGeneration(f"heartbeat of member {member_id} at generation {generation}; group "
                                        f"{group_id} is at {g.generation}")
            if g.state == C.EMPTY:
                raise UnknownMemberId(f"group {group_id} is empty")
            self._reschedule_heartbeat(g.members[member_id])
            if g.state == C.PREPARING_REBALANCE:
                raise RebalanceInProgress(f"group {group_id} is rebalancing (generation {g.generation}); rejoin")

    def leave_group(self, group_id: str, members: Sequence[tuple[str, str | None]]) -> list[KafkaError | None]:
        """LeaveGroup of ``(member id, group.instance.id)`` pairs (an empty member id removes a static member by
        its instance id); returns each one's error. Raises ``UNKNOWN_MEMBER_ID`` for an unknown group."""
        with self._lock:
            g = self._groups.get(group_id)
            if g is None:
                raise UnknownMemberId(f"group {group_id} does not exist")
            if isinstance(g, ConsumerGroup):
                return self._classic_leave_consumer_group(g, members)
            if g.state == C.DEAD:
                raise CoordinatorNotAvailable(f"group {group_id} is being deleted")
            out: list[KafkaError | None] = []
            for member_id, instance_id in members:
                try:
                    if not member_id:
                        if instance_id is None or instance_id not in g.static_members:
                            raise UnknownMemberId(f"group.instance.id {instance_id} is not a member of {group_id}")
                        self._remove_member(g, g.static_members[instance_id])
                    elif member_id in g.pending_members:
                        del g.pending_members[member_id]
                    else:
                        self._validate_member(g, member_id, instance_id)
                        self._remove_member(g, member_id)
                    out.append(None)
                except KafkaError as e:
                    out.append(e)
            if any(e is None for e in out):
                reason = f"{sum(e is None for e in out)} member(s) left"
                if g.state in (C.STABLE, C.COMPLETING_REBALANCE):
                    self._maybe_prepare_rebalance_or_complete_join(g, reason)
                elif g.state == C.PREPARING_REBALANCE:
                    self._maybe_complete_join_phase(g)
            return out

    def _remove_member(self, g: ClassicGroup, member_id: str) -> None:
        m = g.members[member_id]
        g.complete_join(m, JoinResponse(UnknownMemberId(f"member {member_id} left group {g.group_id}"), ""))
        g.remove(member_id)

    def _tick_classic(self, g: ClassicGroup, now: float) -> None:
        for mid, deadline in list(g.pending_members.items()):
            if deadline <= now:
                del g.pending_members[mid]
                if g.state == C.PREPARING_REBALANCE and g.has_all_members_joined():
                    self._complete_join(g)
        for m in list(g.members.values()):
            if m.heartbeat_deadline is None or m.heartbeat_deadline > now or m.member_id not in g.members:
                continue
            if m.has_satisfied_heartbeat():
                m.heartbeat_deadline = None
                continue
            log.info("group %s: member %s failed its session (%d ms)", g.group_id, m.member_id, m.session_timeout_ms)
            g.complete_join(m, JoinResponse(UnknownMemberId(f"member {m.member_id} expired"), ""))
            g.remove(m.member_id)
            self._dirty.add(g.group_id)
            if g.state in (C.STABLE, C.COMPLETING_REBALANCE):
                self._maybe_prepare_rebalance_or_complete_join(g, f"member {m.member_id} expired")
            elif g.state == C.PREPARING_REBALANCE and g.has_all_members_joined():
                self._complete_join(g)
        if g.join_deadline is not None and g.join_deadline <= now and g.state == C.PREPARING_REBALANCE:
            self._fire_join_timer(g)
        if g.sync_deadline is not None and g.sync_deadline <= now:
            g.sync_deadline = None
            if g.state in (C.COMPLETING_REBALANCE, C.STABLE) and g.pending_sync:
                late = sorted(g.pending_sync)
                for mid in late:
                    g.remove(mid)
                self._prepare_rebalance(g, f"members {late} sent no SyncGroup in time")
