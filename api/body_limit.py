"""Request body size limit: 413 ``MESSAGE_TOO_LARGE`` above ``Settings.max_request_bytes``.

A declared ``Content-Length`` over the limit is refused before any of the body
is read; a chunked body is counted as it streams and refused the moment it
passes the limit.  Either way nothing of the request is processed.  A chunked body of Confluent
v3's streaming produce (``POST /v3/clusters/{cluster}/topics/{topic}/records``) may run longer: one
connection carries any number of records, and ``api.v3.produce_lane`` bounds each record instead.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lakelog.errors import MessageTooLarge

from api.errors import error_response, is_v3
from api.v3.produce_lane import match as v3_produce_match

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send


class BodyLimit:
    """Pure-ASGI middleware enforcing the request body limit."""

    def __init__(self, app: "ASGIApp", max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    def _too_large(self, size: int | str) -> MessageTooLarge:
        return MessageTooLarge(f"the request body ({size} bytes) is larger than the front's limit of "
                               f"{self.max_bytes} bytes (max_request_bytes)")

    async def __call__(self, scope: "Scope", receive: "Receive", send: "Send") -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = -1
                if declared > self.max_bytes:
                    await error_response(self._too_large(declared), v3=is_v3(scope["path"]))(scope, receive, send)
                    return
        if v3_produce_match(scope) is not None:
            await self.app(scope, receive, send)  # a stream of records: each is bounded by the v3 lane
            return
        seen = [0]
        refused: list[MessageTooLarge] = []
        started = [False]

        async def limited_receive() -> "Message":
            message = await receive()
            if message["type"] == "http.request":
                seen[0] += len(message.get("body", b""))
                if seen[0] > self.max_bytes:
                    refused.append(self._too_large(f"more than {seen[0]}"))
                    raise refused[0]
            return message

        async def guarded_send(message: "Message") -> None:
            # A route whose body FastAPI parses answers the limit's error with its own 400 ("error parsing the
            # body"): a response begun after the refusal is replaced by the 413 below
            if refused and not started[0]:
                return
            started[0] = True
            await send(message)

        try:
            await self.app(scope, limited_receive, guarded_send)
        except MessageTooLarge:
            if not refused or started[0]:
                raise
        if refused and not started[0]:
            await error_response(refused[0], v3=is_v3(scope["path"]))(scope, receive, send)
