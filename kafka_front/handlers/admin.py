"""Topic and broker administration: CreateTopics, DeleteTopics, CreatePartitions, DescribeConfigs, AlterConfigs,
IncrementalAlterConfigs, DeleteRecords -- through the HTTP front's topic services (internal topics stay
read-only) and the root's cluster metadata (dynamic broker configs).

ACLs are Kafka's: Create on the cluster or the topic; Delete, Alter on the topic; DescribeConfigs and
AlterConfigs on the topic, or on the cluster for broker resources.  Replication factors and replica
assignments are checked as a broker of a one-broker cluster checks them (storage is the replica set);
``validate_only`` checks without writing.  AlterConfigs (Kafka's legacy API) replaces a resource's whole set of
dynamic configs; IncrementalAlterConfigs sets, deletes, appends to and subtracts from single keys.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import TYPE_CHECKING

from lakelog.broker import topic_admin
from lakelog.broker.authorizer import CLUSTER, TOPIC
from lakelog.broker.public_message import public_message
from lakelog.cluster import broker_config
from lakelog.cluster.cluster_metadata import MetadataImage
from lakelog.errors import (ClusterAuthorizationFailed, InvalidConfig, InvalidPartitions, InvalidReplicaAssignment,
                            InvalidReplicationFactor, InvalidRequest, KafkaError, TopicAlreadyExists,
                            TopicAuthorizationFailed)
from lakelog.storage.catalog import Catalog
from lakelog.storage.topic_config import (NULL_SERVER_DEFAULTS, OP_APPEND, OP_DELETE, OP_SET, OP_SUBTRACT,
                                          TOPIC_CONFIGS, ConfigOp, TopicConfig, keys_named, replacement_ops,
                                          validate_configs)
from lakelog.storage.topic_name import validate_topic_name

from kafka_front.entry_error import entry_error
from kafka_front.handlers.cluster import brokers, topic_uuid

if TYPE_CHECKING:
    from kafka_front.connection import Connection
    from kafka_front.context import FrontContext
    from kafka_front.request import Request

TOPIC_RESOURCE, BROKER_RESOURCE = 2, 4
SOURCE_DYNAMIC_TOPIC, SOURCE_DEFAULT = broker_config.DYNAMIC_TOPIC_CONFIG, broker_config.DEFAULT_CONFIG


def _allowed(ctx: "FrontContext", conn: "Connection", operation: str, topic: str) -> None:
    if not ctx.authorizer.allowed(conn.principal, operation, TOPIC, topic):
        raise TopicAuthorizationFailed(f"{conn.principal.name} is not authorized to {operation} topic {topic!r}")


def _cluster_allowed(ctx: "FrontContext", conn: "Connection", operation: str) -> None:
    if not ctx.authorizer.allowed(conn.principal, operation, CLUSTER):
        raise ClusterAuthorizationFailed(f"{conn.principal.name} is not authorized to {operation} the cluster")


def _error(entry: dict, e: KafkaError) -> dict:
    entry.update(error_code=e.code, error_message=public_message(e.message))
    return entry


def _partition_count(ctx: "FrontContext", t) -> int:
    """The partitions CreateTopics creates for ``t``, its replication factor and assignments checked as Kafka's
    controller checks them on a cluster whose brokers are the live fronts, each partition kept once."""
    if t.assignments:
        if t.replication_factor != -1:
            raise InvalidRequest("A manual partition assignment was specified, but replication factor was not "
                                 "set to -1.")
        if t.num_partitions != -1:
            raise InvalidRequest("A manual partition assignment was specified, but numPartitions was not set to -1.")
        check_assignments(ctx, [(a.partition_index, list(a.broker_ids)) for a in t.assignments], None)
        return len(t.assignments)
    rf = t.replication_factor
    if rf < -1 or rf == 0:
        raise InvalidReplicationFactor("Replication factor must be larger than 0, or -1 to use the default value.")
    if rf > 1:
        raise _one_replica(rf)
    if t.num_partitions < -1 or t.num_partitions == 0:
        raise InvalidPartitions("Number of partitions was set to an invalid non-positive value.")
    return ctx.broker.num_partitions if t.num_partitions == -1 else t.num_partitions


def _one_replica(rf: int) -> InvalidReplicationFactor:
    return InvalidReplicationFactor(f"Unable to replicate the partition {rf} time(s): The target replication factor "
                                    f"of {rf} cannot be reached because lakelog keeps one replica of each partition "
                                    "(its storage replicates).")


def check_assignments(ctx: "FrontContext", assignments: list[tuple[int | None, list[int]]],
                      first_partition: int | None) -> None:
    """Kafka's checks of manual replica assignments (``INVALID_REPLICA_ASSIGNMENT``), then lakelog's one replica
    per partition (``INVALID_REPLICATION_FACTOR``). ``first_partition``: None for CreateTopics (partitions named,
    0-based and consecutive), else CreatePartitions' first new partition."""
    registered = {n["node_id"] for n in brokers(ctx)}
    seen: set[int] = set()
    factor: int | None = None
    for partition, replicas in assignments:
        if partition is not None:
            if partition in seen:
                raise InvalidReplicaAssignment(f"Found multiple manual partition assignments for partition "
                                               f"{partition}")
            seen.add(partition)
        if not replicas:
            raise InvalidReplicaAssignment("The manual partition assignment includes an empty replica list.")
        previous = None
        for b in sorted(replicas):
            if b not in registered:
                raise InvalidReplicaAssignment(f"The manual partition assignment includes broker {b}, but no such "
                                               "broker is registered.")
            if b == previous:
                raise InvalidReplicaAssignment(f"The manual partition assignment includes the broker {b} more than "
                                               "once.")
            previous = b
        if factor is not None and len(replicas) != factor:
            raise InvalidReplicaAssignment(f"The manual partition assignment includes a partition with "
                                           f"{len(replicas)} replica(s), but this is not consistent with previous "
                                           f"partitions, which have {factor} replica(s).")
        factor = len(replicas)
    if first_partition is None and any(p not in seen for p in range(len(seen))):
        raise InvalidReplicaAssignment("partitions should be a consecutive 0-based integer sequence")
    if factor is not None and factor != 1:
        raise _one_replica(factor)


