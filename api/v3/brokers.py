"""The brokers v3 shows: one per live front, and which of them leads a partition and coordinates a group --
the same answers the Kafka listener gives (Metadata, FindCoordinator; docs/kafka-clients.md).

A front without ``--node-id`` is the one broker, node id :data:`SINGLE_NODE_ID`, and leads every partition.
With several fronts on one root each live front is a broker under its node id, a partition's leader is the
live front holding its lease (none while nobody does), and a group's coordinator is the live front with a
Kafka listener its name hashes to.  A broker's host and port are its Kafka listener's (null without one).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

from lakelog.storage.partition_lease import lease_app, unpack

SINGLE_NODE_ID = 1  # the Kafka listener's node id for a front without --node-id (kafka_front.context.NODE_ID)


@dataclass(frozen=True)
class Broker:
    node_id: int
    host: str | None
    port: int | None


def _address(advertised: str | None) -> tuple[str | None, int | None]:
    host, _, port = (advertised or "").rpartition(":")
    return (host or None), (int(port) if port.isdigit() else None)


def brokers(state) -> list[Broker]:
    """The live brokers by node id (``state``: the app's state); never empty -- this front is one."""
    settings = state.settings
    me = Broker(SINGLE_NODE_ID if state.leases is None else settings.node_id, *_address(settings.kafka_advertised))
    if state.leases is None:
        return [me]
    live = [Broker(f.node_id, f.kafka_host, f.kafka_port) for f in state.leases.live()]
    return live if any(b.node_id == me.node_id for b in live) else sorted([*live, me], key=lambda b: b.node_id)


def leader(state, snapshot, partition: int, live: set[int]) -> int | None:
    """The node id of the broker leading ``partition`` of ``snapshot``'s topic, or None while none does."""
    if state.leases is None:
        return SINGLE_NODE_ID
    lease = unpack(snapshot.txn(lease_app(partition)))
    return lease.node_id if lease is not None and lease.node_id in live else None


def coordinator(state, group: str, live: list[Broker]) -> int:
    """The node id of the broker coordinating ``group`` (as the Kafka listener's FindCoordinator answers)."""
    if state.leases is None:
        return SINGLE_NODE_ID
    listening = [b for b in live if b.host is not None]
    if not listening:
        return state.settings.node_id
    return listening[zlib.crc32(group.encode()) % len(listening)].node_id
