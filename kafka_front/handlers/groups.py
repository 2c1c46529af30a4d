"""Consumer-group APIs over the process's one group coordinator (:mod:`lakelog.group.group_coordinator`), shared
with the HTTP front's members: FindCoordinator, the classic protocol (JoinGroup, SyncGroup, Heartbeat,
LeaveGroup), KIP-848's ConsumerGroupHeartbeat and ConsumerGroupDescribe, offsets (OffsetCommit, OffsetFetch,
OffsetDelete) and the admin APIs (DescribeGroups, ListGroups, DeleteGroups).

A JoinGroup or SyncGroup that has to wait for other members awaits the coordinator's future on the event loop:
no thread is held while a rebalance is pending. Committed offsets go to ``__consumer_offsets``, the same store
as HTTP commits, with their committed leader epoch and metadata.
"""

from __future__ import annotations

import asyncio
import uuid
import zlib
from typing import TYPE_CHECKING

from lakelog.broker.authorizer import GROUP, TOPIC, TRANSACTIONAL_ID
from lakelog.broker.offsets import commit_offsets
from lakelog.broker.public_message import public_message
from lakelog.errors import (GroupAuthorizationFailed, GroupIdNotFound, GroupSubscribedToTopic, InvalidRequest,
                            KafkaError, TopicAuthorizationFailed, TransactionalIdAuthorizationFailed)
from lakelog.group.assignors import TopicPartition
from lakelog.group.consumer_protocol import PROTOCOL_TYPE, decode_subscription

from kafka_front.context import NODE_ID
from kafka_front.handlers.cluster import topic_uuid

if TYPE_CHECKING:
    from kafka_front.connection import Connection
    from kafka_front.context import FrontContext
    from kafka_front.request import Request

GROUP_KEY, TRANSACTION_KEY = 0, 1  # FindCoordinator key types: both coordinators hash the key to a live front
NO_AUTHORIZED_OPERATIONS = -2147483648


def _group_operations(ctx: "FrontContext", conn: "Connection", req, group: str) -> int:
    """KIP-430's authorized operations of ``group`` when the request asks for them (include_authorized_operations),
    else Kafka's "not asked" value."""
    if not getattr(req, "include_authorized_operations", False):
        return NO_AUTHORIZED_OPERATIONS
    return ctx.authorizer.authorized_operations(conn.principal, GROUP, group)
KAFKA_MIN_OFFSET = -(2**63)  # a broker stores whatever offset OffsetCommit sends


def _authorize_group(ctx: "FrontContext", conn: "Connection", operation: str, group: str) -> None:
    ctx.authorizer.authorize(conn.principal, operation, GROUP, group)


def _host(conn: "Connection") -> str:
    peer = conn.peer
    return f"/{peer[0]}" if isinstance(peer, tuple) and peer else ""


def _error_code(e: Exception | None) -> int:
    """The Kafka error code of a coordinator's per-entry error (0 for none); anything but a KafkaError is raised."""
    if e is None:
        return 0
    if isinstance(e, KafkaError):
        return e.code
    raise e


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
    return out[0]


# -- the classic protocol -------------------------------------------------------------------------------
async def join_group(ctx: "FrontContext", conn: "Connection", rq: "Request") -> dict:
    req = rq.body
    _authorize_group(ctx, conn, "Read", req.group_id)
    protocols = [(p.name, bytes(p.metadata or b"")) for p in req.protocols]
    if req.protocol_type == PROTOCOL_TYPE and protocols:
        try:
            topics = decode_subscription(protocols[0][1]).topics
        except KafkaError:
            topics = ()  # the coordinator relays bytes it does not read; only a consumer group would refuse them
        for t in topics:
            if not ctx.authorizer.allowed(conn.principal, "Describe", TOPIC, t):
                raise TopicAuthorizationFailed(f"not authorized to Describe topic {t!r}")
    session_ms = int(req.session_timeout.total_seconds() * 1000)
    rebalance_ms = int(req.rebalance_timeout.total_seconds() * 1000) if rq.version >= 1 else session_ms
    future = await asyncio.to_thread(
        ctx.coordinator.join_group, req.group_id, member_id=req.member_id or "", protocol_type=req.protocol_type,
        protocols=protocols, session_timeout_ms=session_ms, rebalance_timeout_ms=rebalance_ms,
        group_instance_id=getattr(req, "group_instance_id", None), client_id=rq.client_id or "",
        client_host=_host(conn), require_known_member_id=rq.version >= 4)
    r = await asyncio.wrap_future(future)  # parked until the rebalance moves on: no thread waits
    code = _error_code(r.error)
    if code:
        ctx.metrics.count_error(r.error)
    return {"error_code": code, "generation_id": r.generation, "protocol_type": r.protocol_type,
            "protocol_name": r.protocol_name if r.protocol_name is not None or rq.version >= 7 else "",
            "leader": r.leader, "skip_assignment": r.skip_assignment, "member_id": r.member_id,
            "members": [{"member_id": m.member_id, "group_instance_id": m.group_instance_id, "metadata": m.metadata}
                        for m in r.members]}


