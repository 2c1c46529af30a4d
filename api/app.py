"""The FastAPI front: ``create_app(settings)``.

The lifespan owns every shared object -- the :class:`~lakelog.Log`, the
group-commit :class:`~lakelog.RecordAccumulator`, the
:class:`~lakelog.group.consumer_offsets.OffsetStore`, the topic metadata cache --
and closes them on shutdown (pending appends are committed first).  Nothing is
global: two apps in one process share nothing.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import threading
from contextlib import asynccontextmanager
from typing import AsyncIterator, Awaitable, Callable, Sequence

from fastapi import APIRouter, FastAPI
from fastapi.responses import HTMLResponse
from fastapi.routing import APIRoute
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import State

from lakelog import Log, __version__
from lakelog.group.consumer_offsets import OffsetStore
from lakelog.errors import KafkaError
from lakelog.group.group_coordinator import GroupCoordinator
from lakelog.transaction.transaction_coordinator import TransactionCoordinator

from api import console
from api.auth import Authorizer
from api.body_limit import BodyLimit
from api.errors import UnexpectedErrors, install_error_handlers
from api.metrics import Metrics, RequestTimer
from api.produce_lane import PARSE_ROUTE, ProduceLane, ROUTE as PRODUCE_ROUTE
from api.routers import (bench, fetch, groups, handoffs, health, members, producers, records, topics,
                         transactions, v3_clusters, v3_groups, v3_records, v3_topics)
from api.routers.v3_records import PRODUCE_DATA_SCHEMA
from api.v3.produce_lane import ROUTE as V3_PRODUCE_ROUTE, V3ProduceLane
from api.v3.resources import cluster_id_for
from api.produce_body import openapi_components
from api.services.produce import ProduceService
from api.services.topic_metadata import TopicMetadata
from api.settings import Settings

DESCRIPTION = """Kafka's produce, fetch, topic admin and offset commits over HTTP, on a lakelog root.

Every error body is `{"error_code", "error_name", "message"}` with Kafka's error code; see docs/http.md."""


StartHook = Callable[[State], Awaitable[Callable[[], Awaitable[None]]]]


def _lease_keeper(log: Log, settings: Settings):
    """Start keeping this front's share of partition leases; topics' commits go through their committer fronts
    (``log.forwarder``), set before the first lease is taken."""
    from lakelog.cluster.cluster_secret import cluster_secret
    from lakelog.cluster.commit_forwarder import CommitForwarder
    from lakelog.cluster.lease_keeper import LeaseKeeper
    from lakelog.cluster.membership import FrontInfo, Membership

    host, _, port = (settings.kafka_advertised or "").rpartition(":")
    me = FrontInfo(settings.node_id, settings.http_url, host or None,
                   int(port) if port.isdigit() else None)
    keeper = LeaseKeeper(log, Membership(log.root, me, settings.front_session_timeout_ms))
    log.forwarder = CommitForwarder(keeper, cluster_secret(log.root))
    return keeper.start()


