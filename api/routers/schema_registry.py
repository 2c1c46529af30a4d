"""Confluent's Schema Registry REST API at ``/schema-registry`` (point a registry client's ``url`` there).

Thin: each route decodes its request, calls :class:`~lakelog.schema_registry.schema_registry.SchemaRegistry`
(``log.schemas``) and encodes Confluent's answer. Errors are Confluent's: ``{"error_code", "message"}`` with
its codes (40401, 40402, 40403, 409, 42201, ...; see docs/schema-registry.md). Bodies are read as hostile:
size-bounded, JSON checked field by field (``422`` for a malformed one).

Access, when the front has an auth file: a subject's reads need Describe on the resource ``Subject`` named
after it, registration Write, deletes Delete, its compatibility level and mode Alter; global levels and modes
need Alter on the cluster; schemas by id need only a known principal.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse, PlainTextResponse
from starlette.concurrency import run_in_threadpool

from lakelog.broker.authorizer import CLUSTER, SUBJECT, Authorizer, Principal
from lakelog.errors import KafkaError, SaslAuthenticationFailed
from lakelog.schema.parsed_schema import AVRO, PROTOBUF, SCHEMA_TYPES, SchemaReference, check_nesting_text
from lakelog.schema.schema_errors import InvalidSchema, SchemaRegistryError, StoreError, UnprocessableEntity
from lakelog.schema.schema_limits import MAX_REFERENCES, MAX_SCHEMA_BYTES
from lakelog.schema_registry.schema_registry import Registered, SchemaRegistry

PREFIX = "/schema-registry"
MEDIA_TYPE = "application/vnd.schemaregistry.v1+json"
MAX_BODY_BYTES = 2 * MAX_SCHEMA_BYTES  # a schema, escaped, and its references
# Bodies up to this size are parsed on the event loop, where a thread hop would cost more than the parse. It is
# smaller than api.produce_lane.INLINE_PARSE_BYTES[JSON], which bounds json.loads alone: check_nesting_text runs
# a Python loop per character first, several times slower per byte than json.loads.
INLINE_PARSE_BYTES = 32 << 10

# Confluent documents this API (and its clients implement it); it stays out of the front's own OpenAPI document,
# whose fuzzing expects typed parameters -- tests/schema_registry/test_registry_hostile.py fuzzes these routes.
router = APIRouter(prefix=PREFIX, tags=["schema registry"], include_in_schema=False)


class RegistryResponse(JSONResponse):
    media_type = MEDIA_TYPE


def _answer(body: Any, status: int = 200) -> Response:
    return RegistryResponse(body, status_code=status)


def registry_error(error: SchemaRegistryError) -> Response:
    return RegistryResponse(error.to_dict(), status_code=error.http_status)


async def _run(request: Request, fn, *args, **kwargs) -> Response:
    """Run a registry call off the event loop; its result as JSON, its error as Confluent's body."""
    try:
        return _answer(await run_in_threadpool(fn, *args, **kwargs))
    except SchemaRegistryError as e:
        return registry_error(e)
    except KafkaError as e:  # the store failed underneath
        return registry_error(StoreError(f"the schema store failed: {e.name}"))


def _registry(request: Request) -> SchemaRegistry:
    return request.app.state.log.schemas


def _allowed(request: Request, operation: str, resource_type: str = CLUSTER, name: str | None = None) -> Response | None:
    """None when the caller may; else Confluent's 401 (unknown caller) or 403 answer."""
    authorizer: Authorizer = request.app.state.authorizer
    try:
        principal: Principal = authorizer.authenticate(request.headers.get("authorization"))
    except SaslAuthenticationFailed as e:
        return RegistryResponse({"error_code": 40101, "message": e.message}, status_code=401,
                                headers={"WWW-Authenticate": "Bearer"})
    if operation and not authorizer.allowed(principal, operation, resource_type, name or "kafka-cluster"):
        what = f"subject {name!r}" if resource_type == SUBJECT else "the registry's global settings"
        return RegistryResponse({"error_code": 40301, "message": f"{principal.name} is not authorized to "
                                                                 f"{operation} {what}"}, status_code=403)
    return None


