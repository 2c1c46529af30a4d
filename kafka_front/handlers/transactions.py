"""AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit and EndTxn, over the process's transaction coordinator
(:mod:`lakelog.transaction.transaction_coordinator`, shared with the HTTP front).

Each call blocks on storage (a state change is a put-if-absent), so it runs in a worker thread.  Errors of
AddPartitionsToTxn and TxnOffsetCommit are answered per partition, as Kafka's broker does: when one partition
is refused, the others get ``OPERATION_NOT_ATTEMPTED``.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from lakelog.broker.authorizer import GROUP, TOPIC, TRANSACTIONAL_ID
from lakelog.errors import KafkaError, TopicAuthorizationFailed
from lakelog.transaction.transaction_coordinator import UnknownPartitions

if TYPE_CHECKING:
    from kafka_front.connection import Connection
    from kafka_front.context import FrontContext
    from kafka_front.request import Request

OPERATION_NOT_ATTEMPTED = 55


def _per_partition(topics: dict[str, list[int]], error: KafkaError | None,
                   failed: set[tuple[str, int]]) -> dict[str, list[tuple[int, int]]]:
    """(partition, error code) per topic: ``error`` for the ``failed`` partitions (all when none is named),
    OPERATION_NOT_ATTEMPTED for the rest."""
    def code(t: str, p: int) -> int:
        if error is None:
            return 0
        return error.code if not failed or (t, p) in failed else OPERATION_NOT_ATTEMPTED

    return {t: [(p, code(t, p)) for p in ps] for t, ps in topics.items()}


async def add_partitions_to_txn(ctx: "FrontContext", conn: "Connection", rq: "Request") -> dict:
    req = rq.body
    tid = req.v3_and_below_transactional_id
    topics = {t.name: list(t.partitions) for t in req.v3_and_below_topics}
    error: KafkaError | None = None
    failed: set[tuple[str, int]] = set()
    try:
        ctx.authorizer.authorize(conn.principal, "Write", TRANSACTIONAL_ID, tid)
        for t, ps in topics.items():
            if not ctx.authorizer.allowed(conn.principal, "Write", TOPIC, t):
                failed.update((t, p) for p in ps)
                error = TopicAuthorizationFailed(f"{conn.principal.name} is not authorized to Write topic {t!r}")
        if error is None:
            wanted = {(t, p) for t, ps in topics.items() for p in ps}
            await asyncio.to_thread(ctx.transactions.add_partitions, tid, req.v3_and_below_producer_id,
                                    req.v3_and_below_producer_epoch, wanted)
    except UnknownPartitions as e:
        ctx.metrics.count_error(e)
        error, failed = e, e.partitions
    except KafkaError as e:
        ctx.metrics.count_error(e)
        error = e
    answer = _per_partition(topics, error, failed)
    return {"results_by_topic_v3_and_below": [
        {"name": t, "results_by_partition": [{"partition_index": p, "partition_error_code": c} for p, c in ps]}
        for t, ps in answer.items()]}


async def add_offsets_to_txn(ctx: "FrontContext", conn: "Connection", rq: "Request") -> dict:
    req = rq.body
    ctx.authorizer.authorize(conn.principal, "Write", TRANSACTIONAL_ID, req.transactional_id)
    ctx.authorizer.authorize(conn.principal, "Read", GROUP, req.group_id)
    await asyncio.to_thread(ctx.transactions.add_offsets, req.transactional_id, req.producer_id,
                            req.producer_epoch, req.group_id)
    return {"error_code": 0}


async def txn_offset_commit(ctx: "FrontContext", conn: "Connection", rq: "Request") -> dict:
    req = rq.body
    topics = {t.name: [p.partition_index for p in t.partitions] for t in req.topics}
    error: KafkaError | None = None
    try:
        ctx.authorizer.authorize(conn.principal, "Write", TRANSACTIONAL_ID, req.transactional_id)
        ctx.authorizer.authorize(conn.principal, "Read", GROUP, req.group_id)
        for t in topics:
            ctx.authorizer.authorize(conn.principal, "Read", TOPIC, t)
        offsets = [(t.name, p.partition_index, p.committed_offset, p.committed_metadata or "",
                    max(getattr(p, "committed_leader_epoch", -1), -1)) for t in req.topics for p in t.partitions]
        if rq.version >= 3:  # the consumer's group metadata: a zombie member's offsets are fenced (KIP-447)
            await asyncio.to_thread(ctx.coordinator.validate_commit, req.group_id, req.member_id or None,
                                    req.generation_id, req.group_instance_id, transactional=True)
        await asyncio.to_thread(ctx.transactions.txn_offset_commit, req.transactional_id, req.producer_id,
                                req.producer_epoch, req.group_id, offsets)
    except KafkaError as e:
        ctx.metrics.count_error(e)
        error = e
    answer = _per_partition(topics, error, set())
    return {"topics": [{"name": t, "partitions": [{"partition_index": p, "error_code": c} for p, c in ps]}
                       for t, ps in answer.items()]}


async def end_txn(ctx: "FrontContext", conn: "Connection", rq: "Request") -> dict:
    req = rq.body
    ctx.authorizer.authorize(conn.principal, "Write", TRANSACTIONAL_ID, req.transactional_id)
    await asyncio.to_thread(ctx.transactions.end_txn, req.transactional_id, req.producer_id, req.producer_epoch,
                            bool(req.committed), wait=False)
    return {"error_code": 0}
