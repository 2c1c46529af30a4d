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


def assign(partitions: list[tuple[str, int]], nodes: list[int],
           current: dict[tuple[str, int], int] | None = None) -> dict[tuple[str, int], int]:
    """Balanced and sticky: each topic's partitions spread over the live nodes within one of each other (the
    extra ones dealt round-robin across topics, so the totals stay within one too), keeping a partition on its
    ``current`` holder while that holder is live and under its share, so that a front joining or leaving moves
    only the partitions it must.  The same inputs give the same answer on every front."""
    order = sorted(set(nodes))
    if not order:
        return {}
    current = current or {}
    out: dict[tuple[str, int], int] = {}
    by_topic: dict[str, list[int]] = {}
    for t, p in sorted(partitions):
        by_topic.setdefault(t, []).append(p)
    extra_at = 0  # where the next topic's extra partitions start, so no node collects every topic's extras
    for topic, parts in by_topic.items():
        base, extra = divmod(len(parts), len(order))
        quota = {n: base for n in order}
        for j in range(extra):
            quota[order[(extra_at + j) % len(order)]] += 1
        extra_at = (extra_at + extra) % len(order)
        rest = []
        for p in parts:
            holder = current.get((topic, p))
            if holder in quota and quota[holder] > 0:
                out[(topic, p)] = holder
                quota[holder] -= 1
            else:
                rest.append(p)
        open_slots = [n for n in order for _ in range(quota[n])]
        for p, n in zip(rest, open_slots):
            out[(topic, p)] = n
    return out
