"""The web console at ``/ui`` (docs/console.md): server-rendered Jinja2 pages with htmx, over the front's services.

Pages: topics (partitions, offsets, sizes, configs; create, edit configs, delete), a message browser and
a produce form per topic, consumer groups (state, members, lag; lag with a small chart per partition,
offset reset), and storage (segments, the Delta log's commit history, maintenance).  Every action goes
through the same services and ACL checks as ``/v1``; with an auth file the token is entered once and kept
in an HttpOnly, SameSite=Strict session cookie.  Every state-changing form carries a token
(``api.console.csrf``).  htmx is vendored in ``static/`` (nothing from a CDN).
"""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from api.console.paths import PREFIX, SESSION_COOKIE, STATIC, STATIC_PREFIX, is_console

__all__ = ["PREFIX", "SESSION_COOKIE", "STATIC", "STATIC_PREFIX", "install", "is_console", "refusal"]


def refusal(scope, error):
    """A refusal made outside the routes (``api.cross_origin``) as the console answers it: an error page."""
    from starlette.requests import Request

    from api.console.render import error_page

    return error_page(Request(scope), error)


def install(app: FastAPI) -> None:
    """Mount the console's routes and assets on ``app``, and answer its errors as pages (after the front's own
    error handlers are installed: console paths are taken out of them)."""
    from fastapi import Depends
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import FileResponse, RedirectResponse, Response

    from lakelog.errors import InvalidRequest, KafkaError

    from api.console import csrf, groups, session, storage, topics
    from api.console.render import error_page

    app.mount(f"{PREFIX}/static", StaticFiles(directory=str(STATIC)), name="console-static")
    for module in (session, topics, groups, storage):
        app.include_router(module.router, dependencies=[Depends(csrf.check)])

    @app.get("/favicon.ico", include_in_schema=False)
    def favicon() -> FileResponse:
        """Browsers ask the root for it on every page, the console's included."""
        return FileResponse(STATIC / "favicon.ico", media_type="image/x-icon",
                            headers={"Cache-Control": "public, max-age=86400"})

    on_kafka_error = app.exception_handlers[KafkaError]
    on_validation_error = app.exception_handlers[RequestValidationError]

    async def kafka_error(request, exc: KafkaError):
        if not is_console(request.url.path):
            return await on_kafka_error(request, exc)
        if isinstance(exc, session.LoginRequired):
            login = f"{PREFIX}/login?next={request.url.path}"
            if request.headers.get("hx-request"):
                return Response(status_code=204, headers={"HX-Redirect": login})
            return RedirectResponse(login, status_code=303)
        request.app.state.metrics.count_error(exc)
        return error_page(request, exc)

    async def validation_error(request, exc: RequestValidationError):
        if not is_console(request.url.path):
            return await on_validation_error(request, exc)
        fields = ", ".join(str(e.get("loc", ("?",))[-1]) for e in exc.errors()[:5])
        return error_page(request, InvalidRequest(f"invalid form fields: {fields}"))

    app.add_exception_handler(KafkaError, kafka_error)
    app.add_exception_handler(RequestValidationError, validation_error)
