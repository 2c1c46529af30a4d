"""Parse-only produce endpoint for ``bench/http_produce.py`` (mounted only with ``bench_endpoints``).

It does all of a produce request's HTTP and parsing work -- read the body,
parse JSON or Arrow, partition, validate -- and stops before the commit: the
HTTP ceiling of the produce path.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from api import produce_lane

router = APIRouter(prefix="/v1/bench", tags=["bench"], include_in_schema=False)


@router.post("/parse/{topic}")
async def parse_only(topic: str, request: Request) -> JSONResponse:
    """Served by :class:`api.produce_lane.ProduceLane`, like produce; declared here for routing and labels."""
    return await produce_lane.produce(request.app.state, topic, request.query_params,
                                      request.headers.get("authorization"), request.headers.get("content-type"),
                                      await request.body(), parse_only=True)
