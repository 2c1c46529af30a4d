"""Produce requests served as plain ASGI: ``POST /v1/topics/{topic}/records`` without FastAPI's stack.

A produce request carries a thousand records or more, and all of its work runs
under one GIL.  Routed through FastAPI -- its middleware, the search through the
included routers, dependency resolution, a thread-pool hop for parsing -- the
request cost about as much interpreter time as parsing its records, and the
front's produce rate was bound by it (BENCHMARKS.md, "HTTP produce").

:class:`ProduceLane` is an ASGI middleware placed inside the body limit and the
request timer; it answers exactly that operation and passes everything else on
to FastAPI; no FastAPI route declares the operation (its OpenAPI entry is made
from this module's tables, ``api.produce_openapi``).  :func:`produce` is the one
implementation of the operation (the console's produce form calls it too): the
broker's produce pipeline (``lakelog.broker.produce``) over the body decoded by
``api.produce_request``, with the front's error bodies (``api.errors``) and
metrics.  The benchmark's parse-only endpoint (``POST /v1/bench/parse/{topic}``,
answered only with ``bench_endpoints``) takes the same lane and stops before
queueing, so the HTTP ceiling it measures is this path's.

Bodies that parse in about a millisecond or less -- :data:`INLINE_PARSE_BYTES`
per media type -- are parsed on the event loop against the topic's cached
metadata: a thread hop costs more than parsing them, and the GIL would serialize
the parse anyway.  Whatever may read storage -- loading the topic's metadata,
re-reading it for a partition beyond the cached count, checking an idempotent
producer's id -- and the parsing of larger bodies run in the thread pool, so the
loop keeps serving (group heartbeats, health checks) meanwhile. An Arrow body counts
by what it decodes to: a small IPC-compressed body that would decompress to more
than the inline size is sent to the thread pool before anything is decompressed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping
from urllib.parse import parse_qsl

from starlette.concurrency import run_in_threadpool
from starlette.responses import JSONResponse

from lakelog import errors as E
from lakelog.broker.error_mapping import unexpected_error

from api.arrow_body import DecodesLarge
from api.errors import error_response
from api.request_timer import RouteLabel
from api.schemas import INT32_MAX, INT64_MAX
from api.produce_request import ARROW_STREAM, JSON, ArrowParams, StaleMetadata, media_type

if TYPE_CHECKING:
    from starlette.datastructures import State
    from starlette.types import ASGIApp, Receive, Scope, Send


ROUTE = "/v1/topics/{topic}/records"
PARSE_ROUTE = "/v1/bench/parse/{topic}"
INLINE_PARSE_BYTES = {JSON: 256 << 10, ARROW_STREAM: 4 << 20}  # JSON parses at ~4 us/KiB, Arrow ~0.07 us/KiB
ACKS = ("all", "-1", "1", "0")
QUERY_LIMITS = {"producer_id": INT64_MAX, "producer_epoch": 32767, "base_sequence": INT32_MAX, "partition": INT32_MAX}


def _arrow_params(query: Mapping[str, str]) -> ArrowParams:
    values: dict[str, int | None] = {}
    for name, limit in QUERY_LIMITS.items():
        raw = query.get(name)
        if raw is None:
            values[name] = None
            continue
        try:
            v = int(raw)
        except ValueError:
            raise E.InvalidRequest(f"malformed request: query.{name}: {raw!r} is not an integer") from None
        if not 0 <= v <= limit:
            raise E.InvalidRequest(f"malformed request: query.{name}: {v} is outside [0, {limit}]")
        values[name] = v
    return ArrowParams(**values)


async def produce(state: "State", topic: str, query: Mapping[str, str], authorization: str | None,
                  content_type: str | None, body: bytes, *, parse_only: bool = False) -> JSONResponse:
    """Authorize, parse, validate, queue and answer one produce request; raises a KafkaError to refuse it.

    ``parse_only`` (the benchmark's HTTP ceiling) stops before queueing and answers what was parsed.
    """
    state.pipeline.authorize(state.authorizer.authenticate(authorization), topic)
    acks = query.get("acks", "all")
    if acks not in ACKS:
        raise E.InvalidRequest(f"malformed request: query.acks: {acks!r} is not one of {', '.join(ACKS)}")
    params = _arrow_params(query)
    mt = media_type(content_type)
    if mt == JSON and params != ArrowParams():
        raise E.InvalidRequest("producer_id, producer_epoch, base_sequence and partition query parameters apply to "
                               "the Arrow form; the JSON idempotent form carries them in the body")
    service = state.produce
    # On the loop only what needs no storage: a small body, against a cached snapshot.  Loading metadata,
    # re-reading it for a partition beyond the cached count, and checking producer ids may read storage.
    snap = service.metadata.peek(topic) if len(body) <= INLINE_PARSE_BYTES[mt] else None
    prepared = None
    if snap is not None:
        try:
            prepared = service.parse(topic, body, content_type, params, snap,
                                     max_inline_bytes=INLINE_PARSE_BYTES[ARROW_STREAM])
        except (StaleMetadata, DecodesLarge):  # a compressed body that decodes large is decompressed off the loop
            pass
    if prepared is None:
        prepared = await run_in_threadpool(service.prepare, topic, body, content_type, params)
    elif prepared.idempotent:
        await run_in_threadpool(service.check_producers, prepared)
    if parse_only:
        return JSONResponse({"topic": topic, "records": prepared.record_count, "batches": len(prepared.batches)})
    if acks == "0":
        service.produce_unacknowledged(prepared)
        return JSONResponse({"topic": topic, "accepted_records": prepared.record_count}, status_code=202)
    status, payload = service.report(prepared, await service.produce(prepared))
    return JSONResponse(payload, status_code=status)


async def read_body(receive: "Receive") -> bytes | None:
    """A request's whole body from ASGI ``receive``; None if the client disconnected first."""
    chunks = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


def _match(scope: "Scope") -> tuple[str, bool] | None:
    """``(topic, parse_only)`` for ``POST /v1/topics/{topic}/records`` and ``POST /v1/bench/parse/{topic}``."""
    if scope["type"] != "http" or scope["method"] != "POST":
        return None
    parts = scope["path"].split("/")
    if len(parts) != 5 or parts[0] != "" or parts[1] != "v1":
        return None
    if parts[2] == "topics" and parts[4] == "records" and parts[3]:
        return parts[3], False
    if parts[2] == "bench" and parts[3] == "parse" and parts[4]:
        return parts[4], True
    return None


class ProduceLane:
    """ASGI middleware answering produce requests itself (see the module docstring); thread-confined to the loop."""

    def __init__(self, app: "ASGIApp", state: "State", *, parse_endpoint: bool = False) -> None:
        """``parse_endpoint``: also answer the benchmark's parse-only endpoint."""
        self.app = app
        self.state = state
        self.route = RouteLabel(ROUTE)
        self.parse_route = RouteLabel(PARSE_ROUTE) if parse_endpoint else None

    async def __call__(self, scope: "Scope", receive: "Receive", send: "Send") -> None:
        match = _match(scope)
        if match is None or (match[1] and self.parse_route is None):
            await self.app(scope, receive, send)
            return
        topic, parse_only = match
        scope["route"] = self.parse_route if parse_only else self.route
        try:
            body = await read_body(receive)
            if body is None:
                return  # the client went away: nothing was queued
            headers: dict[str, str] = {}
            for name, value in scope["headers"]:
                if name in (b"authorization", b"content-type"):  # the first of repeated ones, as Starlette reads
                    headers.setdefault(name.decode(), value.decode("latin-1"))
            query = dict(parse_qsl(scope["query_string"].decode("latin-1"), keep_blank_values=True))
            response = await produce(self.state, topic, query, headers.get("authorization"),
                                     headers.get("content-type"), body, parse_only=parse_only)
        except E.KafkaError as e:
            response = self._refuse(e)
        except Exception as e:  # answered like FastAPI's handler for the unexpected
            response = self._refuse(unexpected_error(e, "POST", scope["path"]))
        await response(scope, receive, send)

    def _refuse(self, error: E.KafkaError) -> JSONResponse:
        self.state.metrics.count_error(error)
        return error_response(error, self.state.settings.retry_after_s)
