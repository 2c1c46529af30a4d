"""Consumer groups over the process's one group coordinator, shared with the HTTP front's members.

lakelog's coordinator computes assignments itself (its module doc): a
JoinGroup is answered once the rebalance completed, naming a leader that is no
member (``LEADER``), so every Kafka client acts as a follower; its SyncGroup
gets the assignment the coordinator computed with the assignor the members
chose (range, roundrobin, sticky, cooperative-sticky -- the same names as the
clients' assignors).  HTTP and Kafka members can share a group.  Only the
``consumer`` protocol type is served.  Committed offsets go to the same
``__consumer_offsets`` store as HTTP commits.
"""

from __future__ import annotations

import asyncio
import io
import zlib
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from kio.index import load_entity_schema
from kio.serial import entity_reader, entity_writer
from kio.static.constants import EntityType

from lakelog.errors import (GroupAuthorizationFailed, GroupIdNotFound, GroupSubscribedToTopic,
                            InconsistentGroupProtocol, InvalidRequest, KafkaError, TopicAuthorizationFailed,
                            TransactionalIdAuthorizationFailed, UnknownMemberId)
from lakelog.group.assignors import TopicPartition

from api.auth import GROUP, TOPIC, TRANSACTIONAL_ID
from api.public_message import public_message
from api.services.offsets import commit_offsets

from kafka_front.context import NODE_ID
from kafka_front.messages import build

if TYPE_CHECKING:
    from kafka_front.connection import Connection
    from kafka_front.context import FrontContext
    from kafka_front.request import Request

LEADER = "lakelog-coordinator"  # no member has this id: every client is a follower
PROTOCOL_TYPE = "consumer"
GROUP_KEY, TRANSACTION_KEY = 0, 1  # FindCoordinator key types: both coordinators hash the key to a live front
# JoinGroup blocks a thread until the rebalance completes: its own pool, so waiting joins never starve fetches.
_JOINS = ThreadPoolExecutor(max_workers=64, thread_name_prefix="kafka-join")


def decode_subscription(metadata: bytes) -> list[str]:
    """The topics of a ConsumerProtocolSubscription (versions 0-3; a newer one is read as 3, as Kafka does)."""
    if len(metadata) < 2:
        raise InvalidRequest("consumer protocol subscription shorter than its version")
    version = min(int.from_bytes(metadata[:2], "big", signed=True), 3)
    if version < 0:
        raise InvalidRequest(f"consumer protocol subscription version {version}")
    try:
        sub, _ = entity_reader(load_entity_schema("consumer_protocol_subscription", version, EntityType.data))(
            metadata, 2)
    except Exception as e:  # kio's reader raises its own buffer errors on truncated input
        raise InvalidRequest(f"malformed consumer protocol subscription: {e}") from None
    return list(sub.topics)


def encode_assignment(partitions: list[TopicPartition]) -> bytes:
    """A ConsumerProtocolAssignment v0 of ``partitions``."""
    cls = load_entity_schema("consumer_protocol_assignment", 0, EntityType.data)
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(partitions):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    value = build(cls, {"assigned_partitions": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()],
                        "user_data": None})
    buf = io.BytesIO()
    buf.write(b"\0\0")
    entity_writer(cls)(buf, value)
    return buf.getvalue()


def _member_call(fn, *args):
    """A coordinator call about a member: an unknown group is the member's unknown id, as Kafka answers
    (clients rejoin on UNKNOWN_MEMBER_ID; GROUP_ID_NOT_FOUND is not what they expect here)."""
    try:
        return fn(*args)
    except GroupIdNotFound as e:
        raise UnknownMemberId(e.message) from None


def _authorize_group(ctx: "FrontContext", conn: "Connection", operation: str, group: str) -> None:
    ctx.authorizer.authorize(conn.principal, operation, GROUP, group)


def coordinator_of(ctx: "FrontContext", group: str) -> dict:
    """The front coordinating ``group``: this one alone, or with several fronts the live front the group's
    name hashes to, the same on every front, so that all of a group's members join one coordinator."""
    if ctx.leases is None:
        return {"node_id": NODE_ID, "host": ctx.host, "port": ctx.port}
    fronts = [f for f in ctx.leases.live() if f.kafka_host is not None]
    if not fronts:
        return {"node_id": ctx.node_id, "host": ctx.host, "port": ctx.port}
    f = fronts[zlib.crc32(group.encode()) % len(fronts)]
    return {"node_id": f.node_id, "host": f.kafka_host, "port": f.kafka_port}


