"""Confluent v3: ``GET /v3/clusters`` and ``GET /v3/clusters/{cluster_id}`` (one cluster: this storage root)."""

from __future__ import annotations

from fastapi import APIRouter, Request

from api.deps import PrincipalDep
from api.v3 import resources as R
from api.v3.brokers import brokers
from api.v3.deps import LinksDep

router = APIRouter(prefix="/v3/clusters", tags=["Cluster (v3)"])


def _cluster(request: Request, links: R.Links) -> dict:
    return R.cluster(links, controller=min(b.node_id for b in brokers(request.app.state)))


@router.get("")
def list_clusters(request: Request, _: PrincipalDep) -> dict:
    """The one cluster this front serves (Confluent's ``KafkaClusterList``)."""
    links = R.Links(str(request.base_url), request.app.state.cluster_id)
    return R.collection("KafkaClusterList", f"{links.root}/clusters", [_cluster(request, links)])


@router.get("/{cluster_id}")
def get_cluster(request: Request, links: LinksDep, _: PrincipalDep) -> dict:
    """The cluster; its ``controller`` is the live broker of the lowest node id, as the Kafka listener says."""
    return _cluster(request, links)
