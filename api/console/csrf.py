"""The console's form tokens: every state-changing form carries a token that only the front can make, bound to
the browser and, with an auth file, to the session; a POST without the token of its own session is refused
(403) before the action runs.

The token is HMAC-SHA256 over a random per-browser id (an HttpOnly, SameSite=Strict cookie set with the
first page) and the session's token, under a key only the front holds: the key of the root's cluster secret
when fronts share a root (``--node-id``: any front accepts the forms of another), else one drawn when the
front starts (forms rendered before a restart are refused once; reloading the page gives new ones).  Another
page cannot read a console page (same-origin policy), so it cannot learn a token; setting the browser-id
cookie from another port of the same host (cookies ignore ports) does not help it either, since the token
is a keyed function of that id.  ``api.cross_origin`` refuses cross-origin writes before this runs.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

from fastapi import Request
from starlette.responses import Response

from api.console.paths import PREFIX, SESSION_COOKIE
from api.cross_origin import SAFE_METHODS, CrossOriginRequest

BROWSER_COOKIE = "lakelog_console_browser"
FIELD = "csrf_token"  # the hidden field of every state-changing form
_LABEL = b"lakelog console form token"


def _key(request: Request) -> bytes:
    state = request.app.state
    key = getattr(state, "console_form_key", None)
    if key is None:
        shared = getattr(state, "cluster_secret", None)
        key = hmac.new(shared.encode(), _LABEL, hashlib.sha256).digest() if shared else secrets.token_bytes(32)
        state.console_form_key = key
    return key


def _browser_id(request: Request) -> str | None:
    value = request.cookies.get(BROWSER_COOKIE)
    return value if value and len(value) == 32 and all(c in "0123456789abcdef" for c in value) else None


def _token(request: Request, browser: str) -> str:
    session = hashlib.sha256(request.cookies.get(SESSION_COOKIE, "").encode()).digest()
    mac = hmac.new(_key(request), browser.encode() + b"\0" + session, hashlib.sha256).digest()
    return base64.urlsafe_b64encode(mac).decode().rstrip("=")


def form_token(request: Request) -> str:
    """The token for this browser and session.  A browser without its id is given one: :func:`remember` sets
    it on the response."""
    browser = _browser_id(request) or getattr(request.state, "console_new_browser", None)
    if browser is None:
        browser = request.state.console_new_browser = secrets.token_hex(16)
    return _token(request, browser)


def remember(request: Request, response: Response) -> None:
    """Set the browser-id cookie on ``response`` if :func:`form_token` drew a new id for this request."""
    browser = getattr(request.state, "console_new_browser", None)
    if browser is not None:
        response.set_cookie(BROWSER_COOKIE, browser, httponly=True, samesite="strict", path=PREFIX)


async def check(request: Request) -> None:
    """Dependency of every console route: a state-changing request must carry its session's form token."""
    if request.method in SAFE_METHODS:
        return
    browser = _browser_id(request)
    form = await request.form()
    sent = form.get(FIELD)
    if browser is None or not isinstance(sent, str) or not hmac.compare_digest(sent, _token(request, browser)):
        raise CrossOriginRequest("the form's token is missing or is not this session's: reload the page and "
                                 "submit it again")
