"""A group's state as the value of its record in ``__consumer_offsets`` (Kafka's group metadata records):
written by :func:`group_record`, read back by :func:`restore_group`, shown without a front by :func:`saved_view`."""

from __future__ import annotations

import base64
import logging
from typing import TYPE_CHECKING, Iterable, Mapping

from lakelog.errors import KafkaError
from lakelog.group import classic_group as C
from lakelog.group import consumer_group as K
from lakelog.group.assignors import TopicPartition
from lakelog.group.classic_group import ClassicGroup, ClassicMember
from lakelog.group.consumer_group import ClassicProtocol, ConsumerGroup, ConsumerMember
from lakelog.group.consumer_protocol import decode_assignment

if TYPE_CHECKING:
    from lakelog.group.group_coordinator_config import CoordinatorConfig

log = logging.getLogger(__name__)
Group = ClassicGroup | ConsumerGroup


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _tps(tps: Iterable[TopicPartition]) -> list[list]:
    return [[tp.topic, tp.partition] for tp in sorted(tps)]


def group_record(g: Group) -> dict:
    """The value of ``g``'s record (JSON); a classic group's members are kept only while it is Stable."""
    if isinstance(g, ClassicGroup):
        return {"type": C.CLASSIC, "state": g.state, "generation": g.generation, "protocol_type": g.protocol_type,
                "protocol": g.protocol_name, "leader": g.leader, "members": [
                    {"member_id": m.member_id, "group_instance_id": m.group_instance_id, "client_id": m.client_id,
                     "client_host": m.client_host, "session_timeout_ms": m.session_timeout_ms,
                     "rebalance_timeout_ms": m.rebalance_timeout_ms,
                     "protocols": [[n, _b64(md)] for n, md in m.protocols], "assignment": _b64(m.assignment)}
                    for m in g.members.values()] if g.state == C.STABLE else []}
    return {"type": K.CONSUMER, "state": g.state, "group_epoch": g.group_epoch,
            "assignment_epoch": g.assignment_epoch, "assignor": g.assignor,
            "partition_counts": dict(g.partition_counts),
            "resolved": {r: sorted(ts) for r, ts in g.resolved.items()}, "members": [
                {"member_id": m.member_id, "instance_id": m.instance_id, "client_id": m.client_id,
                 "client_host": m.client_host, "rack_id": m.rack_id, "member_epoch": m.member_epoch,
                 "previous_epoch": m.previous_epoch, "state": m.state, "topics": list(m.subscribed),
                 "server_assignor": m.server_assignor, "rebalance_timeout_ms": m.rebalance_timeout_ms,
                 "session_timeout_ms": m.session_timeout_ms, "assigned": _tps(m.assigned),
                 "pending_revocation": _tps(m.pending_revocation), "target": _tps(g.target.get(m.member_id, ())),
                 "regex": m.subscribed_regex,
                 "classic": None if m.classic is None else {
                     "session_timeout_ms": m.classic.session_timeout_ms,
                     "protocols": [[n, _b64(md)] for n, md in m.classic.protocols]}}
                for m in g.members.values()]}


def restore_group(gid: str, v: Mapping, now: float, config: CoordinatorConfig) -> Group | None:
    """A saved group, its members given a fresh session to reappear; None for a record lakelog cannot read."""
    try:
        if v.get("type") == C.CLASSIC:
            g = ClassicGroup(gid, generation=int(v["generation"]), protocol_type=v.get("protocol_type"),
                             protocol_name=v.get("protocol"))
            for d in v.get("members", []):
                m = ClassicMember(d["member_id"], d.get("group_instance_id"), d.get("client_id", ""),
                                  d.get("client_host", ""), int(d["rebalance_timeout_ms"]),
                                  int(d["session_timeout_ms"]), g.protocol_type or "",
                                  tuple((n, base64.b64decode(md)) for n, md in d["protocols"]),
                                  assignment=base64.b64decode(d.get("assignment", "")))
                m.heartbeat_deadline = now + m.session_timeout_ms / 1000
                g.add(m)
            g.leader = v.get("leader") if v.get("leader") in g.members else next(iter(g.members), None)
            g.state = g.previous_state = C.STABLE if g.members else C.EMPTY
            return g
        if v.get("type") == K.CONSUMER:
            g = ConsumerGroup(gid, group_epoch=int(v["group_epoch"]), assignment_epoch=int(v["assignment_epoch"]),
                              assignor=v.get("assignor"), partition_counts=dict(v.get("partition_counts", {})),
                              resolved={r: frozenset(ts) for r, ts in v.get("resolved", {}).items()})
            g.metadata_checked = now
            for d in v.get("members", []):
                tps = lambda key: frozenset(TopicPartition(t, int(p)) for t, p in d.get(key, []))  # noqa: E731
                classic = d.get("classic")
                m = ConsumerMember(d["member_id"], d.get("instance_id"), d.get("client_id", ""),
                                   d.get("client_host", ""), d.get("rack_id"), int(d["member_epoch"]),
                                   int(d.get("previous_epoch", 0)), d.get("state", K.MEMBER_STABLE),
                                   tuple(d.get("topics", [])), d.get("server_assignor"),
                                   int(d["rebalance_timeout_ms"]), int(d["session_timeout_ms"]), tps("assigned"),
                                   tps("pending_revocation"),
                                   None if classic is None else ClassicProtocol(
                                       int(classic["session_timeout_ms"]),
                                       tuple((n, base64.b64decode(md)) for n, md in classic["protocols"])),
                                   d.get("regex"))
                g.put(m)
                g.target[m.member_id] = tps("target")
                g.session_deadlines[m.member_id] = now + m.session_timeout_ms / 1000
            return g
    except (KeyError, TypeError, ValueError) as e:
        log.warning("group %s: saved state not readable (%s); treated as empty", gid, e)
    return None


def saved_view(value: Mapping | None) -> dict:
    """A saved group record as ``lakelog groups`` shows it without a front: state, protocol (a consumer group's
    assignor), generation (its epoch) and members with the partitions they were given."""
    if not value:
        return {"state": "Empty", "protocol": None, "generation": 0, "members": []}
    members = []
    for d in value.get("members", []):
        if value.get("type") == K.CONSUMER:
            parts = [tuple(tp) for tp in d.get("assigned", [])]
            instance = d.get("instance_id")
        else:
            try:
                parts = [(tp.topic, tp.partition) for tp in
                         decode_assignment(base64.b64decode(d.get("assignment", ""))).partitions]
            except (KafkaError, ValueError):
                parts = []  # not the consumer protocol (connect, sr, ...)
            instance = d.get("group_instance_id")
        members.append({"member_id": d["member_id"], "group_instance_id": instance,
                        "client_id": d.get("client_id", ""), "assignment": sorted(parts)})
    consumer = value.get("type") == K.CONSUMER
    return {"state": value.get("state") or ("Stable" if members else "Empty"),
            "protocol": value.get("assignor") if consumer else value.get("protocol"),
            "generation": int(value.get("group_epoch" if consumer else "generation", 0)), "members": members}
