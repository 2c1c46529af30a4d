"""``POST /v3/clusters/{cluster_id}/topics/{topic_name}/records`` as plain ASGI, whole bodies and streams.

Like ``api.produce_lane`` for ``/v1``, this skips FastAPI's stack (no FastAPI route declares the operation;
its OpenAPI entry is ``api.produce_openapi``'s).  The records go through the broker's produce pipeline
(``lakelog.broker.produce``, by way of ``api.v3.produce``).  Before any of the body is read
the request is authenticated, authorized (Write on the topic), and its cluster, topic and
Content-Type are checked: a failure there is an ordinary error response (Confluent's body and
status).  Then:

* a body with a ``Content-Length`` is read whole and its records are produced together (parsed on the
  event loop up to ``api.produce_lane.INLINE_PARSE_BYTES``, in the thread pool above, as ``/v1`` does);
  the answer is 200 with one delivery report per record, each followed by CRLF, made and sent (chunked)
  a slice of records at a time, so its size never sits in memory -- except that
  a request of a single record that failed is answered with that error's status and body;
* a chunked body is Confluent's streaming mode: records are produced as they arrive, each
  read's complete records as one group, and their reports are sent in order on the open
  response as their commits land, while the next records are read.  The status is 200 once
  the stream is accepted; errors are per report.  A byte that starts no JSON object ends the
  stream with one error report.  Each record is bounded by ``max_request_bytes``.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import itertools
import time
from typing import TYPE_CHECKING, Iterable, Iterator

import msgspec
from starlette.concurrency import run_in_threadpool

from lakelog import errors as E
from lakelog.broker.error_mapping import unexpected_error

from api.errors import error_response
from api.request_timer import RouteLabel
from api.v3.errors import BadRequest, ClusterNotFound, EmptyBody, UnsupportedMediaType, error_body
from api.v3.produce import Submitted, answer, produce, submit
from api.produce_lane import INLINE_PARSE_BYTES, read_body
from api.produce_request import JSON
from api.v3.records import SEPARATOR, Converted, ObjectScanner, convert, decode_body, decode_one, decode_strings

if TYPE_CHECKING:
    from starlette.datastructures import State
    from starlette.types import ASGIApp, Receive, Scope, Send

ROUTE = "/v3/clusters/{cluster_id}/topics/{topic_name}/records"
_JSON = b"application/json"


def match(scope: "Scope") -> tuple[str, str] | None:
    """``(cluster_id, topic)`` for a v3 produce request, else None."""
    if scope["type"] != "http" or scope["method"] != "POST":
        return None
    parts = scope["path"].split("/")
    if len(parts) != 7 or parts[1] != "v3" or parts[2] != "clusters" or parts[4] != "topics" \
            or parts[6] != "records" or not parts[3] or not parts[5]:
        return None
    return parts[3], parts[5]


class V3ProduceLane:
    """ASGI middleware answering v3 produce requests (see the module docstring); confined to the event loop."""

    def __init__(self, app: "ASGIApp", state: "State") -> None:
        self.app = app
        self.state = state
        self.route = RouteLabel(ROUTE)

    async def __call__(self, scope: "Scope", receive: "Receive", send: "Send") -> None:
        m = match(scope)
        if m is None:
            await self.app(scope, receive, send)
            return
        scope["route"] = self.route
        cluster_id, topic = m
        headers: dict[bytes, bytes] = {}
        for name, value in scope["headers"]:
            headers.setdefault(name, value)
        try:
            await self._admit(cluster_id, topic, headers)
            if b"content-length" in headers:
                await self._whole(scope, receive, send, cluster_id, topic)
            else:
                await self._stream(receive, send, cluster_id, topic)
        except E.KafkaError as e:
            await self._refuse(e)(scope, receive, send)
        except Exception as e:  # answered like FastAPI's handler for the unexpected
            await self._refuse(unexpected_error(e, "POST", scope["path"]))(scope, receive, send)

    async def _admit(self, cluster_id: str, topic: str, headers: dict[bytes, bytes]) -> None:
        """Everything checked before the body is read; raises the first refusal."""
        state = self.state
        pipeline = state.pipeline
        auth = headers.get(b"authorization")
        principal = state.authorizer.authenticate(auth.decode("latin-1") if auth is not None else None)
        if cluster_id != state.cluster_id:
            raise ClusterNotFound(f"Cluster {cluster_id} cannot be found.")
        pipeline.authorize(principal, topic)
        ctype = headers.get(b"content-type")
        if ctype is not None and ctype.split(b";", 1)[0].strip().lower() != _JSON:
            raise UnsupportedMediaType(f"unsupported Content-Type {ctype.decode('latin-1')!r}: use application/json")
        pipeline.check_topic(topic)
        await pipeline.snapshot_async(topic)  # UNKNOWN_TOPIC_OR_PARTITION (404) if absent

    async def _whole(self, scope, receive, send, cluster_id: str, topic: str) -> None:
        body = await read_body(receive)
        if body is None:
            return  # the client went away: nothing was queued
        if not body or body.isspace():
            raise EmptyBody("Payload error. Request body is empty. Data is required.")
        parse = _parse if len(body) <= INLINE_PARSE_BYTES[JSON] else functools.partial(run_in_threadpool, _parse)
        converted, trailing = await _maybe_await(parse(body))
        del body  # not needed while the answer is sent
        chunks, single_error = await produce(self.state.pipeline, cluster_id, topic, converted) \
            if converted is not None else (iter(()), None)
        if trailing is not None:
            chunks = itertools.chain(chunks, [msgspec.json.encode(error_body(trailing)) + SEPARATOR])
            if converted is None:
                single_error = trailing
        if single_error is not None:
            await self._refuse(single_error)(scope, receive, send)
            return
        await _send_chunks(send, chunks)

    async def _stream(self, receive, send, cluster_id: str, topic: str) -> None:
        scanner = ObjectScanner(self.state.settings.max_request_bytes)
        pending: asyncio.Queue = asyncio.Queue()
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json")]})

        async def writer() -> None:
            while True:
                task = await pending.get()
                if task is None:
                    return
                chunks, _ = await task
                for chunk in chunks:
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})

        writing = asyncio.create_task(writer())
        try:
            while scanner.error is None:
                message = await receive()
                if message["type"] != "http.request":
                    break  # the client went away: what was queued still commits
                scanner.feed(message.get("body", b""))
                objects = scanner.objects()
                if objects:
                    records = decode_strings(b"\n".join(objects), int(time.time() * 1000)) \
                        or [decode_one(o) for o in objects]
                    # queued here, in the stream's order; answered by the writer as the commits land
                    pending.put_nowait(asyncio.ensure_future(self._reports(await self._submit(cluster_id, topic,
                                                                                              records))))
                if not message.get("more_body", False):
                    if scanner.error is None and scanner.buffer.strip():
                        scanner.error = _truncated()
                    break
            if scanner.error is not None:
                done = asyncio.get_running_loop().create_future()
                done.set_result(([msgspec.json.encode(error_body(scanner.error)) + SEPARATOR], None))
                pending.put_nowait(done)
        finally:
            pending.put_nowait(None)
            await writing
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _submit(self, cluster_id: str, topic: str, records: "list | Converted") -> "Submitted | list[bytes]":
        """A stream's group of records queued for the commit, or -- the response has started, so no status can
        say it any more -- a failure of the whole group as each record's report."""
        try:
            return await submit(self.state.pipeline, cluster_id, topic, records)
        except Exception as e:
            return self._group_error(e, cluster_id, topic, _count(records))

    async def _reports(self, submitted: "Submitted | list[bytes]") -> tuple[Iterable[bytes], None]:
        if not isinstance(submitted, Submitted):
            return submitted, None
        try:
            chunks, _ = await answer(self.state.pipeline, submitted)
        except Exception as e:
            chunks = self._group_error(e, submitted.cluster_id, submitted.topic, submitted.converted.count)
        return chunks, None

    def _group_error(self, e: Exception, cluster_id: str, topic: str, count: int) -> list[bytes]:
        error = e if isinstance(e, E.KafkaError) else \
            unexpected_error(e, "POST", f"/v3/clusters/{cluster_id}/topics/{topic}/records")
        self.state.metrics.count_error(error)
        return [(msgspec.json.encode(error_body(error)) + SEPARATOR) * count]

    def _refuse(self, error: E.KafkaError):
        self.state.metrics.count_error(error)
        return error_response(error, self.state.settings.retry_after_s, v3=True)


