"""Metadata and DescribeCluster: a single front is the one broker and leads every partition; with several fronts
on one root (``--node-id``) the brokers are the live fronts and each partition's leader is its lease holder.
Metadata creates missing topics as Kafka's ``auto.create.topics.enable`` does; both answer KIP-430's authorized
operations from the ACLs in force."""

from __future__ import annotations

import asyncio
import uuid
from typing import TYPE_CHECKING

from lakelog.broker import topic_admin
from lakelog.broker.authorizer import CLUSTER, TOPIC
from lakelog.errors import (InvalidRequest, KafkaError, LeaderNotAvailable, MismatchedEndpointType,
                            TopicAlreadyExists, TopicAuthorizationFailed, UnknownTopicId,
                            UnknownTopicOrPartition, UnsupportedEndpointType)
from lakelog.storage.partition_lease import lease_app, unpack
from lakelog.storage.topic_name import is_internal, is_kafka_internal

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


async def _auto_create(ctx: "FrontContext", name: str) -> None:
    """Create ``name`` with ``num.partitions`` partitions (Kafka's auto-creation); one created meanwhile by
    another client or front is as good."""
    try:
        await asyncio.to_thread(topic_admin.create_topic, ctx.log, ctx.metadata, name, ctx.broker.num_partitions,
                                {})
    except TopicAlreadyExists:
        pass


async def metadata(ctx: "FrontContext", conn: "Connection", rq: "Request") -> dict:
    """Kafka's ``handleTopicMetadataRequest``: Describe filters what is shown (named topics one may not describe
    answer ``TOPIC_AUTHORIZATION_FAILED``, listings leave them out); a named topic that does not exist is created
    when the request allows it (v4+: ``allow_auto_topic_creation``; always before) and the front's
    ``auto.create.topics.enable`` is on, if the principal may Create on the cluster or the topic. lakelog creates
    it before answering, so the answer already describes it (a broker answers ``UNKNOWN_TOPIC_OR_PARTITION`` and
    lets the client ask again)."""
    req = rq.body
    requested = None if req.topics is None or (rq.version == 0 and not req.topics) else \
        list(dict.fromkeys(t.name for t in req.topics if t.name is not None))
    by_id = [t.topic_id for t in req.topics or () if t.name is None and getattr(t, "topic_id", None)]
    unknown_ids: list = []
    if by_id:  # KIP-848 clients learn their assignment by topic id and ask for those topics' names
        known = await asyncio.to_thread(_names_by_id, ctx, set(by_id))
        requested = (requested or []) + [known[i] for i in by_id if i in known]
        unknown_ids = [i for i in by_id if i not in known]
    names = requested if requested is not None else \
        [t for t in await asyncio.to_thread(ctx.log.list_topics, True) if is_kafka_internal(t) or not is_internal(t)]
    allow_create = (requested is not None and ctx.broker.auto_create_topics_enable
                    and getattr(req, "allow_auto_topic_creation", True))
    may_create_any = ctx.authorizer.allowed(conn.principal, "Create", CLUSTER)
    nodes = brokers(ctx)
    live = {n["node_id"] for n in nodes}
    with_ops = bool(getattr(req, "include_topic_authorized_operations", False))
    topics = []
    for name in names:
        if not ctx.authorizer.allowed(conn.principal, "Describe", TOPIC, name):
            if requested is not None:
                topics.append({"name": name, "error_code": TopicAuthorizationFailed.code, "partitions": []})
            continue
        entry = await _topic_metadata(ctx, conn, name, live, allow_create, may_create_any)
        if with_ops and entry["error_code"] != TopicAuthorizationFailed.code:
            entry["topic_authorized_operations"] = ctx.authorizer.authorized_operations(conn.principal, TOPIC, name)
        topics.append(entry)
    topics += [{"name": None, "topic_id": i, "error_code": UnknownTopicId.code, "partitions": []} for i in unknown_ids]
    out = {"brokers": nodes, "cluster_id": CLUSTER_ID, "controller_id": min(n["node_id"] for n in nodes),
           "topics": topics}
    if 8 <= rq.version <= 10 and getattr(req, "include_cluster_authorized_operations", False):
        out["cluster_authorized_operations"] = _cluster_operations(ctx, conn)
    return out


