"""Produce: ``POST /v1/topics/{topic}/records`` (JSON simple / idempotent form, or an Arrow IPC stream)."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse

from api import produce_lane
from api.deps import topic_acl
from api.schemas import INT32_MAX, INT64_MAX, ProduceAccepted, ProduceResponse, error_responses
from api.services.produce import ARROW_STREAM, JSON

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
             dependencies=[Depends(topic_acl("Write"))],  # documents the bearer scheme
             responses={202: {"model": ProduceAccepted, "description": "acks=0: queued, not yet committed"},
                        **error_responses(400, 401, 403, 404, 409, 413, 415, 429, 503)})
async def produce_records(
    topic: str,
    request: Request,
    acks: Annotated[Literal["all", "-1", "1", "0"], Query(description="0: answer 202 before the commit")] = "all",
    producer_id: Annotated[int | None, Query(ge=0, le=INT64_MAX, description="Arrow form only")] = None,
    producer_epoch: Annotated[int | None, Query(ge=0, le=32767, description="Arrow form only")] = None,
    base_sequence: Annotated[int | None, Query(ge=0, le=INT32_MAX, description="Arrow form only")] = None,
    partition: Annotated[int | None, Query(ge=0, le=INT32_MAX, description="Arrow form only")] = None,
) -> JSONResponse:
    """Append records; 200 only once they are durably committed (acks=all).

    The response lists one entry per partition batch; when every batch failed the
    response is the first failure's error (e.g. 409 for a sequence gap).  Requires
    Write on the topic.  Served by :class:`api.produce_lane.ProduceLane` ahead of
    FastAPI's routing; this declaration documents it and answers the same way.
    """
    return await produce_lane.produce(request.app.state, topic, request.query_params,
                                      request.headers.get("authorization"), request.headers.get("content-type"),
                                      await request.body())
