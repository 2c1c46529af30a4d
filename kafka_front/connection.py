"""One client connection: frames in, requests handled, responses out in request order.

A frame is a 4-byte big-endian size and that many bytes.  The connection is
closed (only that one), with nothing of the frame acted on, when

* the size is outside ``[8, max_frame_bytes]``, or, before SASL authentication, above
  ``sasl_max_receive_bytes`` (Kafka's ``sasl.server.max.receive.size``, 512 KiB): checked before the frame
  is read;
* before authentication, the frame is for an API other than ApiVersions and SASL's: checked before its
  body is parsed, as Kafka's ``SaslServerAuthenticator`` refuses it;
* the header or body breaks a length, a nullability or a limit of Kafka's
  (:mod:`kafka_front.frame_check`, before kio reads anything), or does not parse.

A well-formed request for an API or version this listener does not serve gets ``UNSUPPORTED_VERSION`` and
the connection stays open.

Requests are read ahead and handled concurrently, so a client's pipelined produce requests meet in one
group commit; responses are written strictly in request order, as Kafka clients require, and appends keep
request order (:class:`~kafka_front.request.Request`).  What a connection holds is bounded: at most
``MAX_IN_FLIGHT`` requests between their frame and their answer's write, and at most ``MAX_HELD_BYTES`` of
request frames, answers not yet written, and the bytes a Fetch in progress may answer with
(:func:`~kafka_front.handlers.fetch.response_limit`).  The next frame is read only once there is room for it
(one request is always admitted when nothing is held), and a Fetch is handled only once there is room for
its answer too, so a client that sends without reading stops being read: TCP pushes back on it.  When the
connection ends, however it ends, everything it held is released at once: reads in progress are cancelled,
writes still running complete but their answers are dropped.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import struct
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kio.index import KioIndexError

from lakelog.broker.authorizer import ANONYMOUS, Principal
from lakelog.broker.error_mapping import unexpected_error
from lakelog.errors import KafkaError, UnknownServerError, UnsupportedVersion

from kafka_front import messages, throttle
from kafka_front.apis import API_VERSIONS, APIS, NO_RESPONSE, SASL_APIS, error_values, supported_versions
from kafka_front.commit_waiter import WAITED
from kafka_front.frame_check import check_header, check_request
from kafka_front.handlers.fetch import response_limit
from kafka_front.handlers.sasl import raw_token
from kafka_front.request import Request

if TYPE_CHECKING:
    from kafka_front.context import FrontContext

log = logging.getLogger(__name__)
MAX_IN_FLIGHT = 16
# Per connection: request frames, unwritten answers and Fetch reservations together.  Above Kafka's default
# fetch.max.bytes (55 MiB), so a consumer's largest Fetch and a produce request can be in flight at once.
MAX_HELD_BYTES = 64 << 20
FETCH = 1
CANCEL_ON_CLOSE = {FETCH}  # reads only: nothing to finish once the client is gone (a long poll may wait long)
_HEAD = struct.Struct(">hhi")


#: how an HTTP request line starts (its method), read as a Kafka frame's 4-byte size
HTTP_STARTS = frozenset({b"GET ", b"POST", b"PUT ", b"HEAD", b"DELE", b"OPTI", b"PATC", b"CONN", b"TRAC", b"PRI "})


class MalformedFrame(Exception):
    """The peer sent bytes that are not a Kafka request: close the connection."""


class SpokeHttp(MalformedFrame):
    """The connection opened with an HTTP request: closed without an answer, as a Kafka broker closes it."""


@dataclass(eq=False)
class _InFlight:
    """A request between its frame and its answer's write; ``held`` the bytes counted for it."""

    answer: asyncio.Future
    api_key: int
    held: int
    request: Request | None = None


