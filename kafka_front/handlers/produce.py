"""Produce and InitProducerId, over the HTTP front's produce path (the same accumulator, producer state,
sequence checks and errors).

Per partition: every batch is split, CRC-checked and decoded (compressed
records bounded by the listener's frame limit) before anything is queued, so a
partition with one bad batch writes nothing; other partitions of the request
are unaffected, as in Kafka.  Idempotent batches keep their producer id, epoch
and base sequence; the committer checks them atomically with the commit.
acks=1 and acks=-1 both answer after the commit (storage is the only replica);
acks=0 answers nothing.  A transactional produce (the request names a
transactional id) is staged with the transaction coordinator instead of
appended: it answers offset -1, and its records get offsets when EndTxn commits.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from lakelog.errors import (InvalidRequest, InvalidRequiredAcks, InvalidTopic, KafkaError,
                            TopicAuthorizationFailed, TransactionalIdAuthorizationFailed, UnknownTopicOrPartition)
from lakelog.storage.topic_name import is_internal, validate_topic_name
from lakelog.writer.committer import PartitionBatch
from lakelog.writer.records import validate_records

from api.auth import CLUSTER, TOPIC, TRANSACTIONAL_ID
from api.public_message import public_message

from kafka_front.record_batch import decode_batch, split_batches
from kafka_front.record_table import batch_table
from kafka_front.request import NO_RESPONSE

if TYPE_CHECKING:
    from lakelog.storage.topic_snapshot import TopicSnapshot

    from kafka_front.connection import Connection
    from kafka_front.context import FrontContext
    from kafka_front.request import Request

INLINE_DECODE_BYTES = 256 << 10  # larger partitions decode in a worker thread, keeping the loop responsive


async def init_producer_id(ctx: "FrontContext", conn: "Connection", rq: "Request") -> dict:
    tid = rq.body.transactional_id
    if tid is not None:
        ctx.authorizer.authorize(conn.principal, "Write", TRANSACTIONAL_ID, tid)
        timeout_ms = int(rq.body.transaction_timeout.total_seconds() * 1000)
        ident = await asyncio.to_thread(ctx.transactions.init_producer_id, tid, timeout_ms)
        return {"error_code": 0, "producer_id": ident.producer_id, "producer_epoch": ident.producer_epoch}
    ctx.authorizer.authorize(conn.principal, "IdempotentWrite", CLUSTER)
    ident = await asyncio.to_thread(ctx.log.init_producer, None)
    return {"error_code": 0, "producer_id": ident.producer_id, "producer_epoch": ident.producer_epoch}


async def _snapshot(ctx: "FrontContext", topic: str, partition: int) -> "TopicSnapshot":
    snap = ctx.metadata.peek(topic) or await asyncio.to_thread(ctx.metadata.get, topic)
    if partition >= snap.partition_count:
        snap = await asyncio.to_thread(ctx.metadata.get, topic, fresh=True)
        if partition >= snap.partition_count:
            raise UnknownTopicOrPartition(f"partition {partition} of topic {topic} does not exist "
                                          f"(the topic has {snap.partition_count} partitions)")
    return snap


def _decode_partition(records: bytes, partition: int, snap: "TopicSnapshot", limit: int,
                      transactional: bool = False) -> list[PartitionBatch]:
    """The partition's batches, decoded and validated; ``transactional``: the request's transactional id was
    set, and every batch must say so (with its producer id), as Kafka's broker requires."""
    out = []
    for raw in split_batches(records):
        batch = decode_batch(raw, max_decompressed_bytes=limit)
        if batch.control:
            raise InvalidRequest("a producer cannot write control batches")
        if batch.transactional != transactional or (transactional and batch.producer_id < 0):
            raise InvalidRequest("transactional batches need the request's transactional_id, and a request with "
                                 "a transactional_id only transactional batches with a producer id")
        if not len(batch):
            continue
        table = batch_table(batch)
        validate_records(table, snap.config, topic=snap.topic, partition=partition)
        out.append(PartitionBatch(partition, table, batch.producer_id, batch.producer_epoch, batch.base_sequence))
    if not out:
        raise InvalidRequest(f"no records for partition {partition} of {snap.topic}")
    return out


def _stage(ctx: "FrontContext", tid: str, staged: list) -> dict[tuple[str, int], KafkaError]:
    """Stage a transactional request's batches with the coordinator; the partitions that failed, with why."""
    failed = {}
    for topic, partition, batches in staged:
        try:
            for b in batches:
                ctx.transactions.stage_batch(tid, b, topic)
        except KafkaError as e:
            failed[(topic, partition)] = e
    return failed


