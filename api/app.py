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

from fastapi import FastAPI
from fastapi.responses import HTMLResponse
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import State

from lakelog import Log, __version__
from lakelog.broker.authorizer import Authorizer
from lakelog.broker.metrics import Metrics
from lakelog.broker.produce import ProducePipeline
from lakelog.broker.topic_metadata import TopicMetadata
from lakelog.cluster.cluster_metadata import ClusterMetadata
from lakelog.errors import KafkaError
from lakelog.group.consumer_offsets import OffsetStore
from lakelog.group.group_coordinator import GroupCoordinator
from lakelog.storage.storage_root import StorageRoot
from lakelog.storage.topic_name import is_internal, is_kafka_internal
from lakelog.transaction.transaction_coordinator import TransactionCoordinator

from api import console
from api.body_limit import BodyLimit
from api.cross_origin import CrossOriginProtection, CrossOriginRequest
from api.errors import UnexpectedErrors, error_response, install_error_handlers, is_v3
from api.json_body import Utf8JsonBody
from api.request_timer import RequestTimer
from api.produce_lane import ProduceLane
from api.produce_openapi import add_produce_operations
from api.routers import (fetch, groups, handoffs, health, members, producers, schema_registry, topics,
                         transactions, v3_acls, v3_brokers, v3_clusters, v3_groups, v3_partitions, v3_topics)
from api.v3.produce_lane import V3ProduceLane
from api.v3.resources import cluster_id_for
from api.security_headers import SecurityHeaders
from api.produce_request import ProduceService
from api.settings import Settings

DESCRIPTION = """Kafka's produce, fetch, topic admin and offset commits over HTTP, on a lakelog root.

Every error body is `{"error_code", "error_name", "message"}` with Kafka's error code; see docs/http.md."""


StartHook = Callable[[State], Awaitable[Callable[[], Awaitable[None]]]]


def _lease_keeper(root: StorageRoot, settings: Settings):
    """This front's lease keeper (started once the Log is built with it) and the forwarder of topics' commits to
    their committer fronts."""
    from lakelog.cluster.cluster_secret import cluster_secret
    from lakelog.cluster.commit_forwarder import CommitForwarder
    from lakelog.cluster.lease_keeper import LeaseKeeper
    from lakelog.cluster.membership import FrontInfo, Membership

    host, _, port = (settings.kafka_advertised or "").rpartition(":")
    me = FrontInfo(settings.node_id, settings.http_url, host or None,
                   int(port) if port.isdigit() else None)
    keeper = LeaseKeeper(Membership(root, me, settings.front_session_timeout_ms))
    return keeper, CommitForwarder(keeper, cluster_secret(root))


def create_app(settings: Settings | None = None, *, on_start: Sequence[StartHook] = ()) -> FastAPI:
    """A front over ``settings.root``; a bad auth file fails here, before anything starts.

    ``on_start``: coroutines run once the shared objects exist (``app.state``), each returning a coroutine
    that stops what it started; ``lakelog serve --kafka-listener`` starts the Kafka listener this way.
    ``app.state.commit_listeners`` are called after each commit as ``(topic, records, bytes, seconds)``."""
    settings = settings or Settings.from_env()
    # the root's ACLs, SCRAM credentials, client quotas and broker configs (read from the root at start-up)
    cluster_metadata = ClusterMetadata(StorageRoot.resolve(settings.root, settings.storage_options or None))
    authorizer = (Authorizer.from_file(settings.auth_file, dynamic=cluster_metadata) if settings.auth_file
                  else Authorizer.open())
    metrics = Metrics()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        root = StorageRoot.resolve(settings.root, settings.storage_options or None)
        keeper = forwarder = None
        if settings.node_id is not None:  # several fronts on one root: keep this front's share of leases
            keeper, forwarder = await run_in_threadpool(_lease_keeper, root, settings)
        # the accumulator's queue times and the committers' stages go to on_commit_stages
        log = Log(root, node_id=settings.node_id, leases=keeper, forwarder=forwarder,
                  on_commit_stages=metrics.on_stages)
        await run_in_threadpool(cluster_metadata.start)
        app.state.cluster_metadata = cluster_metadata
        listeners: list[Callable] = [metrics.on_commit]
        app.state.commit_listeners = listeners

        def on_commit(*args) -> None:
            for listener in listeners:
                listener(*args)

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
            partition_counts=lambda topics: _partition_counts(metadata, topics),
            topic_names=lambda: _regex_topics(log))
        ticker = asyncio.create_task(_tick(app.state.coordinator))
        group_state = asyncio.create_task(_keep_group_state(app.state.coordinator))
        app.state.transactions = TransactionCoordinator(
            log, append=lambda topic, batches: accumulator.append(topic, batches).result(),
            offsets=app.state.offsets)
        await run_in_threadpool(app.state.transactions.recover)  # finish what a crashed front decided
        # the first InitProducerId is answered from a block claimed now, not after a commit of its own
        threading.Thread(target=log.registry.prefetch, name="lakelog-producer-ids", daemon=True).start()
        expiry = asyncio.create_task(_abort_expired(app.state.transactions))
        app.state.pipeline = ProducePipeline(log, accumulator, metadata, authorizer, metrics,
                                             app.state.transactions)
        app.state.produce = ProduceService(app.state.pipeline, max_request_bytes=settings.max_request_bytes)
        await run_in_threadpool(ProduceService.warm_up)
        # What exists now lives as long as the process: keep it out of the collector's generations, so a
        # full collection scans only request garbage, not the whole start-up heap, at the latency tail.
        app.state.leases = None
        if keeper is not None:
            app.state.leases = await run_in_threadpool(keeper.start, log)
            app.state.cluster_secret = forwarder.secret
        stops = [await hook(app.state) for hook in on_start]
        gc.freeze()
        try:
            yield
        finally:
            for stop in reversed(stops):
                await stop()
            ticker.cancel()
            group_state.cancel()
            expiry.cancel()
            await run_in_threadpool(app.state.coordinator.persist)
            if app.state.leases is not None:
                await run_in_threadpool(app.state.leases.stop)
            await run_in_threadpool(accumulator.close)
            await run_in_threadpool(cluster_metadata.stop)
            await run_in_threadpool(log.close)
            if forwarder is not None:
                await run_in_threadpool(forwarder.close)

    app = FastAPI(title="lakelog", version=__version__, description=DESCRIPTION, lifespan=lifespan,
                  docs_url=None, redoc_url=None)
    _serve_docs_offline(app)
    app.state.settings = settings
    app.state.metrics = metrics
    app.state.authorizer = authorizer
    install_error_handlers(app)
    for module in (health, topics, fetch, producers, transactions, groups, members, handoffs,
                   v3_clusters, v3_brokers, v3_acls, v3_topics, v3_partitions, v3_groups, schema_registry):
        app.include_router(module.router)
    console.install(app)
    # Innermost first: produce requests pass the timer, the response headers, the cross-origin check and the
    # body limit, then leave FastAPI's stack.
    app.add_middleware(Utf8JsonBody)
    app.add_middleware(UnexpectedErrors)
    app.add_middleware(V3ProduceLane, state=app.state)
    app.add_middleware(ProduceLane, state=app.state, parse_endpoint=settings.bench_endpoints)
    app.add_middleware(BodyLimit, max_bytes=settings.max_request_bytes)
    app.add_middleware(CrossOriginProtection, respond=_cross_origin_refusal)
    app.add_middleware(SecurityHeaders)
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