def _describable(request: Request):
    """Whether the caller may Describe a subject (listings show only those)."""
    authorizer: Authorizer = request.app.state.authorizer
    principal = authorizer.authenticate(request.headers.get("authorization"))
    return lambda subject: authorizer.allowed(principal, "Describe", SUBJECT, subject)


def _flag(request: Request, name: str, default: bool = False) -> bool:
    value = request.query_params.get(name)
    return default if value is None else value.strip().lower() == "true"


def _parse_body(raw: bytes) -> dict:
    """The JSON object in ``raw`` (``422`` if it is not one)."""
    try:
        text = raw.decode("utf-8")
        check_nesting_text(text, "request body")
        body = json.loads(text) if text.strip() else None
    except (UnicodeDecodeError, ValueError, RecursionError, InvalidSchema):
        raise UnprocessableEntity("Unrecognized field: the request body is not a JSON object") from None
    if not isinstance(body, dict):
        raise UnprocessableEntity("the request body must be a JSON object")
    return body


async def _body(request: Request) -> dict:
    """The request's JSON object (``422`` if it is not one, or larger than :data:`MAX_BODY_BYTES`).

    A body above :data:`INLINE_PARSE_BYTES` is parsed in the thread pool: the event loop is the Kafka listener's
    too, and its connections wait while a large body is checked and parsed."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        chunks.append(chunk)
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise UnprocessableEntity(f"the request body is larger than {MAX_BODY_BYTES} bytes")
    raw = b"".join(chunks)
    if size <= INLINE_PARSE_BYTES:
        return _parse_body(raw)
    return await run_in_threadpool(_parse_body, raw)


def _schema_fields(body: dict) -> tuple[str, str, tuple[SchemaReference, ...]]:
    """(type, text, references) of a schema request body (``schema``, ``schemaType``, ``references``)."""
    text = body.get("schema")
    if not isinstance(text, str):
        raise UnprocessableEntity("the field 'schema' must be a string") if "schema" in body else \
            InvalidSchema("Empty schema")
    schema_type = body.get("schemaType") or AVRO
    if not isinstance(schema_type, str) or schema_type.upper() not in SCHEMA_TYPES:
        raise UnprocessableEntity(f"the field 'schemaType' must be one of {', '.join(SCHEMA_TYPES)}")
    refs = body.get("references") or []
    if not isinstance(refs, list) or len(refs) > MAX_REFERENCES:
        raise UnprocessableEntity(f"the field 'references' must be a list of at most {MAX_REFERENCES}")
    out = []
    for r in refs:
        if (not isinstance(r, dict) or not isinstance(r.get("name"), str) or not isinstance(r.get("subject"), str)
                or isinstance(r.get("version"), bool) or not isinstance(r.get("version"), int)):
            raise UnprocessableEntity("each reference must be {\"name\": str, \"subject\": str, \"version\": int}")
        out.append(SchemaReference(r["name"], r["subject"], r["version"]))
    return schema_type.upper(), text, tuple(out)


def _version_body(v: Registered) -> dict:
    out: dict = {"subject": v.subject, "version": v.version, "id": v.id}
    if v.schema_type != AVRO:
        out["schemaType"] = v.schema_type
    if v.references:
        out["references"] = [r.to_dict() for r in v.references]
    out["schema"] = v.schema
    return out


def _schema_body(registry: SchemaRegistry, schema_id: int, fmt: str | None, fetch_max_id: bool) -> dict:
    stored = registry.schema(schema_id)
    out: dict = {}
    if stored.schema_type != AVRO:
        out["schemaType"] = stored.schema_type
    if stored.references:
        out["references"] = [r.to_dict() for r in stored.references]
    text = stored.schema
    if fmt == "serialized" and stored.schema_type == PROTOBUF:
        text = registry.parse(PROTOBUF, stored.schema, stored.references).serialized()
    out["schema"] = text
    if fetch_max_id:
        out["maxId"] = registry.max_id()
    return out


def _schema_id(raw: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if not 0 < value < 2**31:
        from lakelog.schema.schema_errors import SchemaNotFound

        raise SchemaNotFound(f"Schema {raw} not found")
    return value


# -- the root and schemas by id -----------------------------------------------------------------------------
@router.get("", include_in_schema=False)
@router.get("/")
async def root(request: Request) -> Response:
    """Confluent's root answers an empty object (clients probe it)."""
    return _allowed(request, "") or _answer({})