def _null_configs(configs) -> None:
    nulls = [c.name for c in configs if c.value is None]
    if nulls:
        raise InvalidConfig(f"Null value not supported for topic configs: {','.join(nulls)}")


def _config_entries(overrides: dict[str, str], keys, include_synonyms: bool, include_documentation: bool) -> list[dict]:
    """Topic configs as DescribeConfigs (and CreateTopics v5+) describe them: the override, else Kafka's default
    under its broker synonym (``DEFAULT_CONFIG``)."""
    out = []
    cfg = TopicConfig(overrides).raw()
    for key in keys_named(keys):
        if key not in cfg:
            continue
        cdef = TOPIC_CONFIGS[key]
        synonyms = []
        if key in overrides:
            synonyms.append({"name": key, "value": cfg[key], "source": SOURCE_DYNAMIC_TOPIC})
        if cdef.server_default and cdef.server_default not in NULL_SERVER_DEFAULTS:
            synonyms.append({"name": cdef.server_default, "value": cdef.default, "source": SOURCE_DEFAULT})
        out.append({"name": key, "value": cfg[key], "read_only": False, "is_sensitive": False,
                    "config_source": synonyms[0]["source"] if synonyms else SOURCE_DEFAULT,
                    "synonyms": synonyms if include_synonyms else [],
                    "config_type": cdef.type_code, "documentation": cdef.doc if include_documentation else None})
    return out


