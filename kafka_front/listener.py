"""The Kafka listener: an asyncio TCP server inside the ``lakelog serve`` process.

:func:`kafka_listener` is a start-up hook for :func:`api.app.create_app`: it
binds ``host:port`` on the app's event loop, serves each connection with a
:class:`~kafka_front.connection.Connection` over the app's shared objects, and
returns the coroutine that closes it on shutdown (before the accumulator
flushes, so no request is accepted after the last commit).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Awaitable, Callable

from kafka_front.commit_waiter import CommitWaiter
from kafka_front.connection import Connection
from kafka_front.context import FrontContext
from kafka_front.fetch_ahead import FetchAhead
from kafka_front.handlers.fetch import read_chunk
from kafka_front.sasl import Credentials
from lakelog.cluster.membership import is_unspecified_address

log = logging.getLogger(__name__)


def parse_address(value: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:9092`` for IPv6) → (host, port); ValueError if malformed."""
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"a Kafka listener is HOST:PORT, got {value!r}")
    return host.strip("[]"), int(port)


def kafka_listener(address: str, *, advertised: str | None = None, sasl_file: str | None = None,
                   max_frame_bytes: int = 100 << 20) -> Callable:
    """A start-up hook serving Kafka's protocol on ``address`` (``advertised``: what Metadata tells clients)."""
    host, port = parse_address(address)
    adv_host, adv_port = parse_address(advertised) if advertised else (host, port)
    if is_unspecified_address(adv_host):  # Kafka's rule for advertised.listeners too
        told = f"--kafka-advertised {advertised}" if advertised else f"a Kafka listener on {address}"
        raise ValueError(f"{told} names every interface, which clients cannot connect to; "
                         "give --kafka-advertised HOST:PORT with a host or address they can reach")
    credentials = Credentials.from_file(sasl_file) if sasl_file else Credentials()

    async def start(state) -> Callable[[], Awaitable[None]]:
        waiter = CommitWaiter(asyncio.get_running_loop())
        state.commit_listeners.append(waiter.notify)
        open_writers: set[asyncio.StreamWriter] = set()

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            open_writers.add(writer)
            try:
                await Connection(ctx, reader, writer).serve()
            finally:
                open_writers.discard(writer)

        server = await asyncio.start_server(serve, host, port, reuse_address=True, limit=1 << 20)
        bound = server.sockets[0].getsockname()[1]
        ctx = FrontContext(log=state.log, accumulator=state.accumulator, metadata=state.metadata,
                           produce=state.produce, coordinator=state.coordinator, offsets=state.offsets,
                           authorizer=state.authorizer, metrics=state.metrics, waiter=waiter,
                           credentials=credentials, host=adv_host, port=adv_port if port else bound,
                           max_frame_bytes=max_frame_bytes,
                           fetch_ahead=FetchAhead(lambda *a: read_chunk(state.log, *a)),
                           leases=getattr(state, "leases", None), transactions=state.transactions)
        state.kafka = ctx
        log.warning("lakelog Kafka listener on %s:%d", host, bound)

        async def stop() -> None:
            server.close()
            for w in list(open_writers):  # idle clients would otherwise hold wait_closed (Python >= 3.12)
                w.close()
            await server.wait_closed()
            await asyncio.to_thread(ctx.fetch_ahead.close)  # waits for a read in progress: off the event loop

        return stop

    return start