@router.get("/schemas/types")
async def schema_types(request: Request) -> Response:
    return _allowed(request, "") or _answer(["JSON", "PROTOBUF", "AVRO"])


@router.get("/schemas/ids/{schema_id}")
async def schema_by_id(request: Request, schema_id: str) -> Response:
    denied = _allowed(request, "")
    if denied:
        return denied
    try:
        sid = _schema_id(schema_id)
    except SchemaRegistryError as e:
        return registry_error(e)
    return await _run(request, _schema_body, _registry(request), sid, request.query_params.get("format"),
                      _flag(request, "fetchMaxId"))


@router.get("/schemas/ids/{schema_id}/schema")
async def raw_schema_by_id(request: Request, schema_id: str) -> Response:
    denied = _allowed(request, "")
    if denied:
        return denied
    try:
        stored = await run_in_threadpool(_registry(request).schema, _schema_id(schema_id))
    except SchemaRegistryError as e:
        return registry_error(e)
    return PlainTextResponse(stored.schema, media_type=MEDIA_TYPE)


@router.get("/schemas/ids/{schema_id}/subjects")
async def subjects_by_id(request: Request, schema_id: str) -> Response:
    denied = _allowed(request, "")
    if denied:
        return denied
    registry, deleted = _registry(request), _flag(request, "deleted")

    def answer() -> list[str]:
        return sorted({v.subject for v in registry.id_usages(_schema_id(schema_id), deleted=deleted)})
    return await _run(request, answer)


@router.get("/schemas/ids/{schema_id}/versions")
async def versions_by_id(request: Request, schema_id: str) -> Response:
    denied = _allowed(request, "")
    if denied:
        return denied
    registry, deleted = _registry(request), _flag(request, "deleted")

    def answer() -> list[dict]:
        return [{"subject": v.subject, "version": v.version}
                for v in registry.id_usages(_schema_id(schema_id), deleted=deleted)]
    return await _run(request, answer)


@router.get("/schemas")
async def all_schemas(request: Request) -> Response:
    denied = _allowed(request, "")
    if denied:
        return denied
    registry = _registry(request)

    def answer() -> list[dict]:
        visible = _describable(request)
        found = registry.all_schemas(prefix=request.query_params.get("subjectPrefix") or "",
                                     deleted=_flag(request, "deleted"), latest_only=_flag(request, "latestOnly"))
        return [_version_body(v) for v in found if visible(v.subject)]
    return await _run(request, answer)


# -- subjects -------------------------------------------------------------------------------------------
@router.get("/subjects")
async def subjects(request: Request) -> Response:
    denied = _allowed(request, "")
    if denied:
        return denied
    registry = _registry(request)

    def answer() -> list[str]:
        visible = _describable(request)
        found = registry.subjects(prefix=request.query_params.get("subjectPrefix") or "",
                                  deleted=_flag(request, "deleted"), deleted_only=_flag(request, "deletedOnly"))
        return [s for s in found if visible(s)]
    return await _run(request, answer)