async def _topic_metadata(ctx: "FrontContext", conn: "Connection", name: str, live: set[int], allow_create: bool,
                          may_create_any: bool) -> dict:
    for attempt in range(2):
        try:
            snap = ctx.metadata.peek(name) or await asyncio.to_thread(ctx.metadata.get, name)
        except UnknownTopicOrPartition as e:
            if attempt or not allow_create:
                return {"name": name, "error_code": e.code, "partitions": []}
            if not may_create_any and not ctx.authorizer.allowed(conn.principal, "Create", TOPIC, name):
                return {"name": name, "error_code": TopicAuthorizationFailed.code, "partitions": []}
            try:
                await _auto_create(ctx, name)
            except Exception as create_error:
                return {"name": name, "partitions": [], "is_internal": is_internal(name),
                        "error_code": entry_error(ctx, create_error, "Metadata", name).code}
            continue
        except KafkaError as e:
            return {"name": name, "error_code": e.code, "partitions": []}
        except Exception as e:  # a failing store: this topic's KAFKA_STORAGE_ERROR, the others answered
            return {"name": name, "error_code": entry_error(ctx, e, "Metadata", name).code, "partitions": []}
        return {"name": name, "error_code": 0, "topic_id": topic_uuid(snap.topic_id),
                "is_internal": is_kafka_internal(name),
                "partitions": [_partition(ctx, snap, p, live) for p in range(snap.partition_count)]}
    raise AssertionError("unreachable")


def _cluster_operations(ctx: "FrontContext", conn: "Connection") -> int:
    """KIP-430's cluster operations: 0 unless the principal may Describe the cluster, as Kafka answers."""
    if not ctx.authorizer.allowed(conn.principal, "Describe", CLUSTER):
        return 0
    return ctx.authorizer.authorized_operations(conn.principal, CLUSTER)


BROKER_ENDPOINTS, CONTROLLER_ENDPOINTS = 1, 2


async def describe_cluster(ctx: "FrontContext", conn: "Connection", rq: "Request") -> dict:
    """DescribeCluster (KIP-700): the live fronts as brokers (none is ever fenced); KIP-430's cluster operations
    when asked for. Only broker endpoints are served (v1+: ``endpoint_type`` 1)."""
    req = rq.body
    endpoint = getattr(req, "endpoint_type", BROKER_ENDPOINTS)
    if endpoint != BROKER_ENDPOINTS:
        error = (InvalidRequest if rq.version == 0 else
                 MismatchedEndpointType if endpoint == CONTROLLER_ENDPOINTS else UnsupportedEndpointType)
        message = (f"The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type "
                   f"CONTROLLER" if endpoint == CONTROLLER_ENDPOINTS else f"Unsupported endpoint type {endpoint}")
        return {"error_code": error.code, "error_message": message, "endpoint_type": endpoint, "cluster_id": "",
                "controller_id": -1, "brokers": []}
    nodes = brokers(ctx)
    out = {"error_code": 0, "error_message": None, "endpoint_type": BROKER_ENDPOINTS, "cluster_id": CLUSTER_ID,
           "controller_id": min(n["node_id"] for n in nodes),
           "brokers": [{"broker_id": n["node_id"], "host": n["host"], "port": n["port"], "rack": None,
                        "is_fenced": False} for n in nodes]}
    if req.include_cluster_authorized_operations:
        out["cluster_authorized_operations"] = _cluster_operations(ctx, conn)
    return out


def _names_by_id(ctx: "FrontContext", ids: set) -> dict:
    out = {}
    for name in ctx.log.list_topics():
        try:
            tid = topic_uuid(ctx.metadata.get(name).topic_id)
        except KafkaError:
            continue
        if tid in ids:
            out[tid] = name
    return out
