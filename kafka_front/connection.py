"""One client connection: frames in, requests handled, responses out in request order.

A frame is a 4-byte big-endian size and that many bytes.  A size outside
``[8, max_frame_bytes]``, or a header or body kio cannot parse make the frame
*malformed*: the connection is closed (only that
one) and nothing of the frame was acted on.  A well-formed request for an API or
version this listener does not serve gets ``UNSUPPORTED_VERSION`` and the
connection stays open.

Requests are read ahead (at most ``MAX_IN_FLIGHT``) and handled concurrently,
so a client's pipelined produce requests meet in one group commit; responses
are written strictly in request order, as Kafka clients require, and appends
keep request order (:class:`~kafka_front.request.Request`).
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time
from typing import TYPE_CHECKING

from kio.index import KioIndexError

from lakelog.errors import KafkaError, UnknownServerError, UnsupportedVersion

from api.auth import ANONYMOUS, Principal

from kafka_front import messages
from kafka_front.apis import API_VERSIONS, APIS, NO_RESPONSE, SASL_APIS, error_values, supported_versions
from kafka_front.request import Request

if TYPE_CHECKING:
    from kafka_front.context import FrontContext

log = logging.getLogger(__name__)
MAX_IN_FLIGHT = 16
_HEAD = struct.Struct(">hhi")


class MalformedFrame(Exception):
    """The peer sent bytes that are not a Kafka request: close the connection."""


class Connection:
    """Serves one socket until the peer closes it or sends a malformed frame.  ``principal`` is None until SASL
    authenticates the connection (always set when the front is open)."""

    def __init__(self, ctx: "FrontContext", reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.ctx = ctx
        self.reader = reader
        self.writer = writer
        self.principal: Principal | None = None if ctx.authorizer.enabled else Principal(ANONYMOUS)
        self.sasl_mechanism: str | None = None
        self.sasl_state: object = None  # the SCRAM exchange in progress
        self.producers: set[tuple[int, int]] = set()  # (id, epoch) of non-transactional producers checked here
        self.peer = writer.get_extra_info("peername")

    async def serve(self) -> None:
        responses: asyncio.Queue = asyncio.Queue(MAX_IN_FLIGHT)
        sender = asyncio.create_task(self._send(responses))
        previous: asyncio.Event | None = None
        try:
            while True:
                head = await self.reader.readexactly(4)
                size = int.from_bytes(head, "big", signed=True)
                if not 8 <= size <= self.ctx.max_frame_bytes:
                    raise MalformedFrame(f"frame size {size} outside [8, {self.ctx.max_frame_bytes}]")
                frame = await self.reader.readexactly(size)
                request = self._parse(frame, previous)
                if isinstance(request, bytes):  # answered without a handler (unsupported API or version)
                    await responses.put(_done(request))
                    continue
                if request.api_key not in SASL_APIS and request.api_key != API_VERSIONS and self.principal is None:
                    raise MalformedFrame(f"API {request.api_key} before SASL authentication")  # Kafka closes too
                previous = request.passed
                await responses.put(asyncio.create_task(self._handle(request)))
                if request.api_key in SASL_APIS:
                    await request.passed.wait()  # authentication changes what the next request may do
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        except MalformedFrame as e:
            log.warning("closing Kafka connection from %s: %s", self.peer, e)
        finally:
            await responses.put(None)
            try:
                await sender
            except (ConnectionError, asyncio.CancelledError):
                pass
            self.writer.close()

    def _parse(self, frame: bytes, previous: asyncio.Event | None) -> Request | bytes:
        api_key, version, correlation_id = _HEAD.unpack_from(frame, 0)
        api = APIS.get(api_key)
        if api is None or not api.min_version <= version <= api.max_version:
            self.ctx.metrics.count_error(UnsupportedVersion())
            return unsupported_response(api_key, version, correlation_id)
        try:
            header, size = messages.read_header(frame, messages.is_flexible(api_key, version))
            body = messages.read_request(api_key, version, frame, size)
        except (KioIndexError, ValueError, TypeError, IndexError, OverflowError, UnicodeDecodeError, EOFError) as e:
            raise MalformedFrame(f"{api.name} v{version}: {e}") from None
        except Exception as e:  # kio's native reader raises its own buffer errors
            raise MalformedFrame(f"{api.name} v{version}: {type(e).__name__}: {e}") from None
        return Request(api_key, version, correlation_id, header.client_id, body, previous)

    async def _handle(self, request: Request) -> bytes | None:
        api = APIS[request.api_key]
        if not api.ordered:
            _chain(request)
        started = time.perf_counter()
        try:
            values = await api.handler(self.ctx, self, request)
        except KafkaError as e:
            self.ctx.metrics.count_error(e)
            values = error_values(request.api_key, request.version, e)
        except Exception:
            log.exception("Kafka %s v%d failed", api.name, request.version)
            e = UnknownServerError("unexpected error; see the server log")
            self.ctx.metrics.count_error(e)
            values = error_values(request.api_key, request.version, e)
        finally:
            if not request.passed.is_set():
                _chain(request)
            self.ctx.metrics.observe_kafka(api.name, time.perf_counter() - started)
        if values is NO_RESPONSE:
            return None
        body = messages.build_response(request.api_key, request.version, values)
        return messages.encode_response(request.api_key, request.version, request.correlation_id, body)

    async def _send(self, responses: asyncio.Queue) -> None:
        while True:
            task = await responses.get()
            if task is None:
                return
            try:
                data = await task
            except asyncio.CancelledError:
                return
            if data is not None:
                self.writer.write(data)
                await self.writer.drain()


def _chain(request: Request) -> None:
    """Mark ``request`` passed once the one before it has."""
    if request.previous is None or request.previous.is_set():
        request.passed.set()
        return

    async def chain() -> None:
        await request.previous.wait()
        request.passed.set()

    asyncio.ensure_future(chain())


def _done(data: bytes) -> asyncio.Future:
    f = asyncio.get_running_loop().create_future()
    f.set_result(data)
    return f


def unsupported_response(api_key: int, version: int, correlation_id: int) -> bytes:
    """``UNSUPPORTED_VERSION`` for an API or version not served.  ApiVersions answers at v0 with the supported
    ranges (KIP-511: the client retries at a version it finds there); other known APIs answer at the asked
    version's layout if kio knows it, else with just the header and the error code."""
    if api_key == API_VERSIONS:
        body = messages.build_response(API_VERSIONS, 0, {"error_code": UnsupportedVersion.code,
                                                         "api_keys": supported_versions()})
        return messages.encode_response(API_VERSIONS, 0, correlation_id, body)
    try:
        body = messages.build_response(api_key, version, error_values(api_key, version, UnsupportedVersion()))
        return messages.encode_response(api_key, version, correlation_id, body)
    except KioIndexError:
        payload = correlation_id.to_bytes(4, "big", signed=True) + UnsupportedVersion.code.to_bytes(2, "big")
        return len(payload).to_bytes(4, "big") + payload