@router.get("/subjects/{subject}/versions")
async def subject_versions(request: Request, subject: str) -> Response:
    return _allowed(request, "Describe", SUBJECT, subject) or await _run(
        request, _registry(request).versions, subject, deleted=_flag(request, "deleted"),
        deleted_only=_flag(request, "deletedOnly"))


@router.get("/subjects/{subject}/versions/{version}")
async def subject_version(request: Request, subject: str, version: str) -> Response:
    registry = _registry(request)

    def answer() -> dict:
        v = registry.version(subject, version, deleted=_flag(request, "deleted"))
        body = _version_body(v)
        if request.query_params.get("format") == "serialized" and v.schema_type == PROTOBUF:
            body["schema"] = registry.parse(PROTOBUF, v.schema, v.references).serialized()
        return body
    return _allowed(request, "Describe", SUBJECT, subject) or await _run(request, answer)


@router.get("/subjects/{subject}/versions/{version}/schema")
async def subject_version_schema(request: Request, subject: str, version: str) -> Response:
    denied = _allowed(request, "Describe", SUBJECT, subject)
    if denied:
        return denied
    try:
        v = await run_in_threadpool(_registry(request).version, subject, version, deleted=_flag(request, "deleted"))
    except SchemaRegistryError as e:
        return registry_error(e)
    return PlainTextResponse(v.schema, media_type=MEDIA_TYPE)


@router.get("/subjects/{subject}/versions/{version}/referencedby")
async def referenced_by(request: Request, subject: str, version: str) -> Response:
    return _allowed(request, "Describe", SUBJECT, subject) or await _run(
        request, _registry(request).referenced_by, subject, version)


