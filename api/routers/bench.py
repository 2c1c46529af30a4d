"""Parse-only produce endpoint for ``bench/http_produce.py`` (mounted only with ``bench_endpoints``).

It does all of a produce request's HTTP and parsing work -- read the body,
parse JSON or Arrow, partition, validate -- and stops before the commit: the
HTTP ceiling of the produce path.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool

from api.deps import ProduceDep
from api.services.produce import ArrowParams

router = APIRouter(prefix="/v1/bench", tags=["bench"], include_in_schema=False)


@router.post("/parse/{topic}")
async def parse_only(topic: str, request: Request, service: ProduceDep) -> dict:
    body = await request.body()
    prepared = await run_in_threadpool(service.prepare, topic, body, request.headers.get("content-type"),
                                       ArrowParams())
    return {"topic": topic, "records": prepared.record_count, "batches": len(prepared.batches)}
