"""Dependencies of the v3 routes: the path's cluster id checked, and the cluster's link builder."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from api.v3.errors import ClusterNotFound
from api.v3.resources import Links


async def cluster_links(cluster_id: str, request: Request) -> Links:
    """Links of this front's cluster; 404 ``Cluster X cannot be found.`` for any other id."""
    if cluster_id != request.app.state.cluster_id:
        raise ClusterNotFound(f"Cluster {cluster_id} cannot be found.")
    return Links(str(request.base_url), cluster_id)


LinksDep = Annotated[Links, Depends(cluster_links)]
