"""ACLs and SCRAM credentials: DescribeAcls, CreateAcls, DeleteAcls, DescribeUserScramCredentials,
AlterUserScramCredentials, over the root's cluster metadata (every front of the root applies them within about
half a second; the front that made a change at once).

As in Kafka: the ACL APIs need Describe (DescribeAcls) or Alter (CreateAcls, DeleteAcls) on the cluster and
answer ``SECURITY_DISABLED`` on a front without an authorizer (no ``--auth-file``); the SCRAM APIs need Describe
or Alter on the cluster.  The ACLs in force are the auth file's and the root's (lakelog.security.acl_store).
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import TYPE_CHECKING

from lakelog.broker.authorizer import CLUSTER
from lakelog.broker.public_message import public_message
from lakelog.cluster.cluster_metadata import MetadataImage
from lakelog.errors import ClusterAuthorizationFailed, KafkaError, SecurityDisabled
from lakelog.security import acl_store, scram_store
from lakelog.security.acl import (OPERATIONS, PATTERN_TYPES, PERMISSIONS, RESOURCE_TYPES, binding_from_codes,
                                  filter_from_codes, group_by_resource)

from kafka_front.entry_error import entry_error

if TYPE_CHECKING:
    from kafka_front.connection import Connection
    from kafka_front.context import FrontContext
    from kafka_front.request import Request


def _denied(ctx: "FrontContext", conn: "Connection", operation: str) -> KafkaError | None:
    if ctx.authorizer.allowed(conn.principal, operation, CLUSTER):
        return None
    return ClusterAuthorizationFailed(f"{conn.principal.name} is not authorized to {operation} the cluster")


def _acl_refusal(ctx: "FrontContext", conn: "Connection", operation: str, disabled: str) -> KafkaError | None:
    """Why an ACL request is refused as a whole: the principal may not ``operation`` the cluster, or the front
    has no authorizer (``disabled``: Kafka's message for it); counted in the metrics."""
    error = _denied(ctx, conn, operation)
    if error is None and not ctx.authorizer.enabled:
        error = SecurityDisabled(disabled)
    if error is not None:
        ctx.metrics.count_error(error)
    return error


def _fail(e: KafkaError) -> dict:
    return {"error_code": e.code, "error_message": public_message(e.message)}


def _store(ctx: "FrontContext"):
    if ctx.cluster_metadata is None:
        raise SecurityDisabled("this front keeps no cluster metadata")
    return ctx.cluster_metadata


async def describe_acls(ctx: "FrontContext", conn: "Connection", rq: "Request") -> dict:
    req = rq.body
    error = _acl_refusal(ctx, conn, "Describe", "No Authorizer is configured on the broker")
    if error is not None:
        return {**_fail(error), "resources": []}
    try:
        f = filter_from_codes(req.resource_type_filter, req.resource_name_filter, req.pattern_type_filter,
                              req.principal_filter, req.host_filter, req.operation, req.permission_type)
    except KafkaError as e:
        ctx.metrics.count_error(e)
        return {**_fail(e), "resources": []}
    matched = [b for b in ctx.authorizer.acls if f.matches(b)]
    return {"error_code": 0, "error_message": None, "resources": [
        {"resource_type": RESOURCE_TYPES[rt], "resource_name": name, "pattern_type": PATTERN_TYPES[pt],
         "acls": [{"principal": b.principal, "host": b.host, "operation": OPERATIONS[b.operation],
                   "permission_type": PERMISSIONS[b.permission]} for b in bindings]}
        for (rt, name, pt), bindings in group_by_resource(matched)]}


async def create_acls(ctx: "FrontContext", conn: "Connection", rq: "Request") -> dict:
    creations = rq.body.creations
    error = _acl_refusal(ctx, conn, "Alter", "No Authorizer is configured.")
    if error is not None:
        return {"results": [_fail(error) for _ in creations]}
    results: list[dict] = []
    valid = []
    for c in creations:
        try:
            valid.append(binding_from_codes(c.resource_type, c.resource_name, c.resource_pattern_type, c.principal,
                                            c.host, c.operation, c.permission_type))
            results.append({"error_code": 0, "error_message": None})
        except KafkaError as e:
            ctx.metrics.count_error(e)
            results.append(_fail(e))
    if valid:
        try:
            store = _store(ctx)
            file_acls = ctx.authorizer.file_acls
            await asyncio.to_thread(store.update, lambda image: dataclasses.replace(
                image, acls=acl_store.create(image.acls, valid, file_acls)))
        except Exception as e:
            failure = entry_error(ctx, e, "CreateAcls", "acls")
            results = [r if r["error_code"] else _fail(failure) for r in results]
    return {"results": results}


async def delete_acls(ctx: "FrontContext", conn: "Connection", rq: "Request") -> dict:
    filters = rq.body.filters
    error = _acl_refusal(ctx, conn, "Alter", "No Authorizer is configured.")
    if error is not None:
        return {"filter_results": [{**_fail(error), "matching_acls": []} for _ in filters]}
    parsed: list = []
    for f in filters:
        try:
            parsed.append(filter_from_codes(f.resource_type_filter, f.resource_name_filter, f.pattern_type_filter,
                                            f.principal_filter, f.host_filter, f.operation, f.permission_type))
        except KafkaError as e:
            ctx.metrics.count_error(e)
            parsed.append(e)
    good = [p for p in parsed if not isinstance(p, KafkaError)]
    matches: list = []

    def change(image: MetadataImage) -> MetadataImage:
        kept, found = acl_store.delete(image.acls, good, ctx.authorizer.file_acls)
        matches[:] = found
        return dataclasses.replace(image, acls=kept)

    try:
        await asyncio.to_thread(_store(ctx).update, change)
    except Exception as e:
        failure = entry_error(ctx, e, "DeleteAcls", "acls")
        return {"filter_results": [{**_fail(failure), "matching_acls": []} for _ in filters]}
    out = []
    found = iter(matches)
    for p in parsed:
        if isinstance(p, KafkaError):
            out.append({**_fail(p), "matching_acls": []})
            continue
        out.append({"error_code": 0, "error_message": None, "matching_acls": [
            {"error_code": e.code if e else 0, "error_message": public_message(e.message) if e else None,
             "resource_type": RESOURCE_TYPES[b.resource_type], "resource_name": b.resource_name,
             "pattern_type": PATTERN_TYPES[b.pattern_type], "principal": b.principal, "host": b.host,
             "operation": OPERATIONS[b.operation], "permission_type": PERMISSIONS[b.permission]}
            for b, e in next(found)]})
    return {"filter_results": out}


def _image(ctx: "FrontContext") -> MetadataImage:
    return ctx.cluster_metadata.image if ctx.cluster_metadata is not None else MetadataImage()


async def describe_user_scram_credentials(ctx: "FrontContext", conn: "Connection", rq: "Request") -> dict:
    error = _denied(ctx, conn, "Describe")
    if error is not None:
        ctx.metrics.count_error(error)
        return {**_fail(error), "results": []}
    users = None if rq.body.users is None else [u.name for u in rq.body.users]
    image = await asyncio.to_thread(_store(ctx).catch_up) if ctx.cluster_metadata is not None else _image(ctx)
    return {"error_code": 0, "error_message": None, "results": [
        {"user": r.user, "error_code": r.error.code if r.error else 0,
         "error_message": public_message(r.error.message) if r.error else None,
         "credential_infos": [{"mechanism": m, "iterations": i} for m, i in r.credentials]}
        for r in scram_store.describe(image.scram, users)]}


async def alter_user_scram_credentials(ctx: "FrontContext", conn: "Connection", rq: "Request") -> dict:
    req = rq.body
    error = _denied(ctx, conn, "Alter")
    users = list(dict.fromkeys([d.name for d in req.deletions] + [u.name for u in req.upsertions]))
    if error is not None:
        ctx.metrics.count_error(error)
        return {"results": [{"user": u, **_fail(error)} for u in users]}
    deletions = [scram_store.Deletion(d.name, d.mechanism) for d in req.deletions]
    upsertions = [scram_store.Upsertion(u.name, u.mechanism, u.iterations, u.salt, u.salted_password)
                  for u in req.upsertions]
    results: list = []

    def change(image: MetadataImage) -> MetadataImage:
        scram, found = scram_store.alter(image.scram, deletions, upsertions)
        results[:] = found
        return dataclasses.replace(image, scram=scram)

    try:
        await asyncio.to_thread(_store(ctx).update, change)
    except Exception as e:
        failure = entry_error(ctx, e, "AlterUserScramCredentials", "credentials")
        return {"results": [{"user": u, **_fail(failure)} for u in users]}
    for r in results:
        if r.error is not None:
            ctx.metrics.count_error(r.error)
    return {"results": [{"user": r.user, "error_code": r.error.code if r.error else 0,
                         "error_message": public_message(r.error.message) if r.error else None} for r in results]}