async def find_coordinator(ctx: "FrontContext", conn: "Connection", rq: "Request") -> dict:
    req = rq.body
    keys = list(req.coordinator_keys) if rq.version >= 4 else [req.key]
    key_type = getattr(req, "key_type", 0)
    out = []
    for key in keys:
        entry = {"key": key, "error_code": 0, "error_message": None, **coordinator_of(ctx, key)}
        if key_type == TRANSACTION_KEY:
            e: KafkaError | None = None if ctx.authorizer.allowed(conn.principal, "Describe", TRANSACTIONAL_ID, key) \
                else TransactionalIdAuthorizationFailed(f"not authorized to Describe transactional id {key!r}")
        elif key_type != GROUP_KEY:
            e = InvalidRequest(f"unknown coordinator key type {key_type}")
        elif not ctx.authorizer.allowed(conn.principal, "Describe", GROUP, key):
            e = GroupAuthorizationFailed(f"not authorized to Describe group {key!r}")
        else:
            e = None
        if e is not None:
            entry.update(node_id=-1, host="", port=-1, error_code=e.code, error_message=public_message(e.message))
        out.append(entry)
    if rq.version >= 4:
        return {"coordinators": out}
    return {**out[0], "error_code": out[0]["error_code"]}


async def join_group(ctx: "FrontContext", conn: "Connection", rq: "Request") -> dict:
    req = rq.body
    _authorize_group(ctx, conn, "Read", req.group_id)
    if req.protocol_type != PROTOCOL_TYPE:
        raise InconsistentGroupProtocol(f"protocol type {req.protocol_type!r}: only 'consumer' groups are served")
    if not req.protocols:
        raise InconsistentGroupProtocol("a JoinGroup must name at least one assignment protocol")
    topics = decode_subscription(req.protocols[0].metadata)
    for t in topics:
        if not ctx.authorizer.allowed(conn.principal, "Describe", TOPIC, t):
            raise TopicAuthorizationFailed(f"not authorized to Describe topic {t!r}")
    rebalance_ms = req.rebalance_timeout.total_seconds() * 1000 if rq.version >= 1 else \
        req.session_timeout.total_seconds() * 1000
    loop = asyncio.get_running_loop()
    result = await loop.run_in_executor(_JOINS, lambda: ctx.coordinator.join(
        req.group_id, topics=topics, protocols=[p.name for p in req.protocols], member_id=req.member_id or None,
        group_instance_id=getattr(req, "group_instance_id", None), client_id=rq.client_id or "kafka",
        session_timeout_ms=int(req.session_timeout.total_seconds() * 1000),
        rebalance_timeout_ms=int(rebalance_ms)))
    return {"error_code": 0, "generation_id": result.generation, "protocol_type": PROTOCOL_TYPE,
            "protocol_name": result.protocol, "leader": LEADER, "member_id": result.member_id, "members": []}


async def sync_group(ctx: "FrontContext", conn: "Connection", rq: "Request") -> dict:
    req = rq.body
    _authorize_group(ctx, conn, "Read", req.group_id)
    # a heartbeat checks membership and generation, and answers REBALANCE_IN_PROGRESS while one is pending
    await asyncio.to_thread(_member_call, ctx.coordinator.heartbeat, req.group_id, req.member_id,
                            req.generation_id, getattr(req, "group_instance_id", None))
    desc = await asyncio.to_thread(_member_call, ctx.coordinator.describe, req.group_id)
    member = next((m for m in desc.members if m.member_id == req.member_id), None)
    if member is None:
        raise UnknownMemberId(f"member {req.member_id} is not a member of group {req.group_id}")
    return {"error_code": 0, "protocol_type": PROTOCOL_TYPE, "protocol_name": desc.protocol,
            "assignment": encode_assignment(member.assignment)}


async def heartbeat(ctx: "FrontContext", conn: "Connection", rq: "Request") -> dict:
    req = rq.body
    _authorize_group(ctx, conn, "Read", req.group_id)
    await asyncio.to_thread(_member_call, ctx.coordinator.heartbeat, req.group_id, req.member_id,
                            req.generation_id, getattr(req, "group_instance_id", None))
    return {"error_code": 0}


async def leave_group(ctx: "FrontContext", conn: "Connection", rq: "Request") -> dict:
    req = rq.body
    _authorize_group(ctx, conn, "Read", req.group_id)
    members = [(m.member_id, m.group_instance_id) for m in req.members] if rq.version >= 3 else [(req.member_id, None)]
    out = []
    for member_id, instance in members:
        try:
            if not member_id and instance:  # a static member leaving by instance id
                desc = await asyncio.to_thread(ctx.coordinator.describe, req.group_id)
                member_id = next((m.member_id for m in desc.members if m.group_instance_id == instance), member_id)
            await asyncio.to_thread(_member_call, ctx.coordinator.leave, req.group_id, member_id)
            out.append({"member_id": member_id, "group_instance_id": instance, "error_code": 0})
        except KafkaError as e:
            if rq.version < 3:
                raise
            out.append({"member_id": member_id, "group_instance_id": instance, "error_code": e.code})
    return {"error_code": 0, "members": out}


