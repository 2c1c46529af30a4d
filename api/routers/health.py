"""Liveness and metrics."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from lakelog import __version__

from api.deps import AuthorizerDep, LogDep, MetricsDep
from api.schemas import ClusterOut, Health

router = APIRouter(tags=["health"])


@router.get("/v1/health", response_model=Health)
def health(log: LogDep, authorizer: AuthorizerDep) -> dict:
    """Answers once the front has started (its offsets store is loaded)."""
    return {"status": "ok", "root": log.root.uri, "auth": authorizer.enabled, "version": __version__}


@router.get("/v1/cluster", response_model=ClusterOut)
def cluster(request: Request) -> dict:
    """The live fronts sharing this root and their addresses: where to send a partition's produce after a
    ``NOT_LEADER_OR_FOLLOWER`` answer, whose ``leader_id`` names the front holding its lease."""
    keeper = request.app.state.leases
    if keeper is None:
        return {"node_id": None, "fronts": [{"node_id": 1, "http_url": request.app.state.settings.http_url,
                                             "kafka": None}]}
    return {"node_id": keeper.log.node_id,
            "fronts": [{"node_id": f.node_id, "http_url": f.http_url,
                        "kafka": f"{f.kafka_host}:{f.kafka_port}" if f.kafka_host else None} for f in keeper.live()]}


@router.get("/metrics", response_class=Response, responses={200: {"content": {"text/plain": {}}}})
def metrics(m: MetricsDep) -> Response:
    """Prometheus text exposition."""
    return Response(m.render(), media_type=m.content_type)
