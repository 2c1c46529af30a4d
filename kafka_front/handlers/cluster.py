"""Metadata: this process is the one broker and leads every partition."""

from __future__ import annotations

import asyncio
import uuid
from typing import TYPE_CHECKING

from lakelog.errors import KafkaError, TopicAuthorizationFailed
from lakelog.storage.topic_name import is_internal

from api.auth import TOPIC

from kafka_front.context import CLUSTER_ID, NODE_ID

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


def broker(ctx: "FrontContext") -> dict:
    return {"node_id": NODE_ID, "host": ctx.host, "port": ctx.port}


async def metadata(ctx: "FrontContext", conn: "Connection", rq: "Request") -> dict:
    req = rq.body
    requested = None if req.topics is None or (rq.version == 0 and not req.topics) else \
        [t.name for t in req.topics if t.name is not None]
    names = requested if requested is not None else \
        [t for t in await asyncio.to_thread(ctx.log.list_topics) if not is_internal(t)]
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
        topics.append({"name": name, "error_code": 0, "topic_id": topic_uuid(snap.topic_id),
                       "is_internal": False,
                       "partitions": [{"error_code": 0, "partition_index": p, "leader_id": NODE_ID,
                                       "leader_epoch": 0, "replica_nodes": [NODE_ID], "isr_nodes": [NODE_ID]}
                                      for p in range(snap.partition_count)]})
    return {"brokers": [broker(ctx)], "cluster_id": CLUSTER_ID, "controller_id": NODE_ID, "topics": topics}
