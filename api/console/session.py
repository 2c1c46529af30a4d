"""The console's session: the bearer token entered once, kept in a cookie, resolved to a principal per request.

The cookie is HttpOnly (page scripts cannot read it) and SameSite=Strict (no other site's page can send it;
another port of the same host is the same site, so forms are guarded by ``api.console.csrf`` and
``api.cross_origin`` too); it lasts for the browser session.
Without an auth file every request runs as ``User:ANONYMOUS`` and no login is asked for.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Form, Request
from fastapi.responses import RedirectResponse, Response

from lakelog.broker.authorizer import Principal
from lakelog.errors import KafkaError, SaslAuthenticationFailed

from api.console.paths import PREFIX, SESSION_COOKIE as COOKIE
from api.console.render import page
router = APIRouter(prefix=PREFIX, include_in_schema=False)


class LoginRequired(SaslAuthenticationFailed):
    """A console page was asked for without a valid session: answered with the login page."""


def authorization(request: Request) -> str | None:
    """The ``Authorization`` header value the session stands for (None without a token)."""
    token = request.cookies.get(COOKIE)
    return f"Bearer {token}" if token else None


async def principal(request: Request) -> Principal:
    """The session's principal; raises :class:`LoginRequired` without a valid token on an auth front."""
    authorizer = request.app.state.authorizer
    try:
        return authorizer.authenticate(authorization(request))
    except SaslAuthenticationFailed as e:
        raise LoginRequired(e.message) from None


PrincipalDep = Annotated[Principal, Depends(principal)]


@router.get("/login")
def login_form(request: Request, next: str = PREFIX) -> Response:
    return page(request, "login.html", next=_local(next))


@router.post("/login")
def login(request: Request, token: Annotated[str, Form(max_length=4096)],
          next: Annotated[str, Form(max_length=2048)] = PREFIX) -> Response:
    """Check the token once; keep it in the session cookie."""
    try:
        request.app.state.authorizer.authenticate(f"Bearer {token}")
    except KafkaError as e:
        return page(request, "login.html", 401, next=_local(next), failed=e.message)
    response = RedirectResponse(_local(next), status_code=303)
    response.set_cookie(COOKIE, token, httponly=True, samesite="strict", path=PREFIX)
    return response


@router.post("/logout")
def logout() -> Response:
    response = RedirectResponse(f"{PREFIX}/login", status_code=303)
    response.delete_cookie(COOKIE, path=PREFIX)
    return response


def _local(target: str) -> str:
    """Only a console path is a place to go after login (no open redirect)."""
    return target if target.startswith(PREFIX) and not target.startswith("//") and "\\" not in target else PREFIX
