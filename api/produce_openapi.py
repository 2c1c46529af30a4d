"""The OpenAPI entries of the operations served as plain ASGI, generated from the schemas those lanes use.

``POST /v1/topics/{topic}/records`` (:class:`api.produce_lane.ProduceLane`) and
``POST /v3/clusters/{cluster_id}/topics/{topic_name}/records`` (:class:`api.v3.produce_lane.V3ProduceLane`) are
answered ahead of FastAPI's routing (their produce rate, BENCHMARKS.md, HTTP produce), so no FastAPI route
declares them. Their entries are made here instead: the query parameters from the lane's own tables
(``ACKS``, ``QUERY_LIMITS``), the bodies from the msgspec structs it decodes (``api.produce_body``) and the
answers from the pydantic models of what it encodes (``api.schemas``).
"""

from __future__ import annotations

from pydantic.json_schema import models_json_schema

from api.produce_body import openapi_components
from api.produce_lane import ACKS, QUERY_LIMITS, ROUTE
from api.produce_request import ARROW_STREAM, JSON
from api.schemas import ErrorBody, ProduceAccepted, ProduceResponse
from api.v3.produce_lane import ROUTE as V3_ROUTE

REF = "#/components/schemas/{model}"
V1_ERRORS = (400, 401, 403, 404, 409, 413, 415, 429, 503)
V3_ERRORS = (400, 401, 403, 404, 413, 415, 429, 503)

PRODUCE_DATA_SCHEMA = {"type": "object", "nullable": True, "additionalProperties": False, "properties": {
    "type": {"type": "string", "enum": ["BINARY", "JSON", "STRING"]}, "data": {}}}
V3_RECORD_SCHEMA = {
    "type": "object", "additionalProperties": False, "properties": {
        "partition_id": {"type": "integer", "minimum": 0, "maximum": 2**31 - 1, "nullable": True},
        "headers": {"type": "array", "items": {"type": "object", "required": ["name"], "additionalProperties": False,
                                               "properties": {"name": {"type": "string"},
                                                              "value": {"type": "string", "format": "byte",
                                                                        "nullable": True}}}},
        "key": {"$ref": "#/components/schemas/ProduceRequestData"},
        "value": {"$ref": "#/components/schemas/ProduceRequestData"},
        "timestamp": {"type": "string", "format": "date-time", "nullable": True}}}
V3_REPORT_SCHEMA = {  # what api.v3.records.reports writes per record (Confluent's ProduceResponse)
    "type": "object", "required": ["error_code"], "properties": {
        "error_code": {"type": "integer", "description": "200, or the record's error (Confluent's codes)"},
        "message": {"type": "string"},
        "cluster_id": {"type": "string"}, "topic_name": {"type": "string"},
        "partition_id": {"type": "integer"}, "offset": {"type": "integer"},
        "timestamp": {"type": "string", "format": "date-time"},
        "key": {"type": "object", "nullable": True,
                "properties": {"type": {"type": "string"}, "size": {"type": "integer"}}},
        "value": {"type": "object", "nullable": True,
                  "properties": {"type": {"type": "string"}, "size": {"type": "integer"}}}}}


def _json(ref_or_schema: dict, description: str) -> dict:
    return {"description": description, "content": {"application/json": {"schema": ref_or_schema}}}


def _path_parameter(name: str) -> dict:
    return {"name": name, "in": "path", "required": True,
            "schema": {"type": "string", "title": name.replace("_", " ").title()}}


def _errors(statuses: tuple[int, ...], schema: dict) -> dict:
    return {str(s): _json(schema, "Kafka error (see docs/http.md)") for s in statuses}


def v1_produce() -> dict:
    """The path item of ``POST /v1/topics/{topic}/records``."""
    params = [_path_parameter("topic"),
              {"name": "acks", "in": "query", "required": False, "description": "0: answer 202 before the commit",
               "schema": {"enum": list(ACKS), "type": "string", "default": "all", "title": "Acks"}}]
    for name, limit in QUERY_LIMITS.items():
        params.append({"name": name, "in": "query", "required": False, "description": "Arrow form only",
                       "schema": {"anyOf": [{"type": "integer", "minimum": 0, "maximum": limit}, {"type": "null"}],
                                  "title": name.replace("_", " ").title()}})
    return {"post": {
        "tags": ["produce"], "summary": "Produce Records", "operationId": "produce_records",
        "description": "Append records; 200 only once they are durably committed (acks=all).\n\n"
                       "The response lists one entry per partition batch; when every batch failed the response is "
                       "the first failure's error (e.g. 409 for a sequence gap).  Requires Write on the topic.",
        "security": [{"HTTPBearer": []}],
        "parameters": params,
        "requestBody": {"required": True, "content": {
            JSON: {"schema": {"$ref": "#/components/schemas/ProduceBody"}},
            ARROW_STREAM: {"schema": {"type": "string", "format": "binary"}}}},
        "responses": {"200": _json({"$ref": "#/components/schemas/ProduceResponse"}, "Committed"),
                      "202": _json({"$ref": "#/components/schemas/ProduceAccepted"},
                                   "acks=0: queued, not yet committed"),
                      **_errors(V1_ERRORS, {"$ref": "#/components/schemas/ErrorBody"})}}}


def v3_produce() -> dict:
    """The path item of Confluent v3's ``POST .../topics/{topic_name}/records``."""
    return {"post": {
        "tags": ["Records (v3)"], "summary": "Produce Records", "operationId": "produce_records_v3",
        "description": "Produce records (concatenated JSON objects); one delivery report per record, in order, "
                       "after the durable commit.  ``Transfer-Encoding: chunked`` streams: records are produced as "
                       "they arrive.  Needs Write on the topic.",
        "security": [{"HTTPBearer": []}],
        "parameters": [_path_parameter("cluster_id"), _path_parameter("topic_name")],
        "requestBody": {"required": True, "content": {"application/json": {"schema": V3_RECORD_SCHEMA}}},
        "responses": {"200": _json(V3_REPORT_SCHEMA, "One delivery report per record, each followed by CRLF"),
                      **_errors(V3_ERRORS, {"type": "object", "required": ["error_code", "message"],
                                            "properties": {"error_code": {"type": "integer"},
                                                           "message": {"type": "string"}}})}}}


def add_produce_operations(schema: dict) -> dict:
    """``schema`` (FastAPI's document) with both produce operations and the component schemas they refer to."""
    _, definitions = models_json_schema([(m, "serialization") for m in (ProduceResponse, ProduceAccepted, ErrorBody)],
                                        ref_template=REF)
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    for name, definition in definitions.get("$defs", {}).items():  # FastAPI's own, where other routes made one
        components.setdefault(name, definition)
    components.update(openapi_components())
    components["ProduceRequestData"] = PRODUCE_DATA_SCHEMA
    paths = schema.setdefault("paths", {})
    paths[ROUTE] = v1_produce()
    paths[V3_ROUTE] = v3_produce()
    return schema