async def create_topics(ctx: "FrontContext", conn: "Connection", rq: "Request") -> dict:
    req = rq.body
    out = []
    for t in req.topics:
        entry = {"name": t.name, "error_code": 0, "error_message": None, "num_partitions": -1,
                 "replication_factor": -1, "configs": []}  # Java's AdminClient reads a null list: NPE
        try:
            if not ctx.authorizer.allowed(conn.principal, "Create", CLUSTER):
                _allowed(ctx, conn, "Create", t.name)
            partitions = _partition_count(ctx, t)
            _null_configs(t.configs)
            configs = {c.name: c.value for c in t.configs}
            if req.validate_only:
                validate_topic_name(t.name)
                topic_admin.writable(t.name)
                stored = validate_configs(configs)
                if t.name in await asyncio.to_thread(ctx.log.list_topics, True):
                    raise TopicAlreadyExists(f"Topic '{t.name}' already exists.")
            else:
                desc = await asyncio.to_thread(topic_admin.create_topic, ctx.log, ctx.metadata, t.name, partitions,
                                               configs)
                partitions, stored = len(desc.partitions), desc.overrides
                entry["topic_id"] = topic_uuid(desc.topic_id)
            entry.update(num_partitions=partitions, replication_factor=1)
            if ctx.authorizer.allowed(conn.principal, "DescribeConfigs", TOPIC, t.name):
                entry["configs"] = [{k: c[k] for k in ("name", "value", "read_only", "config_source", "is_sensitive")}
                                    for c in _config_entries(stored, None, False, False)]
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
            await asyncio.to_thread(topic_admin.delete_topic, ctx.log, ctx.metadata, name)
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
            snap = await asyncio.to_thread(ctx.metadata.get, t.name, fresh=True)
            if t.count == snap.partition_count:
                raise InvalidPartitions(f"Topic already has {snap.partition_count} partition(s).")
            if t.count < snap.partition_count:
                raise InvalidPartitions(f"The topic {t.name} currently has {snap.partition_count} partition(s); "
                                        f"{t.count} would not be an increase.")
            if t.assignments is not None:
                added = t.count - snap.partition_count
                if len(t.assignments) != added:
                    raise InvalidReplicaAssignment(f"Attempted to add {added} additional partition(s), but only "
                                                   f"{len(t.assignments)} assignment(s) were specified.")
                check_assignments(ctx, [(None, list(a.broker_ids)) for a in t.assignments], snap.partition_count)
            if not req.validate_only:
                await asyncio.to_thread(topic_admin.alter_topic, ctx.log, ctx.metadata, t.name, None, t.count)
        except Exception as e:
            _error(entry, entry_error(ctx, e, "CreatePartitions", t.name))
        out.append(entry)
    return {"results": out}


def _broker_name(ctx: "FrontContext", name: str) -> str:
    return broker_config.check_broker_name(name, ctx.node_id)


async def describe_configs(ctx: "FrontContext", conn: "Connection", rq: "Request") -> dict:
    req = rq.body
    synonyms = bool(getattr(req, "include_synonyms", False))
    docs = bool(getattr(req, "include_documentation", False))
    out = []
    for r in req.resources:
        entry = {"error_code": 0, "error_message": None, "resource_type": r.resource_type,
                 "resource_name": r.resource_name, "configs": []}
        keys = list(r.configuration_keys) if r.configuration_keys else None
        try:
            if r.resource_type == BROKER_RESOURCE:
                _cluster_allowed(ctx, conn, "DescribeConfigs")
                name = _broker_name(ctx, r.resource_name)
                image = _image(ctx)
                entry["configs"] = broker_config.describe(
                    ctx.broker, name, image.broker_configs.get("", {}), image.broker_configs.get(name, {}), keys,
                    synonyms, docs)
            elif r.resource_type == TOPIC_RESOURCE:
                _allowed(ctx, conn, "DescribeConfigs", r.resource_name)
                validate_topic_name(r.resource_name)
                desc = await asyncio.to_thread(ctx.log.describe_topic, r.resource_name)
                entry["configs"] = _config_entries(desc.overrides, keys, synonyms, docs)
            else:
                raise InvalidRequest(f"Unexpected resource type {r.resource_type} for resource {r.resource_name}: "
                                     "lakelog describes topics (2) and brokers (4)")
        except Exception as e:
            _error(entry, entry_error(ctx, e, "DescribeConfigs", r.resource_name))
        out.append(entry)
    return {"results": out}


def _image(ctx: "FrontContext") -> MetadataImage:
    return ctx.cluster_metadata.image if ctx.cluster_metadata is not None else MetadataImage()


def _check_resource_configs(configs, null_allowed_for_delete: bool) -> None:
    names = [c.name for c in configs]
    if len(names) != len(set(names)):
        raise InvalidRequest("Error due to duplicate config keys")
    nulls = [c.name for c in configs if c.value is None
             and not (null_allowed_for_delete and getattr(c, "config_operation", OP_SET) == OP_DELETE)]
    if nulls:
        raise InvalidRequest(f"Null value not supported for : {', '.join(nulls)}")


