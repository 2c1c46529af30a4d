"""Kafka's consumer group protocol (KIP-848's ConsumerGroupHeartbeat) on consumer groups: server-side assignment,
incremental reconciliation with no global barrier. Classic members may join a non-empty consumer group and are
served by the same reconciliation (Kafka 4's upgrade path); a consumer-protocol member joining a non-empty classic
``consumer``-type group converts it, and a consumer group left with only classic members converts back.
"""

from __future__ import annotations

import logging
import uuid
from concurrent.futures import Future
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Iterable, Sequence

import re2

from lakelog.errors import (FencedInstanceId, FencedMemberEpoch, GroupIdNotFound, GroupMaxSizeReached,
                            IllegalGeneration, InconsistentGroupProtocol, InvalidRegularExpression, InvalidRequest,
                            InvalidSessionTimeout, KafkaError, MemberIdRequired, RebalanceInProgress, UnknownMemberId,
                            UnreleasedInstanceId, UnsupportedAssignor)
from lakelog.group import classic_group as C
from lakelog.group import consumer_group as K
from lakelog.group.assignors import MemberSubscription, TopicPartition
from lakelog.group.classic_group import ClassicGroup, ClassicMember, JoinResponse, SyncResponse
from lakelog.group.consumer_group import ClassicProtocol, ConsumerGroup, ConsumerMember, reconcile
from lakelog.group.consumer_protocol import PROTOCOL_TYPE, decode_assignment, decode_subscription, encode_assignment
from lakelog.group.group_coordinator_config import INT32_MAX
from lakelog.group.group_id import validate_group_id
from lakelog.group.server_assignors import choose_assignor, target_assignment
from lakelog.storage.topic_name import validate_topic_name

if TYPE_CHECKING:
    import threading
    from typing import Callable, Mapping

    from lakelog.group.group_coordinator_config import CoordinatorConfig
    from lakelog.group.group_records import Group

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ConsumerHeartbeat:
    """A ConsumerGroupHeartbeat answer; ``assignment`` None means "unchanged, not sent"."""

    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: frozenset[TopicPartition] | None


_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # a client's bad pattern is its INVALID_REGULAR_EXPRESSION, not our stderr


def _compile(regex: str):
    """A SubscribedTopicRegex compiled as RE2 (raises ``re2.error``)."""
    return re2.compile(regex, _RE2_OPTIONS)