async def _send_chunks(send, chunks: Iterator[bytes]) -> None:
    """A 200 answer of ``chunks``: with a Content-Length when there is one chunk, else chunked as they are
    made, so an answer of many reports is never held whole (each ``send`` waits while the client is slow)."""
    first = next(chunks, b"")
    second = next(chunks, None)
    headers = [(b"content-type", b"application/json")]
    if second is None:
        headers.append((b"content-length", str(len(first)).encode()))
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    if second is not None:
        for chunk in itertools.chain((first, second), chunks):
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        first = b""
    await send({"type": "http.response.body", "body": first})


def _parse(body: bytes) -> tuple[Converted | None, E.KafkaError | None]:
    """A whole body's records, converted (None if it holds none), and the error of a malformed tail, if any."""
    now_ms = int(time.time() * 1000)
    converted = decode_strings(body, now_ms)
    if converted is not None:
        return converted, None
    records = decode_body(body)
    trailing = None
    if records is None:
        scanner = ObjectScanner(len(body))
        scanner.feed(body)
        records = [decode_one(o) for o in scanner.objects()]
        trailing = scanner.error
        if trailing is None and scanner.buffer.strip():
            trailing = _truncated()
    return (convert(records, now_ms) if records else None), trailing


async def _maybe_await(value):
    return await value if inspect.isawaitable(value) else value


def _count(records: "list | Converted") -> int:
    return records.count if isinstance(records, Converted) else len(records)


def _truncated() -> E.KafkaError:
    return BadRequest("malformed request: the body ends inside a JSON object")
