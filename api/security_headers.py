"""Response headers that keep a browser from misreading the front's answers.

Every answer gets ``X-Content-Type-Options: nosniff`` (a 404 body that echoes the path is never sniffed into
HTML or script).  Console answers (``/ui``) also get a Content-Security-Policy that allows only the console's
own scripts, styles and requests (no inline script, no other origin, no framing, forms post only to the
front), ``Referrer-Policy: same-origin`` and ``Cache-Control: no-store`` (pages show live data and carry a
form token).  Swagger UI at ``/docs`` keeps its own inline script, so the policy is the console's only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from api.console.paths import STATIC_PREFIX, is_console

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

CONSOLE_CSP = (b"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
               b"form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
NOSNIFF = (b"x-content-type-options", b"nosniff")
CONSOLE_HEADERS = [NOSNIFF, (b"content-security-policy", CONSOLE_CSP), (b"referrer-policy", b"same-origin"),
                   (b"x-frame-options", b"DENY")]
NO_STORE = (b"cache-control", b"no-store")


class SecurityHeaders:
    """Pure-ASGI middleware adding the headers above to each response's start."""

    def __init__(self, app: "ASGIApp") -> None:
        self.app = app

    async def __call__(self, scope: "Scope", receive: "Receive", send: "Send") -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        if is_console(path) or path == "/favicon.ico":
            extra = CONSOLE_HEADERS if path.startswith(STATIC_PREFIX) or path == "/favicon.ico" \
                else [*CONSOLE_HEADERS, NO_STORE]
        else:
            extra = [NOSNIFF]

        async def with_headers(message: "Message") -> None:
            if message["type"] == "http.response.start":
                present = {name.lower() for name, _ in message.get("headers", ())}
                message["headers"] = [*message.get("headers", ()), *(h for h in extra if h[0] not in present)]
            await send(message)

        await self.app(scope, receive, with_headers)
