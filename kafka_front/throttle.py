"""Client quotas on the Kafka listener, as Kafka's broker enforces them (KIP-13, KIP-124, KIP-219).

After each request the connection's client is charged: its request's handling time against
``request_percentage``, a Produce request's bytes against ``producer_byte_rate``, a Fetch answer's bytes
against ``consumer_byte_rate`` (:class:`~lakelog.quota.quota_manager.QuotaManager`).  The answer goes out at
once carrying the largest throttle time (``throttle_time_ms``), and the connection is muted -- nothing more is
handled from it -- until that time has passed (KIP-219); other connections are never slowed.  Requests a client
pipelined before the throttle was known (at most the connection's read-ahead) still run, and are charged.  A throttled Fetch
answers with no records (its bytes are taken back, as Kafka answers), and a Fetch asks for at most what the
client's byte rate allows in a quota window (Kafka's ``getMaxValueInQuotaWindow``).  A fetch's long-poll wait is
not handling time.  SASL requests are not charged.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from typing import TYPE_CHECKING

from lakelog.quota.client_quota import CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE, REQUEST_PERCENTAGE

from kafka_front import messages

if TYPE_CHECKING:
    from kafka_front.connection import Connection
    from kafka_front.context import FrontContext
    from kafka_front.request import Request

PRODUCE, FETCH = 0, 1
EXEMPT = frozenset({17, 36})  # SaslHandshake, SaslAuthenticate: before the client is known


class ChannelMute:
    """One connection's mute (KIP-219): no frame is read before :attr:`until` (``time.monotonic()``)."""

    def __init__(self) -> None:
        self.until = 0.0

    def mute(self, throttle_ms: int) -> None:
        if throttle_ms > 0:
            self.until = max(self.until, time.monotonic() + throttle_ms / 1000.0)

    async def wait(self) -> None:
        delay = self.until - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)


def _client(conn: "Connection", request: "Request") -> tuple[str, str]:
    name = conn.principal.name if conn.principal is not None else ""
    return name.partition(":")[2] if ":" in name else name, request.client_id or ""


def before(ctx: "FrontContext", conn: "Connection", request: "Request") -> None:
    """Bound a Fetch's ``max_bytes`` by what the client's consumer byte rate allows in one quota window."""
    if ctx.quotas is None or request.api_key != FETCH:
        return
    limit = ctx.quotas.max_value_in_window(CONSUMER_BYTE_RATE, *_client(conn, request))
    if limit is not None and request.body.max_bytes > limit:
        request.body = dataclasses.replace(request.body, max_bytes=max(int(limit), 1))


def charge(ctx: "FrontContext", conn: "Connection", request: "Request", values, data: bytes | None,
           busy_s: float) -> bytes | None:
    """Charge the request to its client's quotas, mute the connection for the throttle time, and return the
    answer to send (``data`` with ``throttle_time_ms`` set; an empty one for a throttled Fetch)."""
    quotas = ctx.quotas
    if quotas is None or request.api_key in EXEMPT:
        return data
    user, client_id = _client(conn, request)
    throttle = quotas.record(REQUEST_PERCENTAGE, user, client_id, busy_s * 100.0)
    if request.api_key == PRODUCE:
        throttle = max(throttle, quotas.record(PRODUCER_BYTE_RATE, user, client_id, request.size))
    elif request.api_key == FETCH and data is not None:
        fetched = quotas.record(CONSUMER_BYTE_RATE, user, client_id, len(data))
        throttle = max(throttle, fetched)
        if throttle > 0:
            quotas.unrecord(CONSUMER_BYTE_RATE, user, client_id, len(data))
            values = {"error_code": 0, "session_id": 0, "responses": []}
    conn.mute.mute(throttle)
    if throttle <= 0 or data is None or not isinstance(values, dict):
        return data
    values["throttle_time"] = throttle
    body = messages.build_response(request.api_key, request.version, values)
    return messages.encode_response(request.api_key, request.version, request.correlation_id, body)