def create_app(settings: Settings | None = None, *, on_start: Sequence[StartHook] = ()) -> FastAPI:
    """A front over ``settings.root``; a bad auth file fails here, before anything starts.

    ``on_start``: coroutines run once the shared objects exist (``app.state``), each returning a coroutine
    that stops what it started; ``lakelog serve --kafka-listener`` starts the Kafka listener this way.
    ``app.state.commit_listeners`` are called after each commit as ``(topic, records, bytes, seconds)``."""
    settings = settings or Settings.from_env()
    authorizer = Authorizer.from_file(settings.auth_file) if settings.auth_file else Authorizer.open()
    metrics = Metrics()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        log = Log(settings.root, storage_options=settings.storage_options or None, node_id=settings.node_id)
        listeners: list[Callable] = [metrics.on_commit]
        app.state.commit_listeners = listeners

        def on_commit(*args) -> None:
            for listener in listeners:
                listener(*args)

        log.on_commit_stages = metrics.on_stages  # the accumulator's queue times and the committers' stages
        accumulator = log.accumulator(linger_ms=settings.linger_ms, batch_size=settings.batch_size,
                                      buffer_memory=settings.buffer_memory, on_commit=on_commit,
                                      eager_uploads=settings.eager_uploads)
        metrics.watch_accumulator(lambda: accumulator.buffered_bytes, accumulator.buffer_memory)
        metadata = TopicMetadata(log, settings.metadata_max_age_ms)
        app.state.log = log
        app.state.cluster_id = cluster_id_for(log.root.uri)
        app.state.accumulator = accumulator
        app.state.metadata = metadata
        app.state.offsets = await run_in_threadpool(OffsetStore, log, accumulator=accumulator)
        app.state.coordinator = await run_in_threadpool(
            GroupCoordinator, store=app.state.offsets, config=settings.coordinator_config(),
            partition_counts=lambda topics: _partition_counts(metadata, topics))
        ticker = asyncio.create_task(_tick(app.state.coordinator))
        app.state.transactions = TransactionCoordinator(
            log, append=lambda topic, batches: accumulator.append(topic, batches).result(),
            offsets=app.state.offsets)
        await run_in_threadpool(app.state.transactions.recover)  # finish what a crashed front decided
        # the first InitProducerId is answered from a block claimed now, not after a commit of its own
        threading.Thread(target=log.registry.prefetch, name="lakelog-producer-ids", daemon=True).start()
        expiry = asyncio.create_task(_abort_expired(app.state.transactions))
        app.state.produce = ProduceService(log, accumulator, metadata, metrics,
                                           max_request_bytes=settings.max_request_bytes)
        await run_in_threadpool(ProduceService.warm_up)
        # What exists now lives as long as the process: keep it out of the collector's generations, so a
        # full collection scans only request garbage, not the whole start-up heap, at the latency tail.
        app.state.leases = None
        if settings.node_id is not None:  # several fronts on one root: keep this front's share of leases
            app.state.leases = await run_in_threadpool(_lease_keeper, log, settings)
            app.state.cluster_secret = log.forwarder.secret
        stops = [await hook(app.state) for hook in on_start]
        gc.freeze()
        try:
            yield
        finally:
            for stop in reversed(stops):
                await stop()
            ticker.cancel()
            expiry.cancel()
            if app.state.leases is not None:
                await run_in_threadpool(app.state.leases.stop)
            await run_in_threadpool(accumulator.close)
            await run_in_threadpool(log.close)
            if log.forwarder is not None:
                await run_in_threadpool(log.forwarder.close)

    app = FastAPI(title="lakelog", version=__version__, description=DESCRIPTION, lifespan=lifespan,
                  docs_url=None, redoc_url=None)
    _serve_docs_offline(app)
    app.state.settings = settings
    app.state.metrics = metrics
    app.state.authorizer = authorizer
    install_error_handlers(app)
    for module in (health, topics, records, fetch, producers, transactions, groups, members, handoffs,
                   v3_clusters, v3_topics, v3_records, v3_groups):
        app.include_router(module.router)
    console.install(app)
    if settings.bench_endpoints:
        app.include_router(bench.router)
    # Innermost first: produce requests pass the timer and the body limit, then leave FastAPI's stack.
    app.add_middleware(UnexpectedErrors)
    app.add_middleware(V3ProduceLane, state=app.state, route=_post_route(v3_records.router, V3_PRODUCE_ROUTE))
    app.add_middleware(ProduceLane, state=app.state, route=_post_route(records.router, PRODUCE_ROUTE),
                       parse_route=_post_route(bench.router, PARSE_ROUTE) if settings.bench_endpoints else None)
    app.add_middleware(BodyLimit, max_bytes=settings.max_request_bytes)
    app.add_middleware(RequestTimer, metrics=metrics)
    _document_produce_body(app)
    return app


DOCS_ASSETS = "/docs-assets"
TRANSACTION_EXPIRY_CHECK_S = 1.0  # Kafka checks every 10 s (transaction.abort.timed.out.transaction.cleanup.interval.ms)


def _serve_docs_offline(app: FastAPI) -> None:
    """``/docs``: Swagger UI from the assets the ``swagger-ui-bundle-v2`` package ships, not from a CDN, so the
    page works on a machine without internet access."""
    from fastapi.openapi.docs import get_swagger_ui_html
    from fastapi.staticfiles import StaticFiles
    from swagger_ui_bundle import swagger_ui_path

    app.mount(DOCS_ASSETS, StaticFiles(directory=str(swagger_ui_path)), name="docs-assets")

    @app.get("/docs", include_in_schema=False)
    async def docs() -> HTMLResponse:
        return get_swagger_ui_html(openapi_url=app.openapi_url, title=f"{app.title} API",
                                   swagger_js_url=f"{DOCS_ASSETS}/swagger-ui-bundle.js",
                                   swagger_css_url=f"{DOCS_ASSETS}/swagger-ui.css",
                                   swagger_favicon_url=f"{DOCS_ASSETS}/favicon-32x32.png")


async def _tick(coordinator: GroupCoordinator) -> None:
    """Expire sessions and finish timed-out rebalances even when no member calls in."""
    while True:
        await asyncio.sleep(0.1)
        try:
            await run_in_threadpool(coordinator.tick)
        except Exception:  # a storage hiccup saving group metadata must not stop expiry
            logging.getLogger(__name__).exception("group coordinator tick failed")


async def _abort_expired(transactions: TransactionCoordinator) -> None:
    """Abort transactions past their transaction.timeout.ms even when their producer never calls again."""
    while True:
        await asyncio.sleep(TRANSACTION_EXPIRY_CHECK_S)
        try:
            await run_in_threadpool(transactions.abort_expired)
        except Exception:
            logging.getLogger(__name__).exception("aborting expired transactions failed")


def _post_route(router: APIRouter, path: str) -> APIRoute:
    return next(r for r in router.routes if isinstance(r, APIRoute) and r.path == path and "POST" in r.methods)


def _partition_counts(metadata: TopicMetadata, topics) -> dict[str, int]:
    out = {}
    for t in topics:
        try:
            out[t] = metadata.get(t, fresh=True).partition_count
        except KafkaError:
            out[t] = 0  # a deleted or not yet created topic has no partitions to assign
    return out


def _document_produce_body(app: FastAPI) -> None:
    """Add the produce body's JSON schema (msgspec structs, decoded by hand) to the OpenAPI document."""
    base = app.openapi

    def openapi() -> dict:
        if app.openapi_schema is None:
            schema = base()
            schema.setdefault("components", {}).setdefault("schemas", {}).update(openapi_components())
            schema["components"]["schemas"]["ProduceRequestData"] = PRODUCE_DATA_SCHEMA
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