class ConsumerGroupCoordinator:
    """The consumer protocol's requests and timers, and the classic protocol's requests on consumer groups, a part
    of :class:`~lakelog.group.group_coordinator.GroupCoordinator`: it holds the state below and the classic
    protocol's rebalances (:class:`~lakelog.group.classic_group_coordinator.ClassicGroupCoordinator`). Public methods
    take the lock; the others run under it."""

    config: CoordinatorConfig
    _clock: Callable[[], float]
    _counts: dict[str, int]
    _dirty: set[str]
    _groups: dict[str, Group]
    _lock: threading.RLock
    _partition_counts: Callable[[Iterable[str]], Mapping[str, int]]
    _topic_names: Callable[[], Iterable[str]]

    def consumer_heartbeat(self, group_id: str, *, member_id: str, member_epoch: int, instance_id: str | None = None,
                           rack_id: str | None = None, rebalance_timeout_ms: int = -1,
                           subscribed_topics: Sequence[str] | None = None, server_assignor: str | None = None,
                           owned: Iterable[TopicPartition] | None = None, client_id: str = "", client_host: str = "",
                           session_timeout_ms: int | None = None,
                           subscribed_regex: str | None = None) -> ConsumerHeartbeat:
        """ConsumerGroupHeartbeat: join (epoch 0), heartbeat and reconcile, leave (-1), static leave (-2).

        ``subscribed_regex`` is KIP-848's SubscribedTopicRegex (None: unchanged, "": none): the group resolves it
        against every topic's name (a full match in RE2's syntax, as Kafka's RE2/J: linear time, so no client's
        pattern can stall the coordinator) when a member brings it, and again every metadata check, so that
        topics created or deleted later join or leave the subscription.
        ``session_timeout_ms`` is lakelog's per-member extension for HTTP members (Kafka: the group's
        ``group.consumer.session.timeout.ms``), checked against group.min/max.session.timeout.ms."""
        validate_group_id(group_id)
        owned = None if owned is None else frozenset(owned)
        self._check_heartbeat(member_id, member_epoch, instance_id, rebalance_timeout_ms, subscribed_topics,
                              server_assignor, owned, session_timeout_ms, subscribed_regex)
        if subscribed_topics is not None:
            subscribed_topics = tuple(dict.fromkeys(subscribed_topics))
            self._ensure_counts(subscribed_topics)
        matched = None
        if subscribed_regex:
            with self._lock:
                g = self._groups.get(group_id)
                matched = g.resolved.get(subscribed_regex) if isinstance(g, ConsumerGroup) else None
            if matched is None:  # a regex new to the group: resolve it now (outside the lock: it lists topics)
                matched = self._resolve([subscribed_regex])[subscribed_regex]
                self._ensure_counts(matched)
        with self._lock:
            if member_epoch in (K.LEAVE_EPOCH, K.STATIC_LEAVE_EPOCH):
                return self._consumer_leave(group_id, member_id, member_epoch, instance_id)
            g = self._consumer_group(group_id, create=member_epoch == 0)
            member_id = member_id or str(uuid.uuid4())
            if len(g.members) >= self.config.group_consumer_max_size and member_id not in g.members \
                    and (instance_id is None or instance_id not in g.static_members):
                raise GroupMaxSizeReached(f"consumer group {group_id} has reached group.consumer.max.size="
                                          f"{self.config.group_consumer_max_size}")
            member = self._consumer_member(g, member_id, member_epoch, instance_id, owned, classic=False)
            if subscribed_regex is not None:
                regex = subscribed_regex or None
                if regex is not None and regex not in g.resolved:
                    g.resolved[regex] = frozenset(matched or ())
            else:
                regex = member.subscribed_regex
            updated = replace(
                member, subscribed_regex=regex,
                instance_id=instance_id if instance_id is not None else member.instance_id,
                rack_id=rack_id if rack_id is not None else member.rack_id,
                rebalance_timeout_ms=rebalance_timeout_ms if rebalance_timeout_ms != -1 else member.rebalance_timeout_ms,
                server_assignor=server_assignor if server_assignor is not None else member.server_assignor,
                subscribed=subscribed_topics if subscribed_topics is not None else member.subscribed,
                client_id=client_id or member.client_id, client_host=client_host or member.client_host, classic=None,
                session_timeout_ms=session_timeout_ms or (member.session_timeout_ms if member_epoch != 0 else
                                                          self.config.group_consumer_session_timeout_ms))
            new = self._consumer_update(g, member, updated, owned)
            full = member_epoch == 0 or (rebalance_timeout_ms != -1 and (subscribed_topics is not None
                                                                         or subscribed_regex is not None)
                                         and owned is not None)
            return ConsumerHeartbeat(new.member_id, new.member_epoch, self.config.group_consumer_heartbeat_interval_ms,
                                     new.assigned if full or new.assigned != member.assigned else None)

    def _check_heartbeat(self, member_id, epoch, instance_id, rebalance_ms, topics, assignor, owned, session_ms,
                         regex=None):
        if instance_id == "":
            raise InvalidRequest("InstanceId can't be empty.")
        if epoch > 0 or epoch == K.LEAVE_EPOCH:
            if not member_id:
                raise InvalidRequest("MemberId can't be empty.")
        elif epoch == 0:
            if rebalance_ms == -1:
                raise InvalidRequest("RebalanceTimeoutMs must be provided in first request.")
            if owned:
                raise InvalidRequest("TopicPartitions must be empty when (re-)joining.")
            if not topics and not regex:
                raise InvalidRequest("SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
        elif epoch == K.STATIC_LEAVE_EPOCH:
            if not member_id or instance_id is None:
                raise InvalidRequest("MemberId and InstanceId must be set to leave as a static member.")
        else:
            raise InvalidRequest(f"MemberEpoch {epoch} is invalid.")
        if assignor is not None and assignor not in self.config.group_consumer_assignors:
            raise UnsupportedAssignor(f"ServerAssignor {assignor} is not supported. Supported assignors: "
                                      f"{', '.join(self.config.group_consumer_assignors)}.")
        if rebalance_ms != -1 and not 0 < rebalance_ms <= INT32_MAX:
            raise InvalidRequest(f"RebalanceTimeoutMs must be in (0, {INT32_MAX}], got {rebalance_ms}")
        for t in topics or ():
            validate_topic_name(t)
        if regex:
            try:
                _compile(regex)
            except re2.error as e:
                reason = e.args[0].decode(errors="replace") if e.args and isinstance(e.args[0], bytes) else str(e)
                raise InvalidRegularExpression(f"SubscribedTopicRegex {regex!r} is not a valid RE2 regular "
                                               f"expression: {reason}") from None
        if session_ms is not None:
            lo, hi = self.config.group_min_session_timeout_ms, self.config.group_max_session_timeout_ms
            if not lo <= session_ms <= hi:
                raise InvalidSessionTimeout(f"session.timeout.ms {session_ms} is outside [{lo}, {hi}]")

    def _resolve(self, regexes: Iterable[str]) -> dict[str, frozenset[str]]:
        """Each regex's matching topic names (a full match, as RE2/J's ``matches()``); reads the topic list."""
        names = list(self._topic_names())
        out = {}
        for regex in regexes:
            try:
                pattern = _compile(regex)
            except re2.error:
                out[regex] = frozenset()  # validated when it came in: a restored record only
                continue
            out[regex] = frozenset(n for n in names if pattern.fullmatch(n))
        return out

    def _ensure_counts(self, topics: Iterable[str]) -> None:
        missing = [t for t in topics if t not in self._counts]
        if missing:
            counts = dict(self._partition_counts(missing))  # outside the lock: it may read storage
            with self._lock:
                for t in missing:
                    self._counts[t] = int(counts.get(t, 0))

    def _consumer_group(self, group_id: str, *, create: bool) -> ConsumerGroup:
        g = self._groups.get(group_id)
        if isinstance(g, ConsumerGroup):
            return g
        if g is None or g.is_empty:
            if not create:
                raise GroupIdNotFound(f"consumer group {group_id} not found")
            if g is not None:
                self._drop(group_id)
            cg = self._groups[group_id] = ConsumerGroup(group_id)
            cg.metadata_checked = self._clock()
            return cg
        if self.config.group_consumer_migration_policy not in ("bidirectional", "upgrade") or \
                g.protocol_type != PROTOCOL_TYPE or len(g.members) > self.config.group_consumer_max_size:
            raise GroupIdNotFound(f"group {group_id} is a classic group of protocol type {g.protocol_type!r} "
                                  f"that cannot become a consumer group")
        return self._to_consumer_group(g)

    def _consumer_member(self, g: ConsumerGroup, member_id: str, epoch: int, instance_id: str | None,
                         owned, *, classic: bool) -> ConsumerMember:
        create = epoch == 0 or classic
        if instance_id is None:
            m = g.members.get(member_id)
            if m is None:
                if not create:
                    raise UnknownMemberId(f"member {member_id} is not a member of consumer group {g.group_id}")
                return ConsumerMember(member_id)
            if epoch == 0 and not classic:  # the member restarts from scratch: what it had is revoked
                return replace(m, member_epoch=0, previous_epoch=0, state=K.MEMBER_STABLE, assigned=frozenset(),
                               pending_revocation=frozenset())
            if not classic:
                self._check_epoch(m, epoch, owned)
            return m
        existing_id = g.static_members.get(instance_id)
        existing = g.members.get(existing_id) if existing_id else None
        if create:
            if existing is None:
                return g.members.get(member_id) or ConsumerMember(member_id, instance_id=instance_id)
            if existing.member_id == member_id and classic:
                return existing
            if not classic and existing.classic is None and existing.member_epoch != K.STATIC_LEAVE_EPOCH:
                raise UnreleasedInstanceId(f"static member {member_id} with instance id {instance_id} cannot join "
                                           f"group {g.group_id}: the instance id is owned by {existing.member_id}")
            # the static member comes back with a new member id: it takes over the old one's place
            new = replace(existing, member_id=member_id, member_epoch=0, previous_epoch=0)
            target = g.target.pop(existing.member_id, frozenset())
            g.remove(existing.member_id)
            g.target[member_id] = target
            if classic:  # a classic member keeps its epoch: its old assignment stays valid
                new = replace(new, member_epoch=existing.member_epoch, previous_epoch=existing.previous_epoch)
            return new
        if existing is None:
            raise UnknownMemberId(f"instance id {instance_id} is unknown in consumer group {g.group_id}")
        if existing.member_id != member_id:
            raise FencedInstanceId(f"static member {member_id} with instance id {instance_id} was fenced by member "
                                   f"{existing.member_id}")
        if not classic:
            self._check_epoch(existing, epoch, owned)
        return existing

    @staticmethod
    def _check_epoch(m: ConsumerMember, epoch: int, owned) -> None:
        if epoch > m.member_epoch:
            raise FencedMemberEpoch(f"member {m.member_id} has epoch {epoch}, greater than the coordinator's "
                                    f"{m.member_epoch}: it must give up its partitions and rejoin")
        if epoch < m.member_epoch and (epoch != m.previous_epoch or owned is None or not owned <= m.assigned):
            raise FencedMemberEpoch(f"member {m.member_id} has epoch {epoch}, older than the coordinator's "
                                    f"{m.member_epoch}: it must give up its partitions and rejoin")

    def _consumer_update(self, g: ConsumerGroup, old: ConsumerMember, updated: ConsumerMember,
                         owned) -> ConsumerMember:
        """Apply a member's heartbeat or join: bump the epoch on a change, recompute the target, reconcile."""
        bump = old.subscribed != updated.subscribed or old.server_assignor != updated.server_assignor or \
            old.subscribed_regex != updated.subscribed_regex
        g.put(updated)
        counts = {t: self._counts.get(t, g.partition_counts.get(t, 0)) for t in sorted(g.subscribed_topics())}
        if counts != g.partition_counts:
            g.partition_counts = counts
            bump = True
        if bump:
            g.group_epoch += 1
        if g.group_epoch > g.assignment_epoch:
            self._update_target(g)
        owners = g.owner_epochs()
        new = reconcile(updated, g.assignment_epoch, g.target.get(updated.member_id, frozenset()), owned,
                        lambda tp: owners.get(tp, -1))
        g.put(new)
        now = self._clock()
        g.session_deadlines[new.member_id] = now + new.session_timeout_ms / 1000
        if new.state == K.UNREVOKED:
            if updated.state != K.UNREVOKED or new.member_id not in g.revocation_deadlines:
                g.revocation_deadlines[new.member_id] = now + new.rebalance_timeout_ms / 1000
        else:
            g.revocation_deadlines.pop(new.member_id, None)
        if new != old:
            self._dirty.add(g.group_id)
        return new

    def _update_target(self, g: ConsumerGroup) -> None:
        members = list(g.members.values())
        g.assignor = choose_assignor([m.server_assignor for m in members], self.config.group_consumer_assignors[0])
        subs = [MemberSubscription(m.member_id, g.topics_of(m), m.instance_id,
                                   tuple(sorted(g.target.get(m.member_id, ()))), g.assignment_epoch)
                for m in members]
        g.target = target_assignment(g.assignor, subs, g.partition_counts)
        g.assignment_epoch = g.group_epoch
        log.info("group %s: epoch %d target assignment by %s for %d members", g.group_id, g.group_epoch,
                 g.assignor, len(members))

    def _consumer_leave(self, group_id: str, member_id: str, epoch: int, instance_id: str | None) -> ConsumerHeartbeat:
        g = self._groups.get(group_id)
        if not isinstance(g, ConsumerGroup):
            raise GroupIdNotFound(f"consumer group {group_id} not found")
        if instance_id is not None:
            existing_id = g.static_members.get(instance_id)
            if existing_id is None:
                raise UnknownMemberId(f"instance id {instance_id} is unknown in consumer group {group_id}")
            if existing_id != member_id:
                raise FencedInstanceId(f"static member {member_id} with instance id {instance_id} was fenced by "
                                       f"member {existing_id}")
        elif member_id not in g.members:
            raise UnknownMemberId(f"member {member_id} is not a member of consumer group {group_id}")
        if epoch == K.STATIC_LEAVE_EPOCH:  # keeps its place (and partitions) until its session ends
            g.put(replace(g.members[member_id], member_epoch=K.STATIC_LEAVE_EPOCH))
            self._dirty.add(group_id)
        else:
            self._fence(g, member_id, "left the group")
        return ConsumerHeartbeat(member_id, epoch, self.config.group_consumer_heartbeat_interval_ms, None)

    def _fence(self, g: ConsumerGroup, member_id: str, reason: str) -> None:
        """Remove a member, bump the epoch and recompute the target; a group left with only classic members
        goes back to the classic protocol (Kafka's online downgrade)."""
        log.info("group %s: member %s %s", g.group_id, member_id, reason)
        downgrade = (len(g.members) > 1 and g.members[member_id].classic is None and g.all_classic_except(member_id)
                     and self.config.group_consumer_migration_policy in ("bidirectional", "downgrade")
                     and len(g.members) - 1 <= self.config.group_max_size)
        g.remove(member_id)
        g.group_epoch += 1
        self._dirty.add(g.group_id)
        if downgrade:
            self._to_classic_group(g)
        elif g.members:
            self._update_target(g)

    # -- classic members inside a consumer group ----------------------------------------------------
    def _classic_join_consumer_group(self, g: ConsumerGroup, future: Future, member_id, instance_id, protocol_type,
                                     protocols, session_ms, rebalance_ms, client_id, client_host,
                                     require_known_member_id) -> None:
        if protocol_type != PROTOCOL_TYPE or not protocols:
            raise InconsistentGroupProtocol(f"group {g.group_id} is a consumer group: a classic member must use "
                                            f"protocol type 'consumer', not {protocol_type!r}")
        unknown = not member_id
        member_id = member_id or str(uuid.uuid4())
        if len(g.members) >= self.config.group_consumer_max_size and member_id not in g.members:
            raise GroupMaxSizeReached(f"consumer group {g.group_id} is full")
        if unknown and instance_id is None and require_known_member_id:
            future.set_result(JoinResponse(MemberIdRequired(f"rejoin with member id {member_id}"), member_id))
            return
        sub = decode_subscription(protocols[0][1])
        for t in sub.topics:
            validate_topic_name(t)
        member = self._consumer_member(g, member_id, -1, instance_id, None, classic=True)
        self._ensure_counts_locked(sub.topics)
        updated = replace(member, instance_id=instance_id, rack_id=sub.rack_id, rebalance_timeout_ms=rebalance_ms,
                          subscribed=tuple(dict.fromkeys(sub.topics)), client_id=client_id, client_host=client_host,
                          session_timeout_ms=session_ms, classic=ClassicProtocol(session_ms, tuple(protocols)))
        new = self._consumer_update(g, member, updated, sub.owned_partitions)
        future.set_result(JoinResponse(None, new.member_id, new.member_epoch, PROTOCOL_TYPE, new.classic.name, "",
                                       False, ()))

    def _ensure_counts_locked(self, topics: Iterable[str]) -> None:
        """Partition counts of topics first seen in a classic join (read under the lock: rare, and cached)."""
        missing = [t for t in topics if t not in self._counts]
        if missing:
            counts = dict(self._partition_counts(missing))
            for t in missing:
                self._counts[t] = int(counts.get(t, 0))

    def _classic_member_of(self, g: ConsumerGroup, member_id: str, instance_id: str | None) -> ConsumerMember:
        if instance_id is None:
            m = g.members.get(member_id)
            if m is None:
                raise UnknownMemberId(f"member {member_id} is not a member of consumer group {g.group_id}")
        else:
            mid = g.static_members.get(instance_id)
            if mid is None:
                raise UnknownMemberId(f"instance id {instance_id} is not a member of consumer group {g.group_id}")
            if mid != member_id:
                raise FencedInstanceId(f"static member {member_id} with instance id {instance_id} was fenced by "
                                       f"member {mid}")
            m = g.members[mid]
        if m.classic is None:
            raise UnknownMemberId(f"member {member_id} does not use the classic protocol")
        return m

    def _classic_sync_consumer_group(self, g: ConsumerGroup, member_id, generation, instance_id, protocol_type,
                                     protocol_name) -> SyncResponse:
        m = self._classic_member_of(g, member_id, instance_id)
        if generation != m.member_epoch:
            raise IllegalGeneration(f"generation {generation} is not member {member_id}'s epoch {m.member_epoch}")
        if protocol_type is not None and protocol_type != PROTOCOL_TYPE:
            raise InconsistentGroupProtocol(f"protocol type {protocol_type} is not {PROTOCOL_TYPE}")
        if protocol_name is not None and protocol_name != m.classic.name:
            raise InconsistentGroupProtocol(f"protocol {protocol_name} is not {m.classic.name}")
        if g.group_epoch > m.member_epoch and m.state != K.UNREVOKED:
            raise RebalanceInProgress(f"consumer group {g.group_id} moved to epoch {g.group_epoch}; rejoin")
        g.session_deadlines[m.member_id] = self._clock() + m.classic.session_timeout_ms / 1000
        version = decode_subscription(m.classic.protocols[0][1]).version
        return SyncResponse(None, PROTOCOL_TYPE, m.classic.name, encode_assignment(m.assigned, version=version))

    def _classic_heartbeat_consumer_group(self, g: ConsumerGroup, member_id, generation, instance_id) -> None:
        m = self._classic_member_of(g, member_id, instance_id)
        if generation != m.member_epoch:
            raise IllegalGeneration(f"generation {generation} is not member {member_id}'s epoch {m.member_epoch}")
        g.session_deadlines[m.member_id] = self._clock() + m.classic.session_timeout_ms / 1000
        if m.member_epoch < g.group_epoch or m.state == K.UNREVOKED or \
                (m.state == K.UNRELEASED and not g.waiting_on_unreleased(m)):
            raise RebalanceInProgress(f"consumer group {g.group_id} is at epoch {g.group_epoch}; rejoin")

    def _classic_leave_consumer_group(self, g: ConsumerGroup, members) -> list[KafkaError | None]:
        out: list[KafkaError | None] = []
        for member_id, instance_id in members:
            try:
                if not member_id and instance_id is not None:
                    member_id = g.static_members.get(instance_id, "")
                m = self._classic_member_of(g, member_id, instance_id) if member_id in g.members else None
                if m is None:
                    raise UnknownMemberId(f"member {member_id} is not a member of consumer group {g.group_id}")
                self._fence(g, m.member_id, "left the group (LeaveGroup)")
                out.append(None)
                if not isinstance(self._groups.get(g.group_id), ConsumerGroup):
                    break
            except KafkaError as e:
                out.append(e)
        return out

    # -- conversions -----------------------------------------------------------------------------
    def _to_consumer_group(self, g: ClassicGroup) -> ConsumerGroup:
        """Kafka's online upgrade: the classic group's members become classic members of a consumer group."""
        for m in g.members.values():
            g.complete_join(m, JoinResponse(RebalanceInProgress("the group became a consumer group"), m.member_id))
            g.complete_sync(m, SyncResponse(RebalanceInProgress("the group became a consumer group")))
        cg = ConsumerGroup(g.group_id, group_epoch=g.generation, assignment_epoch=g.generation)
        now = self._clock()
        for m in g.members.values():
            try:
                sub = decode_subscription(m.metadata(g.protocol_name) or m.protocols[0][1])
                assigned = frozenset(decode_assignment(m.assignment).partitions)
            except KafkaError as e:
                raise GroupIdNotFound(f"cannot upgrade classic group {g.group_id}: {e.message}") from None
            cg.put(ConsumerMember(m.member_id, m.group_instance_id, m.client_id, m.client_host, sub.rack_id,
                                  g.generation, g.generation - 1, K.MEMBER_STABLE, tuple(dict.fromkeys(sub.topics)),
                                  None, m.rebalance_timeout_ms, m.session_timeout_ms, assigned, frozenset(),
                                  ClassicProtocol(m.session_timeout_ms, m.protocols)))
            cg.target[m.member_id] = assigned
            cg.session_deadlines[m.member_id] = now + m.session_timeout_ms / 1000
        self._ensure_counts_locked(cg.subscribed_topics())
        cg.partition_counts = {t: self._counts.get(t, 0) for t in sorted(cg.subscribed_topics())}
        cg.metadata_checked = now
        self._groups[g.group_id] = cg
        self._dirty.add(g.group_id)
        log.info("group %s: upgraded from classic (generation %d) to a consumer group", g.group_id, g.generation)
        return cg

    def _to_classic_group(self, cg: ConsumerGroup) -> None:
        """Kafka's online downgrade: only classic members are left; they rejoin a classic group."""
        g = ClassicGroup(cg.group_id, state=C.STABLE, previous_state=C.STABLE, generation=cg.group_epoch,
                         protocol_type=PROTOCOL_TYPE)
        for m in cg.members.values():
            cm = ClassicMember(m.member_id, m.instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
                               m.classic.session_timeout_ms, PROTOCOL_TYPE, m.classic.protocols,
                               assignment=encode_assignment(m.assigned))
            g.add(cm)
            self._reschedule_heartbeat(cm)
        g.protocol_name = g.select_protocol()
        self._groups[cg.group_id] = g
        log.info("group %s: downgraded to a classic group (generation %d)", g.group_id, g.generation)
        self._prepare_rebalance(g, "downgraded from a consumer group")

    def _tick_consumer(self, g: ConsumerGroup, now: float) -> None:
        for mid, deadline in list(g.session_deadlines.items()):
            if deadline <= now and mid in g.members:
                self._fence(g, mid, "failed its session")
                if not isinstance(self._groups.get(g.group_id), ConsumerGroup):
                    return
        for mid, deadline in list(g.revocation_deadlines.items()):
            if deadline <= now and mid in g.members:
                self._fence(g, mid, "did not revoke its partitions within its rebalance timeout")
                if not isinstance(self._groups.get(g.group_id), ConsumerGroup):
                    return
