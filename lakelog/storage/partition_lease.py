"""Partition leases: which front (by Kafka node id) may append to a partition, kept in the topic's Delta log.

On-disk: the ``txn`` action ``lakelog.lease.<P>`` whose version packs ``(epoch << 16) | node_id``.  A front
takes a lease with a commit of that action alone, put-if-absent at the next version (the same primitive as
every commit), at ``epoch + 1``.  Every append commit by a lease-holding front carries its lease action again,
unchanged: a concurrent takeover sets the same app id, so the append's commit conflicts (the conflict rule
re-plans on any shared app id), is re-planned on the newer snapshot, and there the holder is no longer this
front: its batches fail with ``NOT_LEADER_OR_FOLLOWER`` and nothing is written.  Leases live in ``txn``
actions so that checkpoints keep them.  Pure functions; no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

LEASE_APP = "lakelog.lease."
MAX_NODE_ID = (1 << 16) - 1


@dataclass(frozen=True, order=True)
class Lease:
    epoch: int
    node_id: int

    def pack(self) -> int:
        return (self.epoch << 16) | self.node_id

    def next(self, node_id: int) -> "Lease":
        """The lease ``node_id`` takes over this one with."""
        return Lease(self.epoch + 1, node_id)


def lease_app(partition: int) -> str:
    return f"{LEASE_APP}{partition}"


def unpack(version: int | None) -> Lease | None:
    return None if version is None else Lease(version >> 16, version & MAX_NODE_ID)


def check_node_id(node_id: int) -> int:
    if not isinstance(node_id, int) or not 0 <= node_id <= MAX_NODE_ID:
        raise ValueError(f"a node id is an integer in [0, {MAX_NODE_ID}], got {node_id!r}")
    return node_id


def assign(partitions: list[tuple[str, int]], nodes: list[int]) -> dict[tuple[str, int], int]:
    """Kafka-style balance: each topic's partitions dealt round-robin over the live nodes (sorted), starting
    where the previous topic stopped, so every node holds within one partition of every other, per topic and
    overall.  The same inputs give the same answer on every front."""
    if not nodes:
        return {}
    order = sorted(set(nodes))
    out: dict[tuple[str, int], int] = {}
    for i, tp in enumerate(sorted(partitions)):
        out[tp] = order[i % len(order)]
    return out
