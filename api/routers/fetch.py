"""Fetch for non-Spark consumers: ``GET /v1/topics/{topic}/partitions/{p}/records``."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Path, Query

from lakelog.broker.authorizer import Principal
from lakelog.broker.fetch import DEFAULT_MAX_BYTES, DEFAULT_MAX_RECORDS, fetch_records

from api.deps import LogDep, topic_acl
from api.schemas import INT32_MAX, INT64_MAX, Encoding, FetchOut, error_responses

router = APIRouter(prefix="/v1/topics", tags=["fetch"])


@router.get("/{topic}/partitions/{partition}/records", response_model=FetchOut,
            responses=error_responses(400, 401, 403, 404, 416))
def fetch(
    topic: str,
    partition: Annotated[int, Path(ge=0, le=INT32_MAX)],
    log: LogDep,
    _: Annotated[Principal, Depends(topic_acl("Read"))],
    offset: Annotated[int, Query(ge=-INT64_MAX, le=INT64_MAX, description="first offset to return")],
    max_records: Annotated[int, Query(ge=1, le=100_000)] = DEFAULT_MAX_RECORDS,
    max_bytes: Annotated[int, Query(ge=1, le=1 << 30)] = DEFAULT_MAX_BYTES,
    encoding: Encoding = "utf8",
    isolation_level: Literal["read_uncommitted", "read_committed"] = "read_uncommitted",
) -> dict:
    """Committed records from ``offset`` (416 ``OFFSET_OUT_OF_RANGE`` outside [log start offset, high watermark]).

    Both isolation levels answer the same: a topic holds no record of an open or aborted transaction (they are
    staged outside it until commit), so the last stable offset is the high watermark."""
    return fetch_records(log, topic, partition, offset, max_records=max_records, max_bytes=max_bytes,
                         encoding=encoding)
