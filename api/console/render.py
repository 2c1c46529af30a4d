"""Rendering console pages: the Jinja2 environment (autoescaped), and Kafka errors as HTML."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

from fastapi import Request
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates

from lakelog.broker.public_message import public_message
from lakelog.errors import KafkaError

from api.console import csrf
from api.errors import status_for

templates = Jinja2Templates(directory=str(Path(__file__).with_name("templates")))


def _iso(ms: int | None) -> str:
    if ms is None or ms < 0 or ms > 253402300799999:
        return "-"
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


def _size(n: int | None) -> str:
    if n is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    return str(n)


templates.env.filters["iso"] = _iso
templates.env.filters["size"] = _size
templates.env.filters["tojson_pretty"] = lambda v: json.dumps(v, indent=2, ensure_ascii=False)


def page(request: Request, name: str, status: int = 200, **context) -> HTMLResponse:
    """Render ``templates/name`` with ``context`` (plus ``request``, whether auth is on, and the form token)."""
    context.setdefault("auth", request.app.state.authorizer.enabled)
    context["csrf_token"] = csrf.form_token(request)
    response = templates.TemplateResponse(request, name, context, status_code=status)
    csrf.remember(request, response)
    return response


def error_page(request: Request, error: KafkaError) -> HTMLResponse:
    """A Kafka error as a page (or, for an htmx request, a fragment): its name, code and message, no trace.
    The status is the error's own ``http_status`` if it has one, else the front's mapping."""
    status = getattr(error, "http_status", None) or status_for(error)
    name = "_error.html" if request.headers.get("hx-request") else "error.html"
    response = page(request, name, status, error_name=error.name, error_code=error.code,
                    message=public_message(error.message))
    if request.headers.get("hx-request"):
        response.headers["HX-Retarget"] = "#flash"
        response.headers["HX-Reswap"] = "innerHTML"
    return response
