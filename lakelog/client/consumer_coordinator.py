"""A consumer's side of its group (Kafka's ``ConsumerCoordinator``, on the consumer protocol of KIP-848), over the
front's HTTP API: joining, the heartbeat thread, applying the assignments the front sends, leaving, and the group's
committed offsets.

The front assigns with its server-side assignor (``group_remote_assignor``, ``uniform`` or ``range``) and no
member ever waits for another. A background thread heartbeats (every ``heartbeat_interval_ms`` or the front's
interval, whichever is shorter) with the partitions this consumer owns; when an answer changes the assignment, the
next poll applies it (:meth:`ConsumerCoordinator.ensure_membership`): partitions taken away are committed (with
auto-commit) and revoked (``on_revoke``), new ones assigned (``on_assign``), and a heartbeat reports the revocation
at once so the partitions can move. A partition is never owned by two members: the front hands it to its new owner
only after the old one reported it gone. A member the front no longer knows (``FENCED_MEMBER_EPOCH``,
``UNKNOWN_MEMBER_ID``: its session expired) loses its partitions without committing (``on_revoke``, as Kafka's
default ``onPartitionsLost``) and joins again.

Not thread-safe, like its consumer; what the heartbeat thread shares with it is guarded by one lock.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Callable, Mapping
from urllib.parse import quote

from lakelog.client.subscription_state import SubscriptionState
from lakelog.client.transport import Transport
from lakelog.errors import (FencedInstanceId, FencedMemberEpoch, GroupIdNotFound, IllegalGeneration, InvalidRequest,
                            KafkaError, RebalanceInProgress, StaleMemberEpoch, UnknownMemberId, UnreleasedInstanceId)
from lakelog.group.assignors import TopicPartition

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class OffsetAndMetadata:
    """A committed position: the offset of the next record to consume, and free-form metadata."""

    offset: int
    metadata: str = ""


@dataclass(frozen=True)
class GroupSettings:
    """A member's settings, in kafka-python's spelling."""

    group_id: str | None
    group_instance_id: str | None
    client_id: str
    group_remote_assignor: str | None
    enable_auto_commit: bool
    auto_commit_interval_s: float
    session_timeout_ms: int
    heartbeat_interval_s: float
    rebalance_timeout_ms: int
    metadata_max_age_s: float


def _partitions(rows) -> frozenset[TopicPartition] | None:
    return None if rows is None else frozenset(TopicPartition(r["topic"], r["partition"]) for r in rows)


class ConsumerCoordinator:
    """One consumer's membership of ``settings.group_id`` through the front at ``http`` (None: no front, so no
    group). ``list_topics``: the topics a subscription pattern is matched against."""

    def __init__(self, settings: GroupSettings, http: Transport | None, subscriptions: SubscriptionState,
                 list_topics: Callable[[], list[str]]) -> None:
        self.settings = settings
        self.http = http
        self.subs = subscriptions
        self._list_topics = list_topics
        self._path = f"/v1/groups/{quote(settings.group_id, safe='')}" if settings.group_id else ""
        # shared with the heartbeat thread (single attribute reads/writes only)
        self.member_id: str | None = None
        self.epoch = -1  # -1: not a member
        self._lock = threading.Lock()  # guards what the heartbeat thread and poll share (below)
        self._target: frozenset[TopicPartition] | None = None  # an assignment the front sent, not applied yet
        self._owned: frozenset[TopicPartition] = frozenset()  # what poll applied
        self._applying: frozenset[TopicPartition] = frozenset()  # a target poll is applying now
        self._sent_topics: tuple[str, ...] = ()
        self.lost = False  # the front no longer knows this member: its partitions are gone
        self.needs_join = threading.Event()
        self.fatal: KafkaError | None = None
        self._hb_stop = threading.Event()
        self._hb_now = threading.Event()
        self._hb_thread: threading.Thread | None = None
        self._hb_interval_s = settings.heartbeat_interval_s
        self._last_commit = time.monotonic()

    def match_pattern(self) -> tuple[str, ...]:
        return self.subs.match(self._list_topics())

    def subscription_changed(self) -> None:
        """A member's next heartbeat carries the new subscription (at once); a new one joins in the next poll."""
        self._hb_now.set()

    # -- membership ---------------------------------------------------------------------------
    def ensure_membership(self) -> None:
        """Join if not a member (or fenced), follow a changed pattern match, and apply the newest assignment."""
        if self.fatal is not None:
            raise self.fatal
        subs = self.subs
        if subs.manual or not subs.topics and subs.pattern is None:
            return
        if self.lost:
            self.lose_all()
        if subs.pattern is not None and time.monotonic() - subs.pattern_checked > self.settings.metadata_max_age_s:
            topics = self.match_pattern()
            if topics != subs.topics:
                subs.topics = topics
                self._hb_now.set()  # the next heartbeat carries the new subscription
        if self.member_id is None or self.needs_join.is_set():
            if subs.topics:
                self._join()
        self._apply_target()

    def _join(self) -> None:
        s = self.settings
        self.needs_join.clear()
        body = {"topics": list(self.subs.topics), "server_assignor": s.group_remote_assignor,
                "client_id": s.client_id, "session_timeout_ms": s.session_timeout_ms,
                "rebalance_timeout_ms": s.rebalance_timeout_ms, "member_id": self.member_id,
                "group_instance_id": s.group_instance_id}
        try:
            joined = self.http.json("POST", f"{self._path}/members", json=body)
        except UnreleasedInstanceId as e:  # the previous process of this instance id has not left or expired
            log.info("group %s: %s; retrying", s.group_id, e)
            self.needs_join.set()
            return
        except KafkaError as e:
            if e.retriable:
                self.needs_join.set()
            raise
        with self._lock:
            self.member_id, self.epoch = joined["member_id"], joined["member_epoch"]
            self._target = _partitions(joined["assignment"])
            self._sent_topics = self.subs.topics
            self._hb_interval_s = min(s.heartbeat_interval_s, joined["heartbeat_interval_ms"] / 1000)
        self.lost = False
        self._start_heartbeat()

    def _apply_target(self) -> None:
        """Apply the newest assignment the front sent: revoke what it no longer lists, assign what it adds."""
        subs = self.subs
        with self._lock:
            target, self._target = self._target, None
            if target is None:
                return
            # until applied, heartbeats report both: the front must not hand on what this member may still hold
            self._applying = target | self._owned
        current = set(subs.assignment)
        revoked, added = sorted(current - target), sorted(target - current)
        if revoked:
            self.revoke(revoked)
        subs.assignment |= set(added)
        with self._lock:
            self._owned = frozenset(subs.assignment)
            self._applying = frozenset()
        if added and subs.on_assign is not None:
            subs.on_assign(added)
        if revoked:
            self._hb_now.set()  # tell the front at once, so the partitions can move on

    def revoke(self, partitions: list[TopicPartition], *, commit: bool = True) -> None:
        """Give ``partitions`` back: commit their positions first (with auto-commit), then ``on_revoke``."""
        if commit and self.settings.enable_auto_commit:
            self._commit_quietly(set(partitions))
        if self.subs.on_revoke is not None and partitions:
            self.subs.on_revoke(partitions)
        self.drop(set(partitions))

    def lose_all(self) -> None:
        """The front dropped this member: its partitions already belong to others; commit nothing."""
        self.lost = False
        lost = sorted(self.subs.assignment)
        if lost and self.subs.on_revoke is not None:
            self.subs.on_revoke(lost)
        self.drop(set(lost))

    def drop(self, partitions: set[TopicPartition]) -> None:
        """Stop consuming ``partitions`` (and stop reporting them owned)."""
        self.subs.drop(partitions)
        with self._lock:
            self._owned = frozenset(self.subs.assignment)

    def _commit_quietly(self, partitions: set[TopicPartition]) -> None:
        mine = {tp: o for tp, o in self.subs.positions.items() if tp in partitions}
        if not mine:
            return
        try:
            self.commit(mine)
        except KafkaError as e:  # the member was fenced or the front is away: the next owner re-reads
            log.warning("offset commit before a revocation failed for group %s: %s", self.settings.group_id, e)

    def _start_heartbeat(self) -> None:
        if self._hb_thread is None:
            self._hb_stop = threading.Event()
            self._hb_thread = threading.Thread(target=self._heartbeat_loop, args=(self._hb_stop,), daemon=True,
                                               name=f"lakelog-heartbeat-{self.settings.client_id}")
            self._hb_thread.start()

    def stop_heartbeat(self) -> None:
        """Stop heartbeating, without leaving the group (as a crashed member)."""
        self._hb_stop.set()
        self._hb_now.set()
        if self._hb_thread is not None and self._hb_thread is not threading.current_thread():
            self._hb_thread.join(timeout=10)
        self._hb_thread = None

    def _heartbeat_loop(self, stop: threading.Event) -> None:
        while not stop.is_set():
            self._hb_now.wait(self._hb_interval_s)
            self._hb_now.clear()
            if stop.is_set():
                return
            self._heartbeat_once()
            if self.fatal is not None:
                return

    def _heartbeat_once(self) -> None:
        s = self.settings
        with self._lock:  # owned: what this member holds or may hold once poll applies what it was sent
            member, epoch = self.member_id, self.epoch
            owned = self._owned | self._applying | (self._target or frozenset())
        if member is None or self.needs_join.is_set():
            return
        topics = self.subs.topics
        body = {"member_epoch": epoch, "owned": [{"topic": tp.topic, "partition": tp.partition} for tp in owned],
                "topics": list(topics) if topics != self._sent_topics else None,
                "group_instance_id": s.group_instance_id}
        try:
            r = self.http.json("POST", f"{self._path}/members/{quote(member, safe='')}/heartbeat", json=body,
                               timeout=max(self._hb_interval_s * 3, 5))
        except (FencedMemberEpoch, UnknownMemberId, GroupIdNotFound) as e:
            log.info("group %s: member %s must rejoin: %s", s.group_id, member, e)
            with self._lock:
                if self.member_id == member:
                    self.epoch, self._target = 0, None
                    self.lost = True
                    self.needs_join.set()
            return
        except (FencedInstanceId, UnreleasedInstanceId) as e:
            self.fatal = e
            return
        except KafkaError as e:  # the front may be restarting: keep trying within the session timeout
            log.debug("heartbeat of %s in group %s failed: %s", member, s.group_id, e)
            return
        with self._lock:
            if self.member_id != member:
                return
            self._sent_topics = topics
            self.epoch = r["member_epoch"]
            self._hb_interval_s = min(s.heartbeat_interval_s, r["heartbeat_interval_ms"] / 1000)
            if r.get("assignment") is not None:
                self._target = _partitions(r["assignment"])

    def leave(self) -> None:
        """Stop heartbeating and leave the group (a static member only for now: KIP-345, member epoch -2)."""
        self.stop_heartbeat()
        s = self.settings
        if self.member_id is not None and self.http is not None:
            params = {"group_instance_id": s.group_instance_id} if s.group_instance_id else None
            try:
                self.http.request("DELETE", f"{self._path}/members/{quote(self.member_id, safe='')}",
                                  params=params)
            except KafkaError as e:
                log.warning("leaving group %s failed (the session timeout will remove %s): %s",
                            s.group_id, self.member_id, e)
        with self._lock:
            self.member_id, self.epoch = None, -1

    # -- offsets --------------------------------------------------------------------------------------
    def fetch_committed(self, topics: set[str]) -> dict[TopicPartition, OffsetAndMetadata]:
        """The group's committed offsets of ``topics``."""
        out = {}
        for topic in sorted(topics):
            rows = self.http.json("GET", f"{self._path}/offsets", params={"topic": topic})
            for r in rows["offsets"]:
                if r.get("offset") is not None and r["offset"] >= 0:
                    out[TopicPartition(r["topic"], r["partition"])] = OffsetAndMetadata(r["offset"],
                                                                                        r.get("metadata") or "")
        return out

    def commit(self, offsets: Mapping[TopicPartition, int | OffsetAndMetadata]) -> None:
        """Commit ``offsets`` for the group, as this member at its epoch (a simple commit without one)."""
        s = self.settings
        if s.group_id is None or self.http is None:
            raise InvalidRequest("commit needs group_id and bootstrap")
        entries = []
        for tp, o in sorted(offsets.items()):
            offset = o.offset if isinstance(o, OffsetAndMetadata) else o
            if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
                raise InvalidRequest(f"offset to commit for {tp} must be an integer >= 0, got {offset!r}")
            entries.append({"topic": tp.topic, "partition": tp.partition, "offset": offset,
                            "metadata": o.metadata if isinstance(o, OffsetAndMetadata) else None})
        body: dict = {"offsets": entries}
        if self.member_id is not None:
            body.update(member_id=self.member_id, generation_id=self.epoch)
            if s.group_instance_id:
                body["group_instance_id"] = s.group_instance_id
        self.http.json("POST", f"{self._path}/offsets", json=body)
        self._last_commit = time.monotonic()

    def maybe_auto_commit(self) -> None:
        """With auto-commit, the positions of every assigned partition once ``auto_commit_interval_ms`` passed."""
        s = self.settings
        if s.enable_auto_commit and time.monotonic() - self._last_commit >= s.auto_commit_interval_s:
            self._last_commit = time.monotonic()
            try:
                if positions := self.subs.assigned_positions():
                    self.commit(positions)
            except (IllegalGeneration, UnknownMemberId, RebalanceInProgress, StaleMemberEpoch) as e:
                log.info("auto-commit for group %s refused (%s); the next heartbeat catches up", s.group_id, e)
                self._hb_now.set()
            except KafkaError as e:
                log.warning("auto-commit for group %s failed: %s", s.group_id, e)