@router.post("/subjects/{subject}/versions")
async def register(request: Request, subject: str) -> Response:
    denied = _allowed(request, "Write", SUBJECT, subject)
    if denied:
        return denied
    try:
        body = await _body(request)
        schema_type, text, refs = _schema_fields(body)
        schema_id, version = body.get("id"), body.get("version")
        for name, value in (("id", schema_id), ("version", version)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise UnprocessableEntity(f"the field '{name}' must be an integer")
    except SchemaRegistryError as e:
        return registry_error(e)
    registry = _registry(request)
    return await _run(request, lambda: {"id": registry.register(
        subject, schema_type, text, refs, normalize=_flag(request, "normalize"),
        schema_id=schema_id if schema_id not in (None, -1) else None,
        version=version if version not in (None, -1, 0) else None)})


@router.post("/subjects/{subject}")
async def lookup(request: Request, subject: str) -> Response:
    denied = _allowed(request, "Describe", SUBJECT, subject)
    if denied:
        return denied
    try:
        schema_type, text, refs = _schema_fields(await _body(request))
    except SchemaRegistryError as e:
        return registry_error(e)
    registry = _registry(request)
    return await _run(request, lambda: _version_body(registry.lookup(
        subject, schema_type, text, refs, normalize=_flag(request, "normalize"), deleted=_flag(request, "deleted"))))


@router.delete("/subjects/{subject}")
async def delete_subject(request: Request, subject: str) -> Response:
    return _allowed(request, "Delete", SUBJECT, subject) or await _run(
        request, _registry(request).delete_subject, subject, permanent=_flag(request, "permanent"))


@router.delete("/subjects/{subject}/versions/{version}")
async def delete_version(request: Request, subject: str, version: str) -> Response:
    return _allowed(request, "Delete", SUBJECT, subject) or await _run(
        request, _registry(request).delete_version, subject, version, permanent=_flag(request, "permanent"))


# -- compatibility ----------------------------------------------------------------------------------------
async def _compatibility(request: Request, subject: str, version: str | None) -> Response:
    denied = _allowed(request, "Describe", SUBJECT, subject)
    if denied:
        return denied
    try:
        schema_type, text, refs = _schema_fields(await _body(request))
    except SchemaRegistryError as e:
        return registry_error(e)
    registry, verbose = _registry(request), _flag(request, "verbose")

    def answer() -> dict:
        problems = registry.check(subject, schema_type, text, refs, version=version,
                                  normalize=_flag(request, "normalize"))
        out: dict = {"is_compatible": not problems}
        if verbose:
            out["messages"] = problems
        return out
    return await _run(request, answer)


@router.post("/compatibility/subjects/{subject}/versions/{version}")
async def compatibility_with_version(request: Request, subject: str, version: str) -> Response:
    return await _compatibility(request, subject, version)


@router.post("/compatibility/subjects/{subject}/versions")
async def compatibility_with_versions(request: Request, subject: str) -> Response:
    return await _compatibility(request, subject, None)


# -- config and mode --------------------------------------------------------------------------------------
async def _put(request: Request, field: str, subject: str | None, call) -> Response:
    """A PUT of a level or mode: Alter on the subject (or the cluster), the body's ``field``, ``call(value)``."""
    denied = _allowed(request, "Alter", SUBJECT if subject is not None else CLUSTER, subject)
    if denied:
        return denied
    try:
        body = await _body(request)
        if field not in body:
            raise UnprocessableEntity(f"the body needs the field '{field}'")
    except SchemaRegistryError as e:
        return registry_error(e)
    return await _run(request, call, body[field])


@router.get("/config")
async def get_global_config(request: Request) -> Response:
    return _allowed(request, "") or await _run(
        request, lambda: {"compatibilityLevel": _registry(request).get_config(None)})


@router.put("/config")
async def put_global_config(request: Request) -> Response:
    return await _put(request, "compatibility", None,
                      lambda level: {"compatibility": _registry(request).set_config(None, level)})


@router.delete("/config")
async def delete_global_config(request: Request) -> Response:
    return _allowed(request, "Alter") or await _run(
        request, lambda: {"compatibilityLevel": _registry(request).delete_config(None)})


@router.get("/config/{subject}")
async def get_subject_config(request: Request, subject: str) -> Response:
    return _allowed(request, "Describe", SUBJECT, subject) or await _run(
        request, lambda: {"compatibilityLevel": _registry(request).get_config(
            subject, default_to_global=_flag(request, "defaultToGlobal"))})


@router.put("/config/{subject}")
async def put_subject_config(request: Request, subject: str) -> Response:
    return await _put(request, "compatibility", subject,
                      lambda level: {"compatibility": _registry(request).set_config(subject, level)})


@router.delete("/config/{subject}")
async def delete_subject_config(request: Request, subject: str) -> Response:
    return _allowed(request, "Alter", SUBJECT, subject) or await _run(
        request, lambda: {"compatibilityLevel": _registry(request).delete_config(subject)})


@router.get("/mode")
async def get_global_mode(request: Request) -> Response:
    return _allowed(request, "") or await _run(request, lambda: {"mode": _registry(request).get_mode(None)})


@router.put("/mode")
async def put_global_mode(request: Request) -> Response:
    return await _put(request, "mode", None,
                      lambda mode: {"mode": _registry(request).set_mode(None, mode, force=_flag(request, "force"))})


@router.get("/mode/{subject}")
async def get_subject_mode(request: Request, subject: str) -> Response:
    return _allowed(request, "Describe", SUBJECT, subject) or await _run(
        request, lambda: {"mode": _registry(request).get_mode(subject,
                                                              default_to_global=_flag(request, "defaultToGlobal"))})


@router.put("/mode/{subject}")
async def put_subject_mode(request: Request, subject: str) -> Response:
    return await _put(request, "mode", subject,
                      lambda mode: {"mode": _registry(request).set_mode(subject, mode, force=_flag(request, "force"))})


@router.delete("/mode/{subject}")
async def delete_subject_mode(request: Request, subject: str) -> Response:
    return _allowed(request, "Alter", SUBJECT, subject) or await _run(
        request, lambda: {"mode": _registry(request).delete_mode(subject)})
