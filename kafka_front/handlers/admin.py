"""Topic administration: CreateTopics, DeleteTopics, CreatePartitions, DescribeConfigs, IncrementalAlterConfigs,
DeleteRecords -- through the HTTP front's topic services (internal topics stay read-only).

ACLs as in the HTTP front: Create on the cluster or the topic; Delete, Alter, Describe on the topic.
The replication factor is accepted and ignored (storage is the replica set); ``validate_only`` checks
without writing.  Broker resources describe as empty: lakelog has no broker configs.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from lakelog.errors import (InvalidConfig, InvalidPartitions, InvalidReplicationFactor, InvalidRequest, KafkaError,
                            TopicAlreadyExists, TopicAuthorizationFailed)
from lakelog.storage.topic_config import TOPIC_CONFIGS, validate_configs
from lakelog.storage.topic_name import validate_topic_name

from api.auth import CLUSTER, TOPIC
from api.public_message import public_message
from api.services import topics as topic_service

from kafka_front.entry_error import entry_error
from kafka_front.handlers.cluster import topic_uuid

if TYPE_CHECKING:
    from kafka_front.connection import Connection
    from kafka_front.context import FrontContext
    from kafka_front.request import Request

TOPIC_RESOURCE, BROKER_RESOURCE = 2, 4
DEFAULT_PARTITIONS = 1  # Kafka's num.partitions
SOURCE_DYNAMIC_TOPIC, SOURCE_DEFAULT = 1, 5
OP_SET, OP_DELETE = 0, 1


def _allowed(ctx: "FrontContext", conn: "Connection", operation: str, topic: str) -> None:
    if not ctx.authorizer.allowed(conn.principal, operation, TOPIC, topic):
        raise TopicAuthorizationFailed(f"{conn.principal.name} is not authorized to {operation} topic {topic!r}")


def _error(entry: dict, e: KafkaError) -> dict:
    entry.update(error_code=e.code, error_message=public_message(e.message))
    return entry


async def create_topics(ctx: "FrontContext", conn: "Connection", rq: "Request") -> dict:
    req = rq.body
    out = []
    for t in req.topics:
        entry = {"name": t.name, "error_code": 0, "error_message": None, "num_partitions": -1,
                 "replication_factor": -1, "configs": None}
        try:
            if not ctx.authorizer.allowed(conn.principal, "Create", CLUSTER):
                _allowed(ctx, conn, "Create", t.name)
            if t.assignments:
                raise InvalidRequest("manual replica assignments are not supported: one leader serves every partition")
            if t.replication_factor not in (-1,) and t.replication_factor < 1:
                raise InvalidReplicationFactor(f"replication factor {t.replication_factor}")
            partitions = DEFAULT_PARTITIONS if t.num_partitions == -1 else t.num_partitions
            configs = {c.name: c.value for c in t.configs}
            if req.validate_only:
                validate_topic_name(t.name)
                validate_configs(configs)
                if partitions < 1:
                    raise InvalidPartitions(f"partition count {partitions}")
                if t.name in await asyncio.to_thread(ctx.log.list_topics, True):
                    raise TopicAlreadyExists(f"topic {t.name} already exists")
                entry.update(num_partitions=partitions, replication_factor=1)
            else:
                desc = await asyncio.to_thread(topic_service.create_topic, ctx.log, ctx.metadata, t.name, partitions,
                                               configs)
                entry.update(num_partitions=len(desc.partitions), replication_factor=1,
                             topic_id=topic_uuid(desc.topic_id))
        except Exception as e:
            _error(entry, entry_error(ctx, e, "CreateTopics", t.name))
        out.append(entry)
    return {"topics": out}


async def delete_topics(ctx: "FrontContext", conn: "Connection", rq: "Request") -> dict:
    req = rq.body
    names = [t.name for t in req.topics] if rq.version >= 6 else list(req.topic_names)
    out = []
    for name in names:
        entry = {"name": name, "error_code": 0, "error_message": None}
        try:
            if name is None:
                raise InvalidRequest("deleting topics by id is not supported; name the topic")
            _allowed(ctx, conn, "Delete", name)
            await asyncio.to_thread(topic_service.delete_topic, ctx.log, ctx.metadata, name)
        except Exception as e:
            _error(entry, entry_error(ctx, e, "DeleteTopics", name))
        out.append(entry)
    return {"responses": out}


async def create_partitions(ctx: "FrontContext", conn: "Connection", rq: "Request") -> dict:
    req = rq.body
    out = []
    for t in req.topics:
        entry = {"name": t.name, "error_code": 0, "error_message": None}
        try:
            _allowed(ctx, conn, "Alter", t.name)
            if t.assignments:
                raise InvalidRequest("manual replica assignments are not supported: one leader serves every partition")
            snap = await asyncio.to_thread(ctx.metadata.get, t.name, fresh=True)
            if t.count <= snap.partition_count:
                raise InvalidPartitions(f"topic {t.name} has {snap.partition_count} partitions; the count can only "
                                        f"be increased, not to {t.count}")
            if not req.validate_only:
                await asyncio.to_thread(topic_service.alter_topic, ctx.log, ctx.metadata, t.name, None, t.count)
        except Exception as e:
            _error(entry, entry_error(ctx, e, "CreatePartitions", t.name))
        out.append(entry)
    return {"results": out}


async def describe_configs(ctx: "FrontContext", conn: "Connection", rq: "Request") -> dict:
    out = []
    for r in rq.body.resources:
        entry = {"error_code": 0, "error_message": None, "resource_type": r.resource_type,
                 "resource_name": r.resource_name, "configs": []}
        try:
            if r.resource_type == BROKER_RESOURCE:
                out.append(entry)
                continue
            if r.resource_type != TOPIC_RESOURCE:
                raise InvalidRequest(f"resource type {r.resource_type}: only topics (2) and brokers (4)")
            _allowed(ctx, conn, "Describe", r.resource_name)
            desc = await asyncio.to_thread(ctx.log.describe_topic, r.resource_name)
            keys = set(r.configuration_keys) if r.configuration_keys is not None else None
            entry["configs"] = [
                {"name": k, "value": v, "read_only": False, "is_sensitive": False, "synonyms": [],
                 "config_source": SOURCE_DYNAMIC_TOPIC if k in desc.overrides else SOURCE_DEFAULT,
                 "config_type": 0, "documentation": TOPIC_CONFIGS[k].doc if k in TOPIC_CONFIGS else None}
                for k, v in sorted(desc.configs.items()) if keys is None or k in keys]
        except Exception as e:
            _error(entry, entry_error(ctx, e, "DescribeConfigs", r.resource_name))
        out.append(entry)
    return {"results": out}


async def incremental_alter_configs(ctx: "FrontContext", conn: "Connection", rq: "Request") -> dict:
    req = rq.body
    out = []
    for r in req.resources:
        entry = {"error_code": 0, "error_message": None, "resource_type": r.resource_type,
                 "resource_name": r.resource_name}
        try:
            if r.resource_type != TOPIC_RESOURCE:
                raise InvalidRequest(f"resource type {r.resource_type}: only topic configs can be altered")
            _allowed(ctx, conn, "Alter", r.resource_name)
            configs: dict[str, object] = {}
            for c in r.configs:
                if c.config_operation == OP_SET:
                    configs[c.name] = c.value
                elif c.config_operation == OP_DELETE:  # back to the default: lakelog stores the default's value
                    if c.name not in TOPIC_CONFIGS:
                        raise InvalidConfig(f"unknown topic config {c.name!r}")
                    configs[c.name] = TOPIC_CONFIGS[c.name].default
                else:
                    raise InvalidRequest(f"config operation {c.config_operation} (APPEND/SUBTRACT) is not supported")
            if req.validate_only:
                validate_configs(configs)
            else:
                await asyncio.to_thread(topic_service.alter_topic, ctx.log, ctx.metadata, r.resource_name, configs,
                                        None)
        except Exception as e:
            _error(entry, entry_error(ctx, e, "IncrementalAlterConfigs", r.resource_name))
        out.append(entry)
    return {"responses": out}


async def delete_records(ctx: "FrontContext", conn: "Connection", rq: "Request") -> dict:
    out = []
    for t in rq.body.topics:
        parts = []
        for p in t.partitions:
            entry = {"partition_index": p.partition_index, "low_watermark": -1, "error_code": 0}
            try:
                _allowed(ctx, conn, "Delete", t.name)
                offset = p.offset
                if offset == -1:  # Kafka: up to the high watermark
                    offset = (await asyncio.to_thread(ctx.metadata.get, t.name, fresh=True)).high_watermark(
                        p.partition_index)
                entry["low_watermark"] = await asyncio.to_thread(
                    topic_service.delete_records, ctx.log, ctx.metadata, t.name, p.partition_index, offset)
            except Exception as e:
                entry["error_code"] = entry_error(ctx, e, "DeleteRecords", t.name).code
            parts.append(entry)
        out.append({"name": t.name, "partitions": parts})
    return {"topics": out}
