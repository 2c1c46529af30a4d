"""Confluent v3 produce: ``POST /v3/clusters/{cluster_id}/topics/{topic_name}/records`` (declared for OpenAPI).

Served by :class:`api.v3.produce_lane.V3ProduceLane` ahead of FastAPI's routing, streaming mode included; this
route documents the operation and is what the request timer labels it with.
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

router = APIRouter(prefix="/v3/clusters/{cluster_id}/topics", tags=["Records (v3)"])

PRODUCE_OPENAPI = {
    "requestBody": {"required": True, "content": {"application/json": {"schema": {
        "type": "object", "additionalProperties": False, "properties": {
            "partition_id": {"type": "integer", "minimum": 0, "maximum": 2**31 - 1, "nullable": True},
            "headers": {"type": "array", "items": {"type": "object", "required": ["name"], "additionalProperties": False,
                                                   "properties": {"name": {"type": "string"},
                                                                  "value": {"type": "string", "format": "byte",
                                                                            "nullable": True}}}},
            "key": {"$ref": "#/components/schemas/ProduceRequestData"},
            "value": {"$ref": "#/components/schemas/ProduceRequestData"},
            "timestamp": {"type": "string", "format": "date-time", "nullable": True}}}}}},
}
PRODUCE_DATA_SCHEMA = {"type": "object", "nullable": True, "additionalProperties": False, "properties": {
    "type": {"type": "string", "enum": ["BINARY", "JSON", "STRING"]}, "data": {}}}


@router.post("/{topic_name}/records", openapi_extra=PRODUCE_OPENAPI)
async def produce_records(cluster_id: str, topic_name: str, request: Request) -> Response:
    """Produce records (concatenated JSON objects); one delivery report per record, in order, after the durable
    commit.  ``Transfer-Encoding: chunked`` streams: records are produced as they arrive.  Needs Write on the
    topic."""
    raise AssertionError("served by api.v3.produce_lane.V3ProduceLane")  # pragma: no cover