async def sync_group(ctx: "FrontContext", conn: "Connection", rq: "Request") -> dict:
    req = rq.body
    _authorize_group(ctx, conn, "Read", req.group_id)
    future = await asyncio.to_thread(
        ctx.coordinator.sync_group, req.group_id, member_id=req.member_id, generation=req.generation_id,
        group_instance_id=getattr(req, "group_instance_id", None), protocol_type=getattr(req, "protocol_type", None),
        protocol_name=getattr(req, "protocol_name", None),
        assignments={a.member_id: bytes(a.assignment or b"") for a in req.assignments})
    r = await asyncio.wrap_future(future)  # a follower waits here for the leader's assignment
    code = _error_code(r.error)
    if code:
        ctx.metrics.count_error(r.error)
    return {"error_code": code, "protocol_type": r.protocol_type, "protocol_name": r.protocol_name,
            "assignment": r.assignment}


async def heartbeat(ctx: "FrontContext", conn: "Connection", rq: "Request") -> dict:
    req = rq.body
    _authorize_group(ctx, conn, "Read", req.group_id)
    await asyncio.to_thread(ctx.coordinator.heartbeat, req.group_id, req.member_id, req.generation_id,
                            getattr(req, "group_instance_id", None))
    return {"error_code": 0}


async def leave_group(ctx: "FrontContext", conn: "Connection", rq: "Request") -> dict:
    req = rq.body
    _authorize_group(ctx, conn, "Read", req.group_id)
    members = [(m.member_id, m.group_instance_id) for m in req.members] if rq.version >= 3 else [(req.member_id, None)]
    errors = await asyncio.to_thread(ctx.coordinator.leave_group, req.group_id, members)
    if rq.version < 3 and errors[0] is not None:
        raise errors[0]
    return {"error_code": 0, "members": [
        {"member_id": mid, "group_instance_id": inst, "error_code": _error_code(e)}
        for (mid, inst), e in zip(members, errors)]}


# -- KIP-848 ------------------------------------------------------------------------------------------------
def _topic_ids(ctx: "FrontContext", names) -> dict[str, uuid.UUID]:
    out = {}
    for name in names:
        try:
            out[name] = topic_uuid(ctx.metadata.get(name).topic_id)
        except KafkaError:
            pass  # deleted since it was assigned
    return out


def _names_of(ctx: "FrontContext", ids) -> dict[uuid.UUID, str]:
    wanted = set(ids)
    if not wanted:
        return {}
    return {i: n for n, i in _topic_ids(ctx, ctx.log.list_topics()).items() if i in wanted}


def _by_topic_id(ctx: "FrontContext", partitions) -> list[dict]:
    ids = _topic_ids(ctx, {tp.topic for tp in partitions})
    by: dict[str, list[int]] = {}
    for tp in sorted(partitions):
        if tp.topic in ids:
            by.setdefault(tp.topic, []).append(tp.partition)
    return [{"topic_id": ids[t], "partitions": ps} for t, ps in by.items()]


async def consumer_group_heartbeat(ctx: "FrontContext", conn: "Connection", rq: "Request") -> dict:
    req = rq.body
    _authorize_group(ctx, conn, "Read", req.group_id)
    topics = list(req.subscribed_topic_names) if req.subscribed_topic_names is not None else None
    for t in topics or ():
        if not ctx.authorizer.allowed(conn.principal, "Describe", TOPIC, t):
            raise TopicAuthorizationFailed(f"not authorized to Describe topic {t!r}")
    owned = None
    if req.topic_partitions is not None:
        names = await asyncio.to_thread(_names_of, ctx, {tp.topic_id for tp in req.topic_partitions})
        owned = [TopicPartition(names[tp.topic_id], p) for tp in req.topic_partitions if tp.topic_id in names
                 for p in tp.partitions]
    rebalance_ms = int(req.rebalance_timeout.total_seconds() * 1000)
    r = await asyncio.to_thread(
        ctx.coordinator.consumer_heartbeat, req.group_id, member_id=req.member_id or "",
        member_epoch=req.member_epoch, instance_id=req.instance_id, rack_id=req.rack_id,
        rebalance_timeout_ms=rebalance_ms if rebalance_ms >= 0 else -1, subscribed_topics=topics,
        server_assignor=req.server_assignor, owned=owned, client_id=rq.client_id or "", client_host=_host(conn),
        subscribed_regex=getattr(req, "subscribed_topic_regex", None))  # v1+; "" clears a regex, as in Kafka 4
    assignment = None
    if r.assignment is not None:
        assignment = {"topic_partitions": await asyncio.to_thread(_by_topic_id, ctx, r.assignment)}
    return {"error_code": 0, "member_id": r.member_id, "member_epoch": r.member_epoch,
            "heartbeat_interval": r.heartbeat_interval_ms, "assignment": assignment}


