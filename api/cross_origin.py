"""Cross-origin request protection: a state-changing request a browser sends from another origin is refused
(403) before any route sees it, whether the front has an auth file or not.

A plain HTML form on any site can POST to the front, and the browser sends it (``SameSite`` cookies do not
stop another port of the same host: it is the same site).  The check is the one browsers make possible and
Go's ``net/http.CrossOriginProtection`` makes: for every method but GET, HEAD and OPTIONS,

* ``Sec-Fetch-Site`` present (every current browser): allowed only when ``same-origin`` or ``none`` (the user
  typed or bookmarked it);
* otherwise an ``Origin`` header (older browsers): allowed only when its host and port are the request's
  ``Host``;
* neither header: not a browser (curl, Kafka tools, HTTP clients, other fronts): allowed.

The console's forms also carry a token (``api.console.csrf``); this check is what protects ``/v1`` and ``/v3``
as well, for requests a browser could send without a preflight.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from lakelog.errors import InvalidRequest

if TYPE_CHECKING:
    from typing import Callable

    from starlette.types import ASGIApp, Receive, Scope, Send

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_ALLOWED_SITES = (b"same-origin", b"none")


class CrossOriginRequest(InvalidRequest):
    """A browser sent a state-changing request from another origin, or a console form without its token
    (INVALID_REQUEST, answered 403)."""

    http_status = 403


def refusal(headers: list[tuple[bytes, bytes]]) -> str | None:
    """Why a state-changing request with these headers is refused, or None when it is allowed."""
    site = origin = host = None
    for name, value in headers:
        if name == b"sec-fetch-site" and site is None:
            site = value
        elif name == b"origin" and origin is None:
            origin = value
        elif name == b"host" and host is None:
            host = value
    if site is not None:
        if site.strip().lower() in _ALLOWED_SITES:
            return None
        return (f"a {site.decode('latin-1')[:40]!r} request (Sec-Fetch-Site) may not change anything here: "
                "use this front's own pages or a non-browser client")
    if origin is None:
        return None
    text = origin.decode("latin-1")
    try:
        netloc = urlsplit(text).netloc if text != "null" else None
    except ValueError:
        netloc = None
    if netloc and host is not None and netloc.lower() == host.decode("latin-1").lower():
        return None
    return f"a request from origin {text[:100]!r} may not change anything here"


class CrossOriginProtection:
    """Pure-ASGI middleware refusing cross-origin state-changing requests (see the module docstring);
    ``respond(scope, error)`` is the ASGI app answering a refusal (as a console page, or a v1 or v3 body)."""

    def __init__(self, app: "ASGIApp", respond: "Callable[[Scope, CrossOriginRequest], ASGIApp]") -> None:
        self.app = app
        self.respond = respond

    async def __call__(self, scope: "Scope", receive: "Receive", send: "Send") -> None:
        if scope["type"] == "http" and scope["method"] not in SAFE_METHODS:
            reason = refusal(scope["headers"])
            if reason is not None:
                await self.respond(scope, CrossOriginRequest(reason))(scope, receive, send)
                return
        await self.app(scope, receive, send)
