"""JSON request bodies are UTF-8 without a byte order mark (RFC 8259 section 8.1), as Confluent's proxy reads
them: a body that starts with a BOM, or in UTF-16 or UTF-32, is refused as malformed (400) before a route
sees it.  Python's ``json.loads`` would quietly accept all three.

Only the first bytes are looked at (a BOM, or a NUL among the first four bytes: JSON text in UTF-8 never
has one there, UTF-16 and UTF-32 always do); the body is then handed on unchanged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lakelog.errors import InvalidRequest

from api.errors import SCHEMA_REGISTRY_PREFIX, error_response, is_v3
from api.v3.errors import BadRequest

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

_BOMS = (b"\xef\xbb\xbf", b"\xfe\xff", b"\xff\xfe")
_JSON = b"application/json"


def encoding_problem(head: bytes) -> str | None:
    """What is wrong with a JSON body starting with ``head`` (its first four bytes or fewer), or None."""
    if head.startswith(_BOMS):
        return "the body starts with a byte order mark; JSON must be UTF-8 without one"
    if b"\0" in head:
        return "the body is not UTF-8 (UTF-16 or UTF-32?); JSON must be UTF-8"
    return None


class Utf8JsonBody:
    """Pure-ASGI middleware refusing JSON bodies that are not BOM-less UTF-8 (see the module docstring)."""

    def __init__(self, app: "ASGIApp") -> None:
        self.app = app

    async def __call__(self, scope: "Scope", receive: "Receive", send: "Send") -> None:
        if scope["type"] != "http" or not _is_json(scope):
            await self.app(scope, receive, send)
            return
        buffered: list["Message"] = []
        head = b""
        while len(head) < 4:
            message = await receive()
            buffered.append(message)
            if message["type"] != "http.request":
                break
            head += message.get("body", b"")[:4 - len(head)]
            if not message.get("more_body", False):
                break
        problem = encoding_problem(head)
        if problem is not None and scope["path"].startswith(SCHEMA_REGISTRY_PREFIX):  # Confluent's registry: 422
            from fastapi.responses import JSONResponse

            await JSONResponse({"error_code": 422, "message": f"malformed request: {problem}"}, status_code=422)(
                scope, receive, send)
            return
        if problem is not None:
            error = (BadRequest if is_v3(scope["path"]) else InvalidRequest)(f"malformed request: {problem}")
            await error_response(error, v3=is_v3(scope["path"]))(scope, receive, send)
            return

        async def replay() -> "Message":
            return buffered.pop(0) if buffered else await receive()

        await self.app(scope, replay, send)


def _is_json(scope: "Scope") -> bool:
    for name, value in scope["headers"]:
        if name == b"content-type":
            return value.split(b";", 1)[0].strip().lower() == _JSON
    return False
