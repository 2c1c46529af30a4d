"""The HTTP request latency histogram's middleware (``lakelog_request_duration_seconds``, see
``lakelog.broker.metrics``)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lakelog.broker.metrics import Metrics

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send


@dataclass(frozen=True)
class RouteLabel:
    """The route template a request answered outside FastAPI's routing is timed under (``scope["route"]``, which
    FastAPI's routing sets to the matched route for the others)."""

    path: str


class RequestTimer:
    """Pure-ASGI middleware observing every HTTP request's latency, labelled by route template."""

    def __init__(self, app: "ASGIApp", metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: "Scope", receive: "Receive", send: "Send") -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = [500]

        async def send_wrapper(message: "Message") -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            route = scope.get("route")
            template = getattr(route, "path", None) or "unmatched"
            self.metrics.request_duration.labels(scope["method"], template, str(status[0])).observe(
                time.perf_counter() - started)
