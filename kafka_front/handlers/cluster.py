"""Metadata: a single front is the one broker and leads every partition; with several fronts on one root
(``--node-id``) the brokers are the live fronts and each partition's leader is its lease holder."""

from __future__ import annotations

import asyncio
import uuid
from typing import TYPE_CHECKING

from lakelog.errors import KafkaError, LeaderNotAvailable, TopicAuthorizationFailed
from lakelog.storage.partition_lease import lease_app, unpack
from lakelog.storage.topic_name import is_internal

from api.auth import TOPIC

from kafka_front.context import CLUSTER_ID, NODE_ID
from kafka_front.entry_error import entry_error

if TYPE_CHECKING:
    from kafka_front.connection import Connection
    from kafka_front.context import FrontContext
    from kafka_front.request import Request


def topic_uuid(topic_id: str | None) -> uuid.UUID:
    """lakelog's topic id as Kafka's UUID (zero if the table predates topic ids)."""
    try:
        return uuid.UUID(topic_id) if topic_id else uuid.UUID(int=0)
    except ValueError:
        return uuid.UUID(int=0)


def brokers(ctx: "FrontContext") -> list[dict]:
    if ctx.leases is None:
        return [{"node_id": NODE_ID, "host": ctx.host, "port": ctx.port}]
    return [{"node_id": f.node_id, "host": f.kafka_host, "port": f.kafka_port} for f in ctx.leases.live()
            if f.kafka_host is not None] or [{"node_id": ctx.node_id, "host": ctx.host, "port": ctx.port}]


def _partition(ctx: "FrontContext", snap, p: int, live: set[int]) -> dict:
    leader = NODE_ID
    if ctx.leases is not None:
        lease = unpack(snap.txn(lease_app(p)))
        leader = lease.node_id if lease is not None and lease.node_id in live else -1
    entry = {"error_code": 0, "partition_index": p, "leader_id": leader, "leader_epoch": 0,
             "replica_nodes": [leader] if leader >= 0 else [], "isr_nodes": [leader] if leader >= 0 else []}
    if leader < 0:  # held by a front that is gone, or by nobody yet: clients retry until a front takes it
        entry["error_code"] = LeaderNotAvailable.code
    return entry


async def metadata(ctx: "FrontContext", conn: "Connection", rq: "Request") -> dict:
    req = rq.body
    requested = None if req.topics is None or (rq.version == 0 and not req.topics) else \
        [t.name for t in req.topics if t.name is not None]
    names = requested if requested is not None else \
        [t for t in await asyncio.to_thread(ctx.log.list_topics) if not is_internal(t)]
    nodes = brokers(ctx)
    live = {n["node_id"] for n in nodes}
    topics = []
    for name in names:
        if not ctx.authorizer.allowed(conn.principal, "Describe", TOPIC, name):
            if requested is not None:
                topics.append({"name": name, "error_code": TopicAuthorizationFailed.code, "partitions": []})
            continue
        try:
            snap = ctx.metadata.peek(name) or await asyncio.to_thread(ctx.metadata.get, name)
        except KafkaError as e:
            topics.append({"name": name, "error_code": e.code, "partitions": []})
            continue
        except Exception as e:  # a failing store: this topic's KAFKA_STORAGE_ERROR, the others answered
            topics.append({"name": name, "error_code": entry_error(ctx, e, "Metadata", name).code, "partitions": []})
            continue
        topics.append({"name": name, "error_code": 0, "topic_id": topic_uuid(snap.topic_id),
                       "is_internal": False,
                       "partitions": [_partition(ctx, snap, p, live) for p in range(snap.partition_count)]})
    return {"brokers": nodes, "cluster_id": CLUSTER_ID, "controller_id": min(n["node_id"] for n in nodes),
            "topics": topics}