async def _alter_broker(ctx: "FrontContext", conn: "Connection", name: str, ops: list[ConfigOp], replace: bool,
                        validate_only: bool) -> None:
    """Apply ``ops`` (AlterConfigs: ``replace``, the resource's whole set) to a broker resource's dynamic configs."""
    _cluster_allowed(ctx, conn, "AlterConfigs")
    name = _broker_name(ctx, name)

    def change(image: MetadataImage) -> MetadataImage:
        configs = dict(image.broker_configs)
        current = {} if replace else dict(configs.get(name, {}))
        changes = broker_config.check_changes(broker_config.apply_ops(current, ops))
        current.update(changes)
        current = {k: v for k, v in current.items() if v is not None}
        if current:
            configs[name] = current
        else:
            configs.pop(name, None)
        return dataclasses.replace(image, broker_configs=configs)

    if validate_only or ctx.cluster_metadata is None:
        change(_image(ctx))
        if ctx.cluster_metadata is None and not validate_only:
            raise InvalidRequest("this front keeps no cluster metadata")
        return
    await asyncio.to_thread(ctx.cluster_metadata.update, change)


async def _alter_topic(ctx: "FrontContext", conn: "Connection", name: str, ops: list[ConfigOp],
                       validate_only: bool) -> None:
    _allowed(ctx, conn, "AlterConfigs", name)
    validate_topic_name(name)
    if validate_only:
        topic_admin.writable(name)
        snap = await asyncio.to_thread(ctx.metadata.get, name, fresh=True)
        Catalog.plan_alter(snap, None, None, ops)
        return
    await asyncio.to_thread(topic_admin.alter_topic, ctx.log, ctx.metadata, name, None, None, ops)


def _duplicated_resources(resources) -> set[tuple[int, str]]:
    seen: dict[tuple[int, str], int] = {}
    for r in resources:
        seen[(r.resource_type, r.resource_name)] = seen.get((r.resource_type, r.resource_name), 0) + 1
    return {k for k, n in seen.items() if n > 1}


async def incremental_alter_configs(ctx: "FrontContext", conn: "Connection", rq: "Request") -> dict:
    return await _alter_configs(ctx, conn, rq, incremental=True)


async def alter_configs(ctx: "FrontContext", conn: "Connection", rq: "Request") -> dict:
    """Kafka's legacy AlterConfigs: the configs given become the resource's whole set of dynamic configs; every
    other one goes back to its default."""
    return await _alter_configs(ctx, conn, rq, incremental=False)


async def _alter_configs(ctx: "FrontContext", conn: "Connection", rq: "Request", *, incremental: bool) -> dict:
    req = rq.body
    duplicated = _duplicated_resources(req.resources)
    out = []
    for r in req.resources:
        entry = {"error_code": 0, "error_message": None, "resource_type": r.resource_type,
                 "resource_name": r.resource_name}
        try:
            if (r.resource_type, r.resource_name) in duplicated:
                raise InvalidRequest("Each resource must appear at most once.")
            _check_resource_configs(r.configs, incremental)
            ops = []
            for c in r.configs:
                op = c.config_operation if incremental else OP_SET
                if op not in (OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT):
                    raise InvalidRequest(f"Unknown operations type {op}")
                ops.append(ConfigOp(op, c.name, c.value))
            if r.resource_type == TOPIC_RESOURCE:
                if not incremental:
                    ops = replacement_ops({c.name: c.value for c in r.configs})
                await _alter_topic(ctx, conn, r.resource_name, ops, req.validate_only)
            elif r.resource_type == BROKER_RESOURCE:
                await _alter_broker(ctx, conn, r.resource_name, ops, not incremental, req.validate_only)
            else:
                raise InvalidRequest(f"Unknown resource type {r.resource_type}: lakelog alters topics (2) and "
                                     "brokers (4)")
        except Exception as e:
            _error(entry, entry_error(ctx, e, "IncrementalAlterConfigs" if incremental else "AlterConfigs",
                                      r.resource_name))
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
                    topic_admin.delete_records, ctx.log, ctx.metadata, t.name, p.partition_index, offset)
            except Exception as e:
                entry["error_code"] = entry_error(ctx, e, "DeleteRecords", t.name).code
            parts.append(entry)
        out.append({"name": t.name, "partitions": parts})
    return {"topics": out}