async def consumer_group_describe(ctx: "FrontContext", conn: "Connection", rq: "Request") -> dict:
    out = []
    for group in rq.body.group_ids:
        entry = {"group_id": group, "error_code": 0, "group_state": "Dead", "group_epoch": -1,
                 "assignment_epoch": -1, "assignor_name": "", "members": [],
                 "authorized_operations": NO_AUTHORIZED_OPERATIONS}
        if not ctx.authorizer.allowed(conn.principal, "Describe", GROUP, group):
            entry["error_code"] = GroupAuthorizationFailed.code
            out.append(entry)
            continue
        entry["authorized_operations"] = _group_operations(ctx, conn, rq.body, group)
        try:
            d = await asyncio.to_thread(ctx.coordinator.describe, group)
        except GroupIdNotFound:
            d = None
        if d is None or d.type != "consumer":  # Kafka's messages (kafka-consumer-groups prints them)
            entry.update(error_code=GroupIdNotFound.code, error_message=f"Group {group} not found." if d is None
                         else f"Group {group} is not a consumer group.")
            out.append(entry)
            continue

        def parts(tps) -> dict:
            ids = _topic_ids(ctx, {tp.topic for tp in tps})
            by: dict[str, list[int]] = {}
            for tp in tps:
                if tp.topic in ids:
                    by.setdefault(tp.topic, []).append(tp.partition)
            return {"topic_partitions": [{"topic_id": ids[t], "topic_name": t, "partitions": ps}
                                         for t, ps in sorted(by.items())]}

        members = await asyncio.to_thread(lambda: [
            {"member_id": m.member_id, "instance_id": m.group_instance_id, "rack_id": None,
             "member_epoch": m.member_epoch, "client_id": m.client_id, "client_host": m.client_host,
             "subscribed_topic_names": list(m.topics), "subscribed_topic_regex": m.regex,
             "assignment": parts(m.partitions),
             "target_assignment": parts(m.target)} for m in d.members])
        entry.update(group_state=d.state, group_epoch=d.generation, assignment_epoch=d.assignment_epoch,
                     assignor_name=d.protocol, members=members)
        out.append(entry)
    return {"groups": out}


# -- offsets ------------------------------------------------------------------------------------------------
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
                                    getattr(req, "group_instance_id", None))  # v7+
            await asyncio.to_thread(commit_offsets, ctx.offsets, ctx.metadata, req.group_id,
                                    [(n, p.partition_index, p.committed_offset, p.committed_metadata,
                                      max(getattr(p, "committed_leader_epoch", -1), -1)) for n, p in ok],
                                    min_offset=KAFKA_MIN_OFFSET)
        except KafkaError as e:
            ctx.metrics.count_error(e)
            codes.update({(n, p.partition_index): e.code for n, p in ok})
    return answer(codes)


async def _fetch_group(ctx: "FrontContext", conn: "Connection", group: str, topics) -> dict:
    """One group's OffsetFetch answer: ``topics`` None means every partition the group has committed."""
    pending = ctx.transactions.pending_offsets(group) if ctx.transactions is not None else []
    if pending:  # a committed transaction's offsets still being written: finish them first
        await asyncio.to_thread(ctx.transactions.finish_pending, pending)
    committed = await asyncio.to_thread(ctx.offsets.fetch, group)
    have = {(c.topic, c.partition): c for c in committed}
    wanted = sorted(have) if topics is None else [(t.name, p) for t in topics for p in t.partition_indexes]
    out: dict[str, list] = {}
    for name, p in wanted:
        c = have.get((name, p))
        allowed = ctx.authorizer.allowed(conn.principal, "Describe", TOPIC, name)
        if topics is None and not allowed:
            continue  # Kafka leaves unauthorized topics out of an all-topics fetch
        shown = c if c is not None and allowed else None
        out.setdefault(name, []).append({
            "partition_index": p, "committed_offset": shown.offset if shown else -1,
            "committed_leader_epoch": shown.leader_epoch if shown else -1,
            "metadata": shown.metadata if shown else "",
            "error_code": 0 if allowed else TopicAuthorizationFailed.code})
    return {"topics": [{"name": n, "partitions": ps} for n, ps in out.items()]}


