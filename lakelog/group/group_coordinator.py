"""The group coordinator: every consumer group of one front, on both of Kafka's group protocols.

* **Classic** (JoinGroup, SyncGroup, Heartbeat, LeaveGroup):
  :class:`~lakelog.group.classic_group_coordinator.ClassicGroupCoordinator`.
* **Consumer** (KIP-848's ConsumerGroupHeartbeat; lakelog's HTTP members use it), and classic members of consumer
  groups: :class:`~lakelog.group.consumer_group_coordinator.ConsumerGroupCoordinator`.

This module holds what both share: the groups and their lock, offset-commit checks, describe/list/delete, the
timers' tick, metadata refresh and persistence (records: :mod:`lakelog.group.group_records`).

Nothing here blocks. A join or sync that must wait for other members returns a
:class:`concurrent.futures.Future` completed when its rebalance moves on (Kafka's purgatory): the Kafka front
awaits it on its event loop and no thread is held, so one group's stall never touches another. Timers (session
expiry, rebalance and initial delays, pending syncs, revocation timeouts) are deadlines checked by :meth:`tick`,
which the front calls about every 100 ms; time comes from an injectable ``clock`` so tests drive it.

State lives in ``__consumer_offsets``: :meth:`persist` writes each changed group's state there (the front calls
it in the background), a restarted front restores it, and :meth:`follow` applies what other processes wrote --
a group deleted by another front or the CLI is forgotten here within a second.

Thread-safe: one lock guards all groups; nothing under it does I/O.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping, Protocol, Sequence

from lakelog.errors import (CoordinatorNotAvailable, GroupIdNotFound, IllegalGeneration, KafkaError, NonEmptyGroup,
                            RebalanceInProgress, StaleMemberEpoch, UnknownMemberId)
from lakelog.group import classic_group as C
from lakelog.group import consumer_group as K
from lakelog.group.assignors import TopicPartition
from lakelog.group.classic_group import ClassicGroup
from lakelog.group.classic_group_coordinator import ClassicGroupCoordinator
from lakelog.group.consumer_group import ConsumerGroup
from lakelog.group.consumer_group_coordinator import ConsumerGroupCoordinator
from lakelog.group.consumer_protocol import PROTOCOL_TYPE, decode_assignment, decode_subscription, encode_assignment
from lakelog.group.group_coordinator_config import CoordinatorConfig
from lakelog.group.group_id import validate_group_id
from lakelog.group.group_records import Group, group_record, restore_group

log = logging.getLogger(__name__)

__all__ = ["GroupCoordinator", "GroupStore", "GroupDescription", "MemberDescription",
           "ListedGroup"]


@dataclass(frozen=True)
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes  # the member's metadata for the group's protocol (classic), b"" otherwise
    assignment: bytes  # the assignment bytes the member was given (classic), b"" otherwise
    topics: tuple[str, ...]  # subscribed topics, where lakelog can know them
    partitions: tuple[TopicPartition, ...]  # assigned partitions, where lakelog can know them
    member_epoch: int = -1
    target: tuple[TopicPartition, ...] = ()
    uses_classic: bool = True
    regex: str | None = None  # a consumer-protocol member's SubscribedTopicRegex


@dataclass(frozen=True)
class GroupDescription:
    """A group as DescribeGroups (and lakelog's HTTP describe) shows it."""

    group_id: str
    state: str
    type: str
    protocol_type: str
    protocol: str  # the classic protocol name, or a consumer group's assignor
    generation: int  # classic generation, or consumer group epoch
    leader: str | None
    members: tuple[MemberDescription, ...]
    assignment_epoch: int = -1


@dataclass(frozen=True)
class ListedGroup:
    group_id: str
    state: str
    type: str
    protocol_type: str


class GroupStore(Protocol):
    """Where group state lives (``__consumer_offsets``: :class:`~lakelog.group.consumer_offsets.OffsetStore`)."""

    def save_group(self, group_id: str, metadata: dict | None) -> int: ...

    def group_records(self, *, refresh: bool = True) -> dict[str, tuple[int, dict | None]]: ...

    def delete_group(self, group: str) -> int: ...


class GroupCoordinator(ClassicGroupCoordinator, ConsumerGroupCoordinator):
    """All groups of one front process (see the module doc)."""

    def __init__(self, *, partition_counts: Callable[[Iterable[str]], Mapping[str, int]],
                 store: GroupStore | None = None, config: CoordinatorConfig | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 topic_names: Callable[[], Iterable[str]] = lambda: ()) -> None:
        """``partition_counts`` reads topics' partition counts (0: no such topic); ``topic_names`` lists every
        topic a regex subscription may match (Kafka's internal topics included, as Kafka's coordinator matches them). Both may read storage: they are called
        outside the lock."""
        self._partition_counts = partition_counts
        self._topic_names = topic_names
        self._store = store
        self.config = config or CoordinatorConfig()
        self._clock = clock
        self._lock = threading.RLock()
        self._groups: dict[str, Group] = {}
        self._counts: dict[str, int] = {}  # partition counts of topics consumer groups subscribe to
        self._dirty: set[str] = set()
        self._saved_at: dict[str, int] = {}  # group -> log offset of the newest state record this front applied
        self._persist_lock = threading.Lock()
        if store is not None:
            self.follow()

    # ================================================================================================
    # offsets, admin
    # ================================================================================================
    def validate_commit(self, group_id: str, member_id: str | None, generation: int,
                        group_instance_id: str | None = None, *, transactional: bool = False) -> None:
        """Kafka's OffsetCommit checks: a commit with generation -1 and no member id is a simple (admin) commit,
        accepted while the group has no members; otherwise the member must be current (``UNKNOWN_MEMBER_ID``,
        ``FENCED_INSTANCE_ID``, ``ILLEGAL_GENERATION``; a consumer-protocol member's epoch: ``STALE_MEMBER_EPOCH``),
        and a classic group completing a rebalance answers ``REBALANCE_IN_PROGRESS``."""
        member_id = member_id or ""
        with self._lock:
            g = self._groups.get(group_id)
            if g is None:
                if generation >= 0 or member_id:
                    raise IllegalGeneration(f"group {group_id} has no generation {generation}")
                return
            if isinstance(g, ConsumerGroup):
                if generation < 0 and not g.members:
                    return
                m = g.members.get(member_id)
                if m is None:
                    raise UnknownMemberId(f"member {member_id!r} is not a member of consumer group {group_id}")
                if transactional and generation < 0:
                    return
                if m.classic is not None:
                    if generation != m.member_epoch:
                        raise IllegalGeneration(f"generation {generation} is not member {member_id}'s epoch "
                                                f"{m.member_epoch}")
                elif generation != m.member_epoch:
                    raise StaleMemberEpoch(f"member {member_id} commits at epoch {generation}; it is at "
                                           f"{m.member_epoch}")
                return
            if g.state == C.DEAD:
                raise CoordinatorNotAvailable(f"group {group_id} is being deleted")
            if generation < 0 and g.state == C.EMPTY:
                return
            if generation >= 0 or member_id or group_instance_id is not None:
                self._validate_member(g, member_id, group_instance_id)
                if generation != g.generation:
                    raise IllegalGeneration(f"commit of member {member_id} at generation {generation}; group "
                                            f"{group_id} is at {g.generation}")
            elif not transactional and g.state != C.EMPTY:
                raise UnknownMemberId(f"group {group_id} has members: a commit must name its member and generation")
            if not transactional and g.state == C.COMPLETING_REBALANCE:
                raise RebalanceInProgress(f"group {group_id} is completing a rebalance; commit after it")

    def describe(self, group_id: str) -> GroupDescription:
        """The group as DescribeGroups shows it; ``GROUP_ID_NOT_FOUND`` if this coordinator does not know it."""
        with self._lock:
            g = self._groups.get(group_id)
            if g is None:
                raise GroupIdNotFound(f"group {group_id} does not exist")
            if isinstance(g, ConsumerGroup):
                return self._describe_consumer(g)
            members = []
            for m in g.members.values():
                topics: tuple[str, ...] = ()
                parts: tuple[TopicPartition, ...] = ()
                if g.protocol_type == PROTOCOL_TYPE:
                    try:
                        topics = decode_subscription(m.metadata(g.protocol_name) or m.protocols[0][1]).topics
                        parts = tuple(sorted(decode_assignment(m.assignment).partitions))
                    except KafkaError:
                        pass  # a member's bytes are its own: describe what can be read
                described = g.state == C.STABLE
                members.append(MemberDescription(
                    m.member_id, m.group_instance_id, m.client_id, m.client_host,
                    m.metadata(g.protocol_name) if described else b"", m.assignment if described else b"", topics,
                    parts, g.generation))
            return GroupDescription(g.group_id, g.state, C.CLASSIC, g.protocol_type or "", g.protocol_name or "",
                                    g.generation, g.leader, tuple(members))

    def _describe_consumer(self, g: ConsumerGroup) -> GroupDescription:
        members = tuple(MemberDescription(
            m.member_id, m.instance_id, m.client_id, m.client_host,
            m.classic.protocols[0][1] if m.classic else b"",
            encode_assignment(m.assigned) if m.classic else b"", m.subscribed, tuple(sorted(m.assigned)),
            m.member_epoch, tuple(sorted(g.target.get(m.member_id, ()))), m.classic is not None,
            m.subscribed_regex)
            for m in g.members.values())
        return GroupDescription(g.group_id, g.state, K.CONSUMER, PROTOCOL_TYPE, g.assignor or "", g.group_epoch, None,
                                members, g.assignment_epoch)

    def list_groups(self, *, known: Iterable[str] = (), states: Iterable[str] = (),
                    types: Iterable[str] = ()) -> list[ListedGroup]:
        """ListGroups: the groups this coordinator has, and ``known`` ones (groups with committed offsets only: an
        Empty classic group, as Kafka lists a simple group), kept if their state is one of ``states`` (v4) and their
        type one of ``types`` (v5), both case-insensitive; an empty filter keeps everything."""
        with self._lock:
            out = {}
            for g in self._groups.values():
                if isinstance(g, ConsumerGroup):
                    out[g.group_id] = ListedGroup(g.group_id, g.state, K.CONSUMER, PROTOCOL_TYPE)
                elif g.state != C.DEAD:
                    out[g.group_id] = ListedGroup(g.group_id, g.state, C.CLASSIC, g.protocol_type or "")
        for gid in known:
            out.setdefault(gid, ListedGroup(gid, C.EMPTY, C.CLASSIC, ""))
        states = {s.strip().lower() for s in states}
        types = {t.strip().lower() for t in types}
        return sorted((g for g in out.values() if (not states or g.state.lower() in states)
                       and (not types or g.type.lower() in types)), key=lambda x: x.group_id)

    def owned_partitions(self, group_id: str) -> set[TopicPartition]:
        """Partitions the group's members hold or subscribe to (OffsetDelete refuses those)."""
        d = self.describe(group_id)
        return {tp for m in d.members for tp in m.partitions}

    def delete_groups(self, group_ids: Sequence[str], *, known: Callable[[str], bool] = lambda g: False
                      ) -> dict[str, KafkaError | None]:
        """DeleteGroups: each empty group's state and committed offsets go (``NON_EMPTY_GROUP`` while it has
        members, ``GROUP_ID_NOT_FOUND`` if neither this coordinator nor ``known`` -- the offsets store -- knows
        it). The tombstones are written before this returns."""
        out: dict[str, KafkaError | None] = {}
        deleting = []
        with self._lock:
            for gid in group_ids:
                try:
                    validate_group_id(gid)
                    g = self._groups.get(gid)
                    if g is None and not known(gid):
                        raise GroupIdNotFound(f"group {gid} does not exist")
                    if g is not None and not g.is_empty:
                        raise NonEmptyGroup(f"group {gid} still has {len(g.members)} members")
                    deleting.append(gid)
                    out[gid] = None
                except KafkaError as e:
                    out[gid] = e
            for gid in deleting:
                self._drop(gid)
        for gid in deleting:
            if self._store is not None:
                try:
                    offset = self._store.delete_group(gid)
                    with self._lock:
                        self._saved_at[gid] = max(self._saved_at.get(gid, -1), offset)
                except KafkaError as e:
                    out[gid] = e
        return out

    def _drop(self, group_id: str) -> None:
        g = self._groups.pop(group_id, None)
        if isinstance(g, ClassicGroup):
            g.state = C.DEAD
        self._dirty.discard(group_id)

    # ================================================================================================
    # timers, metadata, persistence
    # ================================================================================================
    def tick(self) -> None:
        """Fire every due timer: sessions, joins, initial delays, pending syncs, revocations (call ~every 100 ms)."""
        with self._lock:
            now = self._clock()
            for g in list(self._groups.values()):
                if isinstance(g, ConsumerGroup):
                    self._tick_consumer(g, now)
                else:
                    self._tick_classic(g, now)

    def refresh_metadata(self) -> None:
        """Re-resolve consumer groups' regexes and re-read the partition counts they subscribe to; a change of
        either bumps the group's epoch (Kafka's metadata refresh and regex refresh). Reads storage outside the
        lock."""
        with self._lock:
            now = self._clock()
            due = [g for g in self._groups.values() if isinstance(g, ConsumerGroup) and g.members
                   and now - g.metadata_checked >= self.config.metadata_check_interval_ms / 1000]
            regexes = {r for g in due for r in g.regexes()}
            named = {t for g in due for m in g.members.values() for t in m.subscribed}
        if not due:
            return
        resolved = self._resolve(regexes) if regexes else {}
        topics = sorted(named.union(*resolved.values()))
        counts = dict(self._partition_counts(topics)) if topics else {}
        with self._lock:
            for t in topics:
                self._counts[t] = int(counts.get(t, 0))
            for g in due:
                g.metadata_checked = self._clock()
                if self._groups.get(g.group_id) is not g or not g.members:
                    continue
                matches = {r: resolved[r] for r in g.regexes() if r in resolved}
                changed = {r: m for r, m in matches.items() if g.resolved.get(r) != m}
                if changed:
                    log.info("group %s: regexes resolved anew %s", g.group_id,
                             {r: sorted(m) for r, m in changed.items()})
                    g.resolved.update(changed)
                new = {t: self._counts.get(t, 0) for t in sorted(g.subscribed_topics())}
                if new != g.partition_counts or changed:
                    if new != g.partition_counts:
                        log.info("group %s: partition counts changed %s -> %s", g.group_id, g.partition_counts,
                                 new)
                    g.partition_counts = new
                    g.group_epoch += 1
                    self._update_target(g)
                    self._dirty.add(g.group_id)

    def persist(self) -> None:
        """Write the state of every group changed since the last call to ``__consumer_offsets``."""
        if self._store is None:
            return
        with self._persist_lock:
            with self._lock:
                dirty, self._dirty = self._dirty, set()
                snapshots = {gid: group_record(self._groups[gid]) for gid in dirty if gid in self._groups}
            for gid, value in snapshots.items():
                try:
                    offset = self._store.save_group(gid, value)
                except KafkaError as e:
                    log.warning("saving group %s failed (retried): %s", gid, e)
                    with self._lock:
                        self._dirty.add(gid)
                    continue
                with self._lock:
                    self._saved_at[gid] = max(self._saved_at.get(gid, -1), offset)

    def follow(self) -> None:
        """Apply group state written by other processes: restore groups this front does not hold, forget groups
        deleted elsewhere (a tombstone newer than this front's last write of the group)."""
        if self._store is None:
            return
        records = self._store.group_records()
        now = self._clock()
        with self._lock:
            for gid, (offset, value) in records.items():
                if offset <= self._saved_at.get(gid, -1):
                    continue
                self._saved_at[gid] = offset
                g = self._groups.get(gid)
                if value is None:
                    if g is not None and g.is_empty:
                        log.info("group %s: deleted by another process", gid)
                        self._drop(gid)
                    elif g is not None:
                        self._dirty.add(gid)  # live members here: this front's state wins
                    continue
                if g is None or g.is_empty:
                    restored = restore_group(gid, value, now, self.config)
                    if restored is not None:
                        self._groups[gid] = restored
                        if isinstance(restored, ConsumerGroup):  # the counts its target was computed for
                            for t, n in restored.partition_counts.items():
                                self._counts.setdefault(t, n)

    def group_ids(self) -> set[str]:
        with self._lock:
            return set(self._groups)
