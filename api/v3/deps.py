"""Dependencies of the v3 routes: the path's cluster id checked, the cluster's link builder, and the ACL checks
on the v3 path parameters ``topic_name`` and ``consumer_group_id``."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from lakelog.broker.authorizer import Principal

from api.deps import AuthorizerDep, PrincipalDep, group_acl, topic_acl
from api.v3.errors import ClusterNotFound
from api.v3.resources import Links


async def cluster_links(cluster_id: str, request: Request) -> Links:
    """Links of this front's cluster; 404 ``Cluster X cannot be found.`` for any other id."""
    if cluster_id != request.app.state.cluster_id:
        raise ClusterNotFound(f"Cluster {cluster_id} cannot be found.")
    return Links(str(request.base_url), cluster_id)


LinksDep = Annotated[Links, Depends(cluster_links)]


def topic_name_acl(operation: str):
    """``api.deps.topic_acl`` on the v3 path parameter ``topic_name``."""
    check = topic_acl(operation)

    async def dep(topic_name: str, principal: PrincipalDep, authorizer: AuthorizerDep) -> Principal:
        return await check(topic_name, principal, authorizer)

    return Depends(dep)


def group_id_acl(operation: str):
    """``api.deps.group_acl`` on the v3 path parameter ``consumer_group_id``."""
    check = group_acl(operation)

    async def dep(consumer_group_id: str, principal: PrincipalDep, authorizer: AuthorizerDep) -> Principal:
        return await check(consumer_group_id, principal, authorizer)

    return Depends(dep)