async def offset_fetch(ctx: "FrontContext", conn: "Connection", rq: "Request") -> dict:
    req = rq.body
    if rq.version < 8:
        _authorize_group(ctx, conn, "Describe", req.group_id)
        return {"error_code": 0, **await _fetch_group(ctx, conn, req.group_id, req.topics)}
    groups = []
    for g in req.groups:
        try:
            _authorize_group(ctx, conn, "Describe", g.group_id)
            groups.append({"group_id": g.group_id, "error_code": 0, **await _fetch_group(ctx, conn, g.group_id,
                                                                                        g.topics)})
        except KafkaError as e:
            groups.append({"group_id": g.group_id, "error_code": e.code, "topics": []})
    return {"groups": groups}


async def offset_delete(ctx: "FrontContext", conn: "Connection", rq: "Request") -> dict:
    req = rq.body
    _authorize_group(ctx, conn, "Delete", req.group_id)
    wanted = [(t.name, p.partition_index) for t in req.topics for p in t.partitions]
    owned: set = set()
    subscribed: set = set()
    try:
        d = await asyncio.to_thread(ctx.coordinator.describe, req.group_id)
        owned = {(tp.topic, tp.partition) for m in d.members for tp in m.partitions}
        subscribed = {t for m in d.members for t in m.topics}
    except GroupIdNotFound:
        pass
    busy = {tp for tp in wanted if tp in owned or tp[0] in subscribed}
    await asyncio.to_thread(ctx.offsets.delete_offsets, req.group_id, [tp for tp in wanted if tp not in busy])
    topics: dict[str, list] = {}
    for t, p in wanted:
        topics.setdefault(t, []).append({"partition_index": p,
                                         "error_code": GroupSubscribedToTopic.code if (t, p) in busy else 0})
    return {"error_code": 0, "topics": [{"name": n, "partitions": ps} for n, ps in topics.items()]}


# -- admin ----------------------------------------------------------------------------------------------------
async def describe_groups(ctx: "FrontContext", conn: "Connection", rq: "Request") -> dict:
    out = []
    for group in rq.body.groups or ():
        entry = {"group_id": group, "error_code": 0, "group_state": "Dead", "protocol_type": "",
                 "protocol_data": "", "members": [], "authorized_operations": NO_AUTHORIZED_OPERATIONS}
        if not ctx.authorizer.allowed(conn.principal, "Describe", GROUP, group):
            entry["error_code"] = GroupAuthorizationFailed.code
            out.append(entry)
            continue
        entry["authorized_operations"] = _group_operations(ctx, conn, rq.body, group)
        try:
            d = await asyncio.to_thread(ctx.coordinator.describe, group)
        except GroupIdNotFound:
            if group in await asyncio.to_thread(ctx.offsets.list_groups):
                entry.update(group_state="Empty", protocol_type="")  # known only by its committed offsets
            elif rq.version >= 6:  # KIP-1043: v6 names an unknown group as such; before, Dead with no members
                entry.update(error_code=GroupIdNotFound.code, error_message=f"Group {group} not found.")
            out.append(entry)
            continue
        if d.type == "consumer":
            entry.update(error_code=GroupIdNotFound.code, error_message=f"Group {group} is not a classic group.")
        else:
            entry.update(group_state=d.state, protocol_type=d.protocol_type,
                         protocol_data=d.protocol if d.state == "Stable" else "",
                         members=[{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                                   "client_id": m.client_id, "client_host": m.client_host,
                                   "member_metadata": m.metadata, "member_assignment": m.assignment}
                                  for m in d.members])
        out.append(entry)
    return {"groups": out}


async def list_groups(ctx: "FrontContext", conn: "Connection", rq: "Request") -> dict:
    known = await asyncio.to_thread(ctx.offsets.list_groups)
    listed = await asyncio.to_thread(ctx.coordinator.list_groups, known=known,
                                     states=getattr(rq.body, "states_filter", None) or (),
                                     types=getattr(rq.body, "types_filter", None) or ())
    return {"error_code": 0, "groups": [
        {"group_id": g.group_id, "protocol_type": g.protocol_type, "group_state": g.state, "group_type": g.type}
        for g in listed if ctx.authorizer.allowed(conn.principal, "Describe", GROUP, g.group_id)]}


async def delete_groups(ctx: "FrontContext", conn: "Connection", rq: "Request") -> dict:
    names = list(dict.fromkeys(rq.body.groups_names))
    allowed = [g for g in names if ctx.authorizer.allowed(conn.principal, "Delete", GROUP, g)]
    known = set(await asyncio.to_thread(ctx.offsets.list_groups))
    errors = await asyncio.to_thread(ctx.coordinator.delete_groups, allowed, known=known.__contains__)
    results = []
    for g in names:
        e = errors.get(g) if g in errors else GroupAuthorizationFailed(f"not authorized to Delete group {g!r}")
        results.append({"group_id": g, "error_code": _error_code(e)})
    return {"results": results}
