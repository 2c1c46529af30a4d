"""The Kafka listener: an asyncio TCP server inside the ``lakelog serve`` process.

:func:`kafka_listener` is a start-up hook for :func:`api.app.create_app`: it
binds ``host:port`` on the app's event loop, serves each connection with a
:class:`~kafka_front.connection.Connection` over the app's shared objects, and
returns the coroutine that closes it on shutdown (before the accumulator
flushes, so no request is accepted after the last commit).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from typing import Awaitable, Callable

from lakelog.cluster.broker_config import BrokerSettings
from lakelog.cluster.membership import is_unspecified_address
from lakelog.quota.quota_manager import QuotaManager
from lakelog.security import scram_store

from kafka_front.commit_waiter import CommitWaiter
from kafka_front.connection import Connection
from kafka_front.context import NODE_ID, FrontContext
from kafka_front.fetch_ahead import FetchAhead
from kafka_front.handlers.fetch import read_chunk
from kafka_front.sasl import Credentials

log = logging.getLogger(__name__)


def parse_address(value: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:9092`` for IPv6) → (host, port); ValueError if malformed."""
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"a Kafka listener is HOST:PORT, got {value!r}")
    return host.strip("[]"), int(port)


def kafka_listener(address: str, *, advertised: str | None = None, sasl_file: str | None = None,
                   max_frame_bytes: int = 100 << 20, sasl_max_receive_bytes: int = 524_288,
                   fetch_max_bytes: int = 57_671_680) -> Callable:
    """A start-up hook serving Kafka's protocol on ``address`` (``advertised``: what Metadata tells clients;
    the limits: :class:`~kafka_front.context.FrontContext`'s, Kafka's defaults)."""
    host, port = parse_address(address)
    adv_host, adv_port = parse_address(advertised) if advertised else (host, port)
    if is_unspecified_address(adv_host):  # Kafka's rule for advertised.listeners too
        told = f"--kafka-advertised {advertised}" if advertised else f"a Kafka listener on {address}"
        raise ValueError(f"{told} names every interface, which clients cannot connect to; "
                         "give --kafka-advertised HOST:PORT with a host or address they can reach")
    passwords = Credentials.read_file(sasl_file) if sasl_file else {}

    async def start(state) -> Callable[[], Awaitable[None]]:
        metadata = getattr(state, "cluster_metadata", None)
        if metadata is not None and passwords:  # the file's users become the root's SCRAM credentials, once
            await asyncio.to_thread(metadata.update, lambda image: _seeded(image, passwords))
        credentials = Credentials(passwords, scram_source=(lambda: metadata.image.scram) if metadata else None)
        broker = broker_settings(state.settings, max_frame_bytes)
        quotas = (QuotaManager(metadata.quotas, samples=broker.quota_window_num,
                               window_ms=broker.quota_window_size_seconds * 1000) if metadata is not None else None)
        waiter = CommitWaiter(asyncio.get_running_loop())
        state.commit_listeners.append(waiter.notify)
        connections: set[Connection] = set()

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            conn = Connection(ctx, reader, writer)
            connections.add(conn)
            try:
                await conn.serve()
            finally:
                connections.discard(conn)

        server = await asyncio.start_server(serve, host, port, reuse_address=True, limit=1 << 20)
        bound = server.sockets[0].getsockname()[1]
        ctx = FrontContext(log=state.log, metadata=state.metadata,
                           produce=state.pipeline, coordinator=state.coordinator, offsets=state.offsets,
                           authorizer=state.authorizer, metrics=state.metrics, waiter=waiter,
                           credentials=credentials, host=adv_host, port=adv_port if port else bound,
                           max_frame_bytes=max_frame_bytes, sasl_max_receive_bytes=sasl_max_receive_bytes,
                           fetch_max_bytes=fetch_max_bytes,
                           fetch_ahead=FetchAhead(lambda *a: read_chunk(state.log, *a)),
                           leases=getattr(state, "leases", None), transactions=state.transactions,
                           cluster_metadata=metadata, broker=broker, quotas=quotas)
        state.kafka = ctx
        # read by /metrics in another thread while the event loop adds and drops connections: the set is copied
        # (atomic under the GIL) and the copy iterated, as iterating the set itself fails if it changes size
        state.metrics.watch_kafka(lambda: len(connections), lambda: sum(c.held_bytes for c in list(connections)))
        log.info("lakelog Kafka listener on %s:%d", host, bound)

        async def stop() -> None:
            server.close()
            for conn in list(connections):  # idle clients would otherwise hold wait_closed (Python >= 3.12)
                conn.close()
            await server.wait_closed()
            await asyncio.to_thread(ctx.fetch_ahead.close)  # waits for a read in progress: off the event loop

        return stop

    return start


def broker_settings(settings, max_frame_bytes: int) -> BrokerSettings:
    """The listener's static broker configs from the front's settings; those that differ from Kafka's defaults
    are described as set on the command line (``STATIC_BROKER_CONFIG``)."""
    broker = BrokerSettings(node_id=settings.node_id if settings.node_id is not None else NODE_ID,
                            auto_create_topics_enable=settings.auto_create_topics_enable,
                            num_partitions=settings.num_partitions, quota_window_num=settings.quota_window_num,
                            quota_window_size_seconds=settings.quota_window_size_seconds,
                            socket_request_max_bytes=max_frame_bytes)
    defaults = BrokerSettings().values()
    explicit = {k for k, v in broker.values().items() if v != defaults[k]} | {"node.id", "broker.id"}
    return dataclasses.replace(broker, explicit=frozenset(explicit))


def _seeded(image, passwords: dict[str, str]):
    scram, seeded = scram_store.seed(image.scram, image.scram_seeded, passwords)
    return dataclasses.replace(image, scram=scram, scram_seeded=seeded)