GROUP_STATE_FOLLOW_S = 1.0  # how soon a front sees a group deleted elsewhere (within one heartbeat interval)


async def _keep_group_state(coordinator: GroupCoordinator) -> None:
    """Write changed groups to ``__consumer_offsets`` (every ~100 ms), re-read consumer groups' partition counts
    and follow what other processes wrote (every second)."""
    loop = asyncio.get_running_loop()
    followed = loop.time()
    while True:
        await asyncio.sleep(0.1)
        try:
            await run_in_threadpool(coordinator.persist)
            if loop.time() - followed >= GROUP_STATE_FOLLOW_S:
                followed = loop.time()
                await run_in_threadpool(coordinator.refresh_metadata)
                await run_in_threadpool(coordinator.follow)
        except Exception:  # a storage hiccup must not stop it: the next round retries
            logging.getLogger(__name__).exception("keeping group state failed")


async def _abort_expired(transactions: TransactionCoordinator) -> None:
    """Abort transactions past their transaction.timeout.ms even when their producer never calls again."""
    while True:
        await asyncio.sleep(TRANSACTION_EXPIRY_CHECK_S)
        try:
            await run_in_threadpool(transactions.abort_expired)
        except Exception:
            logging.getLogger(__name__).exception("aborting expired transactions failed")


def _cross_origin_refusal(scope, error: CrossOriginRequest):
    """A cross-origin refusal as the path's kind of answer: a console page, a v3 or a v1 error body."""
    scope["app"].state.metrics.count_error(error)
    if console.is_console(scope["path"]):
        return console.refusal(scope, error)
    return error_response(error, status=error.http_status, v3=is_v3(scope["path"]))


def _regex_topics(log: Log) -> list[str]:
    """The topics a KIP-848 regex subscription is matched against: every topic Metadata lists, Kafka's internal
    ``__consumer_offsets`` included, as Kafka's coordinator matches every topic of its metadata image (franz-go's
    Test848RegexBrokerResolves)."""
    return [t for t in log.list_topics(True) if is_kafka_internal(t) or not is_internal(t)]


def _partition_counts(metadata: TopicMetadata, topics) -> dict[str, int]:
    out = {}
    for t in topics:
        try:
            out[t] = metadata.get(t, fresh=True).partition_count
        except KafkaError:
            out[t] = 0  # a deleted or not yet created topic has no partitions to assign
    return out


def _document_produce_body(app: FastAPI) -> None:
    """Add the produce operations, answered ahead of FastAPI's routing, to the OpenAPI document
    (``api.produce_openapi``)."""
    base = app.openapi

    def openapi() -> dict:
        if app.openapi_schema is None:
            app.openapi_schema = add_produce_operations(base())
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