async def offset_commit(ctx: "FrontContext", conn: "Connection", rq: "Request") -> dict:
    req = rq.body
    generation = getattr(req, "generation_id_or_member_epoch", getattr(req, "generation_id", -1))
    wanted = [(t.name, p) for t in req.topics for p in t.partitions]

    def answer(codes: dict) -> dict:
        topics: dict[str, list] = {}
        for name, p in wanted:
            topics.setdefault(name, []).append({"partition_index": p.partition_index,
                                                "error_code": codes.get((name, p.partition_index), 0)})
        return {"topics": [{"name": n, "partitions": ps} for n, ps in topics.items()]}

    try:
        _authorize_group(ctx, conn, "Read", req.group_id)
    except KafkaError as e:
        return answer({(n, p.partition_index): e.code for n, p in wanted})
    codes = {(n, p.partition_index): TopicAuthorizationFailed.code for n, p in wanted
             if not ctx.authorizer.allowed(conn.principal, "Read", TOPIC, n)}
    ok = [(n, p) for n, p in wanted if (n, p.partition_index) not in codes]
    if ok:
        try:
            await asyncio.to_thread(ctx.coordinator.validate_commit, req.group_id, req.member_id or None, generation,
                                    [TopicPartition(n, p.partition_index) for n, p in ok],
                                    getattr(req, "group_instance_id", None))  # v7+
            await asyncio.to_thread(commit_offsets, ctx.offsets, ctx.metadata, req.group_id,
                                    [(n, p.partition_index, p.committed_offset, p.committed_metadata)
                                     for n, p in ok])
        except KafkaError as e:
            ctx.metrics.count_error(e)
            codes.update({(n, p.partition_index): e.code for n, p in ok})
    return answer(codes)


async def offset_fetch(ctx: "FrontContext", conn: "Connection", rq: "Request") -> dict:
    req = rq.body
    _authorize_group(ctx, conn, "Describe", req.group_id)
    pending = ctx.transactions.pending_offsets(req.group_id) if ctx.transactions is not None else []
    if pending:  # a committed transaction's offsets still being written: finish them first
        await asyncio.to_thread(ctx.transactions.finish_pending, pending)
    committed = await asyncio.to_thread(ctx.offsets.fetch, req.group_id)
    have = {(c.topic, c.partition): c for c in committed}
    if req.topics is None:
        wanted = sorted(have)
    else:
        wanted = [(t.name, p) for t in req.topics for p in t.partition_indexes]
    topics: dict[str, list] = {}
    for name, p in wanted:
        c = have.get((name, p))
        allowed = ctx.authorizer.allowed(conn.principal, "Describe", TOPIC, name)
        topics.setdefault(name, []).append({
            "partition_index": p, "committed_offset": c.offset if c and allowed else -1,
            "committed_leader_epoch": -1, "metadata": c.metadata if c and allowed else "",
            "error_code": 0 if allowed else TopicAuthorizationFailed.code})
    return {"error_code": 0, "topics": [{"name": n, "partitions": ps} for n, ps in topics.items()]}


async def describe_groups(ctx: "FrontContext", conn: "Connection", rq: "Request") -> dict:
    out = []
    for group in rq.body.groups:
        entry = {"group_id": group, "error_code": 0, "group_state": "Dead", "protocol_type": "",
                 "protocol_data": "", "members": [], "authorized_operations": -2147483648}
        if not ctx.authorizer.allowed(conn.principal, "Describe", GROUP, group):
            entry["error_code"] = GroupAuthorizationFailed.code
        else:
            try:
                d = await asyncio.to_thread(ctx.coordinator.describe, group)
                entry.update(group_state=d.state, protocol_type=PROTOCOL_TYPE, protocol_data=d.protocol or "",
                             members=[{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                                       "client_id": m.client_id, "client_host": "", "member_metadata": b"",
                                       "member_assignment": encode_assignment(m.assignment)} for m in d.members])
            except GroupIdNotFound:
                pass  # Kafka describes an unknown group as Dead with no members
        out.append(entry)
    return {"groups": out}


async def list_groups(ctx: "FrontContext", conn: "Connection", rq: "Request") -> dict:
    states = dict(await asyncio.to_thread(ctx.coordinator.list_groups))
    for g in await asyncio.to_thread(ctx.offsets.list_groups):
        states.setdefault(g, "Empty")
    wanted = set(getattr(rq.body, "states_filter", None) or ())
    return {"error_code": 0, "groups": [
        {"group_id": g, "protocol_type": PROTOCOL_TYPE, "group_state": s} for g, s in sorted(states.items())
        if (not wanted or s in wanted) and ctx.authorizer.allowed(conn.principal, "Describe", GROUP, g)]}


async def offset_delete(ctx: "FrontContext", conn: "Connection", rq: "Request") -> dict:
    req = rq.body
    _authorize_group(ctx, conn, "Delete", req.group_id)
    wanted = [(t.name, p.partition_index) for t in req.topics for p in t.partitions]
    owned = set()
    try:
        desc = await asyncio.to_thread(ctx.coordinator.describe, req.group_id)
        owned = {(tp.topic, tp.partition) for m in desc.members for tp in m.assignment}
    except GroupIdNotFound:
        pass
    busy = {tp for tp in wanted if tp in owned}
    await asyncio.to_thread(ctx.offsets.delete_offsets, req.group_id, [tp for tp in wanted if tp not in busy])
    topics: dict[str, list] = {}
    for t, p in wanted:
        topics.setdefault(t, []).append({"partition_index": p, "error_code": GroupSubscribedToTopic.code if (t, p) in busy else 0})
    return {"error_code": 0, "topics": [{"name": n, "partitions": ps} for n, ps in topics.items()]}