async def produce(ctx: "FrontContext", conn: "Connection", rq: "Request"):
    req = rq.body
    answers: dict[tuple[str, int], dict] = {}
    queued: list[tuple[str, list[PartitionBatch]]] = []
    staged: list[tuple[str, int, list[PartitionBatch]]] = []  # a transactional request's batches, per partition
    tid = req.transactional_id
    if tid is not None and not ctx.authorizer.allowed(conn.principal, "Write", TRANSACTIONAL_ID, tid):
        fail: KafkaError | None = TransactionalIdAuthorizationFailed(
            f"{conn.principal.name} is not authorized to Write transactional id {tid!r}")
    elif req.acks not in (0, 1, -1):
        fail = InvalidRequiredAcks(f"acks must be 0, 1 or -1, got {req.acks}")
    else:
        fail = None
    for td in req.topic_data:
        topic = td.name
        batches: list[PartitionBatch] = []
        for pd in td.partition_data:
            try:
                if fail is not None:
                    raise fail
                validate_topic_name(topic)
                if is_internal(topic):
                    raise InvalidTopic(f"topic {topic} is internal: it cannot be produced to")
                if not ctx.authorizer.allowed(conn.principal, "Write", TOPIC, topic):
                    raise TopicAuthorizationFailed(f"{conn.principal.name} is not authorized to Write topic {topic!r}")
                snap = await _snapshot(ctx, topic, pd.index)
                data = pd.records or b""
                if len(data) > INLINE_DECODE_BYTES:
                    got = await asyncio.to_thread(_decode_partition, data, pd.index, snap, ctx.max_frame_bytes,
                                                  tid is not None)
                else:
                    got = _decode_partition(data, pd.index, snap, ctx.max_frame_bytes, tid is not None)
                if tid is not None:  # held by the coordinator until EndTxn: no offset yet (docs/kafka-clients.md)
                    staged.append((topic, pd.index, got))
                    answers[(topic, pd.index)] = {"count": len(got), "base_offset": -1}
                    continue
                batches.extend(got)
                answers[(topic, pd.index)] = {"count": len(got)}
            except KafkaError as e:
                ctx.metrics.count_error(e)
                answers[(topic, pd.index)] = {"error": e}
        if batches:
            queued.append((topic, batches))
    if staged:  # one worker-thread hop for the whole request
        failed = await asyncio.to_thread(_stage, ctx, tid, staged)
        for key, e in failed.items():
            ctx.metrics.count_error(e)
            answers[key] = {"error": e}
    # Unknown or fenced producer ids are refused before anything is queued.  A non-transactional id that passed
    # once on this connection stays valid (only transactional epochs move), so it is not read again.
    unchecked = {(b.producer_id, b.producer_epoch) for _, bs in queued for b in bs if b.idempotent} - conn.producers
    try:
        if unchecked:
            transactional = await asyncio.to_thread(lambda: {p: ctx.log.registry.check(*p) for p in unchecked})
            conn.producers.update(p for p, tx in transactional.items() if not tx)
    except KafkaError as e:  # an unknown or fenced producer id: nothing of the request is written
        ctx.metrics.count_error(e)
        for t, bs in queued:
            for b in bs:
                answers[(t, b.partition)] = {"error": e}
        queued = []
    async with rq.in_order():  # appends in request order: idempotent sequences depend on it
        futures = [(t, bs, ctx.accumulator.append(t, bs)) for t, bs in queued]
    if req.acks == 0:
        for _, _, f in futures:
            f.add_done_callback(lambda f: [ctx.metrics.count_error(r) for r in f.result() if isinstance(r, KafkaError)])
        return NO_RESPONSE
    for topic, bs, f in futures:
        try:
            results = await asyncio.wrap_future(f)
        except KafkaError as e:
            results = [e] * len(bs)
        for b, r in zip(bs, results):
            a = answers[(topic, b.partition)]
            if "error" in a:
                continue
            if isinstance(r, KafkaError):
                ctx.metrics.count_error(r)
                a["error"] = r
            elif "base_offset" not in a:
                a["base_offset"], a["log_append_time"] = r.base_offset, r.log_append_time
    responses: dict[str, list] = {}
    for (topic, partition), a in answers.items():
        e = a.get("error")
        responses.setdefault(topic, []).append({
            "index": partition, "error_code": e.code if e else 0, "base_offset": a.get("base_offset", -1),
            "log_append_time": a.get("log_append_time", -1), "log_start_offset": -1,
            "error_message": public_message(e.message) if e else None})
    return {"responses": [{"name": t, "partition_responses": ps} for t, ps in responses.items()]}
