"""Produce: ``POST /v1/topics/{topic}/records`` (JSON simple / idempotent form, or an Arrow IPC stream)."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from lakelog.errors import InvalidRequest

from api.auth import Principal
from api.deps import ProduceDep, topic_acl
from api.schemas import INT32_MAX, INT64_MAX, ProduceAccepted, ProduceResponse, error_responses
from api.services.produce import ARROW_STREAM, JSON, ArrowParams, media_type

router = APIRouter(prefix="/v1/topics", tags=["produce"])

PRODUCE_OPENAPI = {
    "requestBody": {
        "required": True,
        "content": {
            JSON: {"schema": {"$ref": "#/components/schemas/ProduceBody"}},
            ARROW_STREAM: {"schema": {"type": "string", "format": "binary"}},
        },
    }
}


@router.post("/{topic}/records", response_model=ProduceResponse, openapi_extra=PRODUCE_OPENAPI,
             responses={202: {"model": ProduceAccepted, "description": "acks=0: queued, not yet committed"},
                        **error_responses(400, 401, 403, 404, 409, 413, 415, 429, 503)})
async def produce(
    topic: str,
    request: Request,
    service: ProduceDep,
    _: Annotated[Principal, Depends(topic_acl("Write"))],
    acks: Annotated[Literal["all", "-1", "1", "0"], Query(description="0: answer 202 before the commit")] = "all",
    producer_id: Annotated[int | None, Query(ge=0, le=INT64_MAX, description="Arrow form only")] = None,
    producer_epoch: Annotated[int | None, Query(ge=0, le=32767, description="Arrow form only")] = None,
    base_sequence: Annotated[int | None, Query(ge=0, le=INT32_MAX, description="Arrow form only")] = None,
    partition: Annotated[int | None, Query(ge=0, le=INT32_MAX, description="Arrow form only")] = None,
) -> JSONResponse:
    """Append records; 200 only once they are durably committed (acks=all).

    The response lists one entry per partition batch; when every batch failed the
    response is the first failure's error (e.g. 409 for a sequence gap).
    """
    params = ArrowParams(producer_id, producer_epoch, base_sequence, partition)
    content_type = request.headers.get("content-type")
    if media_type(content_type) == JSON and params != ArrowParams():
        raise InvalidRequest("producer_id, producer_epoch, base_sequence and partition query parameters apply to "
                             "the Arrow form; the JSON idempotent form carries them in the body")
    body = await request.body()
    prepared = await run_in_threadpool(service.prepare, topic, body, content_type, params)
    if acks == "0":
        service.produce_unacknowledged(prepared)
        return JSONResponse({"topic": topic, "accepted_records": prepared.record_count}, status_code=202)
    results = await service.produce(prepared)
    status, payload = service.report(prepared, results)
    return JSONResponse(payload, status_code=status)
