"""DescribeClientQuotas and AlterClientQuotas (KIP-546) over the root's cluster metadata; every front enforces
the quotas in force (kafka_front/throttle.py).  As in Kafka: DescribeConfigs on the cluster to describe,
AlterConfigs on the cluster to alter."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import TYPE_CHECKING

from lakelog.broker.authorizer import CLUSTER
from lakelog.broker.public_message import public_message
from lakelog.cluster.cluster_metadata import MetadataImage
from lakelog.errors import ClusterAuthorizationFailed, InvalidRequest, KafkaError
from lakelog.quota.client_quota import Component, altered, check_alteration, entity_of, matching

from kafka_front.entry_error import entry_error

if TYPE_CHECKING:
    from kafka_front.connection import Connection
    from kafka_front.context import FrontContext
    from kafka_front.request import Request


def _fail(e: KafkaError) -> dict:
    return {"error_code": e.code, "error_message": public_message(e.message)}


def _entity(entity) -> list[dict]:
    return [{"entity_type": t, "entity_name": n} for t, n in entity]


async def describe_client_quotas(ctx: "FrontContext", conn: "Connection", rq: "Request") -> dict:
    if not ctx.authorizer.allowed(conn.principal, "DescribeConfigs", CLUSTER):
        e = ClusterAuthorizationFailed(f"{conn.principal.name} is not authorized to DescribeConfigs the cluster")
        ctx.metrics.count_error(e)
        return {**_fail(e), "entries": None}
    image = await asyncio.to_thread(ctx.cluster_metadata.catch_up) if ctx.cluster_metadata else MetadataImage()
    try:
        found = matching(image.quotas, [Component(c.entity_type, c.match_type, c.match) for c in rq.body.components],
                         rq.body.strict)
    except KafkaError as e:
        ctx.metrics.count_error(e)
        return {**_fail(e), "entries": None}
    return {"error_code": 0, "error_message": None, "entries": [
        {"entity": _entity(entity), "values": [{"key": k, "value": v} for k, v in sorted(values.items())]}
        for entity, values in found]}


async def alter_client_quotas(ctx: "FrontContext", conn: "Connection", rq: "Request") -> dict:
    req = rq.body
    raw = [list((e.entity_type, e.entity_name) for e in entry.entity) for entry in req.entries]
    if not ctx.authorizer.allowed(conn.principal, "AlterConfigs", CLUSTER):
        e = ClusterAuthorizationFailed(f"{conn.principal.name} is not authorized to AlterConfigs the cluster")
        ctx.metrics.count_error(e)
        return {"entries": [{**_fail(e), "entity": _entity(pairs)} for pairs in raw]}
    results: list[KafkaError | None] = []
    changes = []
    seen: set = set()
    for entry, pairs in zip(req.entries, raw):
        try:
            entity = entity_of(pairs)
            if entity in seen:
                raise InvalidRequest(f"Ignoring duplicate entity {pairs}")
            seen.add(entity)
            changes.append((entity, check_alteration(entity, [(o.key, None if o.remove else float(o.value))
                                                              for o in entry.ops])))
            results.append(None)
        except KafkaError as e:
            ctx.metrics.count_error(e)
            results.append(e)
    if changes and not req.validate_only:

        def change(image: MetadataImage) -> MetadataImage:
            quotas = image.quotas
            for entity, c in changes:
                quotas = altered(quotas, entity, c)
            return dataclasses.replace(image, quotas=quotas)

        try:
            if ctx.cluster_metadata is None:
                raise InvalidRequest("this front keeps no cluster metadata")
            await asyncio.to_thread(ctx.cluster_metadata.update, change)
        except Exception as e:
            failure = entry_error(ctx, e, "AlterClientQuotas", "quotas")
            results = [r or failure for r in results]
    return {"entries": [{**(_fail(r) if r else {"error_code": 0, "error_message": None}), "entity": _entity(pairs)}
                        for r, pairs in zip(results, raw)]}
