"""Liveness and metrics."""

from __future__ import annotations

from fastapi import APIRouter, Response

from lakelog import __version__

from api.deps import AuthorizerDep, LogDep, MetricsDep
from api.schemas import Health

router = APIRouter(tags=["health"])


@router.get("/v1/health", response_model=Health)
def health(log: LogDep, authorizer: AuthorizerDep) -> dict:
    """Answers once the front has started (its offsets store is loaded)."""
    return {"status": "ok", "root": log.root.uri, "auth": authorizer.enabled, "version": __version__}


@router.get("/metrics", response_class=Response, responses={200: {"content": {"text/plain": {}}}})
def metrics(m: MetricsDep) -> Response:
    """Prometheus text exposition."""
    return Response(m.render(), media_type=m.content_type)