class Connection:
    """Serves one socket until the peer closes it or sends a malformed frame.  ``principal`` is None until SASL
    authenticates the connection (always set when the front is open)."""

    def __init__(self, ctx: "FrontContext", reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.ctx = ctx
        self.reader = reader
        self.writer = writer
        self.peer = writer.get_extra_info("peername")
        self.host: str | None = self.peer[0] if isinstance(self.peer, tuple) and self.peer else None
        self.principal: Principal | None = None if ctx.authorizer.enabled else Principal(ANONYMOUS, self.host)
        self.sasl_mechanism: str | None = None
        self.sasl_state: object = None  # the SCRAM exchange in progress
        self.sasl_raw = False  # after SaslHandshake v0: SASL tokens come as bare frames (handlers/sasl.py)
        self.mute = throttle.ChannelMute()  # client quotas: nothing handled until a throttle passes (KIP-219)
        self.producers: set[tuple[int, int]] = set()  # (id, epoch) of non-transactional producers checked here
        self._in_flight: collections.deque[_InFlight] = collections.deque()
        self._held = 0
        self._changed = asyncio.Event()  # an answer was written or dropped, one was queued, or the end came
        self._closed = False
        self._sender: asyncio.Task | None = None
        self._lost: asyncio.Future | None = None  # done when the transport is gone (a reset, or closed)

    @property
    def held_bytes(self) -> int:
        """What this connection holds now (tests and metrics)."""
        return self._held

    async def serve(self) -> None:
        self._sender = sender = asyncio.create_task(self._send())
        self._lost = asyncio.ensure_future(self.writer.wait_closed())
        self._lost.add_done_callback(_drop)
        previous: asyncio.Event | None = None
        try:
            while not self._closed:
                head = await self.reader.readexactly(4)
                size = int.from_bytes(head, "big", signed=True)
                limit = self.ctx.max_frame_bytes
                if self.principal is None:
                    limit = min(limit, self.ctx.sasl_max_receive_bytes)
                least = 0 if self.sasl_raw else 8
                if not least <= size <= limit:
                    if head in HTTP_STARTS:
                        raise SpokeHttp(f"it sent HTTP ({head.decode()}...), not Kafka's protocol")
                    raise MalformedFrame(f"frame size {size} outside [{least}, {limit}]"
                                         + (" before SASL authentication" if self.principal is None else ""))
                await self._admit(size)  # before the frame is read
                frame = await self.reader.readexactly(size)
                if self.sasl_raw:  # a bare SASL token (SaslHandshake v0); a failure closes the connection
                    answer = raw_token(self.ctx, self, frame)
                    if answer is None:
                        raise MalformedFrame("SASL authentication failed")
                    self._queue(_done(len(answer).to_bytes(4, "big") + answer), -1, 4 + len(answer))
                    continue
                request = self._parse(frame, previous)
                if isinstance(request, bytes):  # answered without a handler (unsupported API or version)
                    self._queue(_done(request), -1, len(request))
                    continue
                reserve = response_limit(self.ctx, request.body) if request.api_key == FETCH else 0
                if reserve:
                    await self._admit(size + reserve)
                previous = request.passed
                await self.mute.wait()  # KIP-219: a throttled client's next request waits out the throttle
                if self._closed:  # reset while muted: nothing to answer
                    break
                entry = self._queue(None, request.api_key, size + reserve)
                entry.request = request
                entry.answer = asyncio.ensure_future(self._handle(request, entry))
                if request.api_key in SASL_APIS:
                    await request.passed.wait()  # authentication changes what the next request may do
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        except SpokeHttp as e:  # as a Kafka broker does: no answer, the connection closed, one quiet line
            log.info("closing Kafka connection from %s: %s", self.peer, e)
        except MalformedFrame as e:
            log.warning("closing Kafka connection from %s: %s", self.peer, e)
        finally:
            self.close()
            try:
                await sender
            except (ConnectionError, asyncio.CancelledError):
                pass

    def close(self) -> None:
        """End the connection now and release what it holds (the listener calls it on shutdown too)."""
        if self._closed:
            return
        self._closed = True
        for entry in self._in_flight:
            if entry.api_key in CANCEL_ON_CLOSE:
                entry.answer.cancel()
                if entry.request is not None:  # cancelled before it began, it would hold up its followers
                    _chain(entry.request)
            else:  # a write runs to its end (it may already be appending); its answer is dropped
                entry.answer.add_done_callback(_drop)
        self._in_flight.clear()
        self._held = 0
        self._changed.set()
        if self._sender is not None and self._sender is not asyncio.current_task():
            self._sender.cancel()  # it may be waiting for a long write's answer, or for the peer to read
        self.writer.close()
        if self._lost is not None:
            self._lost.cancel()

    def _parse(self, frame: bytes, previous: asyncio.Event | None) -> Request | bytes:
        api_key, version, correlation_id = _HEAD.unpack_from(frame, 0)
        if self.principal is None and api_key not in SASL_APIS and api_key != API_VERSIONS:
            raise MalformedFrame(f"API {api_key} before SASL authentication")  # Kafka closes too
        api = APIS.get(api_key)
        if api is None or not api.min_version <= version <= api.max_version:
            self.ctx.metrics.count_error(UnsupportedVersion())
            return unsupported_response(api_key, version, correlation_id)
        flexible = messages.is_flexible(api_key, version)
        try:
            offset = check_header(frame, flexible)
            check_request(api_key, version, frame, offset)  # every declared length, before kio allocates
            header, size = messages.read_header(frame, flexible)
            body = messages.read_request(api_key, version, frame, size)
        except (KioIndexError, ValueError, TypeError, IndexError, OverflowError, UnicodeDecodeError, EOFError,
                KeyError) as e:
            raise MalformedFrame(f"{api.name} v{version}: {e}") from None
        except Exception as e:  # kio's native reader raises its own buffer errors
            raise MalformedFrame(f"{api.name} v{version}: {type(e).__name__}: {e}") from None
        return Request(api_key, version, correlation_id, header.client_id, body, previous, size=4 + len(frame))

    async def _admit(self, size: int) -> None:
        """Wait until a request of ``size`` bytes fits (the module doc)."""
        # an answer being written has left the queue but is still held: it counts until it is written
        while not self._closed and (self._in_flight or self._held) and (
                len(self._in_flight) >= MAX_IN_FLIGHT or self._held + size > MAX_HELD_BYTES):
            # Not reading the socket now: a reset must be seen all the same, or the answers held would
            # wait for a peer that is gone.
            self._changed.clear()
            changed = asyncio.ensure_future(self._changed.wait())
            await asyncio.wait([changed, self._lost], return_when=asyncio.FIRST_COMPLETED)
            changed.cancel()
            if self._lost.done():
                break
        if self._closed or self._lost.done():
            raise ConnectionError("closed")

    def _queue(self, answer: asyncio.Future | None, api_key: int, held: int) -> _InFlight:
        entry = _InFlight(answer, api_key, held)  # type: ignore[arg-type]  # set right after, for a handler
        self._in_flight.append(entry)
        self._held += held
        self._changed.set()
        return entry

    def _hold(self, entry: _InFlight, held: int) -> None:
        """Count ``held`` bytes for ``entry`` from now on (its answer, in place of its frame and reservation)."""
        entry.request = None  # handled: its body is no longer needed
        if not self._closed:
            self._held += held - entry.held
            entry.held = held
            self._changed.set()

    async def _handle(self, request: Request, entry: _InFlight) -> bytes | None:
        api = APIS[request.api_key]
        if not api.ordered:
            _chain(request)
        started = time.perf_counter()
        waited = [0.0]
        WAITED.set(waited)
        try:
            throttle.before(self.ctx, self, request)
            values = await api.handler(self.ctx, self, request)
        except KafkaError as e:
            self.ctx.metrics.count_error(e)
            values = error_values(request.api_key, request.version, e)
        except Exception as exc:  # a storage failure is the retriable KAFKA_STORAGE_ERROR, as over HTTP
            e = unexpected_error(exc, api.name, f"v{request.version}")
            self.ctx.metrics.count_error(e)
            values = error_values(request.api_key, request.version, e)
        finally:
            if not request.passed.is_set():
                _chain(request)
            self.ctx.metrics.observe_kafka(api.name, time.perf_counter() - started)
        busy = time.perf_counter() - started - waited[0]
        if values is NO_RESPONSE:
            throttle.charge(self.ctx, self, request, values, None, busy)
            self._hold(entry, 0)
            return None
        try:
            data = _encode(request, values)
        except Exception:  # a handler's answer kio cannot write: the client gets an error, not a silence
            log.exception("Kafka %s v%d: the answer does not encode", api.name, request.version)
            e = UnknownServerError("unexpected error; see the server log")
            self.ctx.metrics.count_error(e)
            values = error_values(request.api_key, request.version, e)
            data = _encode(request, values)
        data = throttle.charge(self.ctx, self, request, values, data, busy)
        self._hold(entry, len(data))
        return data

    async def _send(self) -> None:
        """Write answers in request order as they complete; end the connection if the peer is gone."""
        try:
            while not self._closed:
                if not self._in_flight:
                    self._changed.clear()
                    await self._changed.wait()
                    continue
                entry = self._in_flight[0]
                if not entry.answer.done():  # not ``await``: cancelling the sender must not cancel a write
                    await asyncio.wait([entry.answer])
                if self._closed:
                    return
                self._in_flight.popleft()
                if not entry.answer.cancelled() and entry.answer.exception() is not None:
                    log.error("Kafka answer failed; closing the connection", exc_info=entry.answer.exception())
                    raise ConnectionAbortedError("an answer failed")  # the client cannot be answered in order
                data = None if entry.answer.cancelled() else entry.answer.result()
                if data is not None:
                    if self.writer.is_closing():  # the peer is gone (uvloop raises on a write, asyncio logs)
                        raise ConnectionResetError("the connection is closed")
                    self.writer.write(data)
                    await self.writer.drain()
                if not self._closed:
                    self._held -= entry.held
                    self._changed.set()
        except ConnectionError:
            self.close()


def _encode(request: Request, values: dict) -> bytes:
    body = messages.build_response(request.api_key, request.version, values)
    return messages.encode_response(request.api_key, request.version, request.correlation_id, body)


def _drop(answer: asyncio.Future) -> None:
    """Consume a dropped answer's outcome (so asyncio logs no "exception was never retrieved")."""
    if not answer.cancelled():
        answer.exception()


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
