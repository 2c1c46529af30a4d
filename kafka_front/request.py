"""One Kafka request in flight on a connection: its header, parsed body, and its place in the connection's order."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Request:
    """``body`` is the kio dataclass of ``api_key`` at ``version``.

    Requests of one connection are handled concurrently (so pipelined produce requests share a group commit),
    but what must keep the connection's order -- appends, for idempotent sequences -- runs inside
    ``async with request.in_order():``, which waits for the previous request to pass or finish."""

    api_key: int
    version: int
    correlation_id: int
    client_id: str | None
    body: Any
    previous: asyncio.Event | None = None
    passed: asyncio.Event = field(default_factory=asyncio.Event)
    size: int = 0  # the request's bytes on the wire (its frame), charged to producer byte-rate quotas

    def in_order(self) -> "_InOrder":
        return _InOrder(self)

    def release(self) -> None:
        self.passed.set()


class _InOrder:
    def __init__(self, request: Request) -> None:
        self.request = request

    async def __aenter__(self) -> None:
        if self.request.previous is not None:
            await self.request.previous.wait()

    async def __aexit__(self, *exc) -> None:
        self.request.release()


NO_RESPONSE = object()  # a handler's answer to a request that gets none (Produce with acks=0)
