"""Produce and InitProducerId: record batches decoded, then the broker's produce pipeline
(``lakelog.broker.produce``: the same stages, accumulator, producer state, sequence checks and errors as the
HTTP front).

Per partition: every batch is split, CRC-checked and decoded before anything is
queued, so a partition with one bad batch writes nothing; other partitions of
the request are unaffected, as in Kafka.  What the records of one request decode
to is bounded as a whole (:class:`_DecodeBudget`: the listener's frame limit,
all batches of all partitions together), not per batch.  Idempotent batches
keep their producer id, epoch and base sequence; the committer checks them
atomically with the commit.  acks=1 and acks=-1 both answer after the commit
(storage is the only replica); acks=0 answers nothing.  A transactional produce
(the request names a transactional id) is staged with the transaction
coordinator instead of appended: it answers offset -1, and its records get
offsets when EndTxn commits.  Every failure is a partition's error code (a
ProduceResponse has no top-level one): a storage failure is
``KAFKA_STORAGE_ERROR`` (no path in its message), a full ``buffer.memory``
``THROTTLING_QUOTA_EXCEEDED`` for the partitions of the topic refused (nothing
of that topic is queued).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from lakelog.broker.authorizer import CLUSTER, TRANSACTIONAL_ID
from lakelog.broker.error_mapping import unexpected_error
from lakelog.broker.produce import ProducePipeline
from lakelog.broker.public_message import public_message
from lakelog.errors import CorruptRecord, InvalidRequest, InvalidRequiredAcks, KafkaError
from lakelog.writer.records import PartitionBatch

from kafka_front.compression import DecodeLimitExceeded
from kafka_front.entry_error import entry_error
from kafka_front.record_batch import decode_batch, split_batches
from kafka_front.record_table import batch_table
from kafka_front.request import NO_RESPONSE

if TYPE_CHECKING:
    from lakelog.storage.topic_snapshot import TopicSnapshot

    from kafka_front.connection import Connection
    from kafka_front.context import FrontContext
    from kafka_front.request import Request

# A request's records decode on the event loop if they are this small on the wire and decode to at most
# INLINE_DECODED_BYTES (a few ms of work, less than a thread hop per request costs the Kafka path: BENCHMARKS.md,
# "Kafka protocol"); a request that turns out larger is decoded again, from the start, in one worker-thread hop.
INLINE_DECODE_BYTES = 256 << 10
INLINE_DECODED_BYTES = 2 << 20


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


class _DecodeBudget:
    """What the records of one Produce request may decode to, every batch of every partition together: the
    listener's frame limit (``max_request_bytes``), the bound a single batch had -- so a request of many small,
    well-compressed batches holds no more decoded records than one frame's worth.  Bytes are charged as they are
    decoded, kept or not (a partition failing on a later batch does not give them back), so the work is bounded
    too.  Once a batch would exceed what is left, the budget is spent: that partition and the request's later
    ones fail, and nothing of them is written.

    The error is ``CORRUPT_MESSAGE`` (2), as for a single batch decompressing past the limit
    (docs/kafka-clients.md, ``decompression-bomb``): Kafka has no bound on decoded size to copy, and answers
    records it will not take in (InvalidRecordException) with CORRUPT_MESSAGE; its RECORD_LIST_TOO_LARGE means a
    batch larger than a log segment and MESSAGE_TOO_LARGE one over ``max.message.bytes`` (the topic's own limit,
    checked separately), neither of which is what was refused here."""

    def __init__(self, total: int) -> None:
        self.total = self.left = total
        self.spent = False

    def exceeded(self) -> CorruptRecord:
        return CorruptRecord(f"the records of this Produce request decode to more than {self.total} bytes, all of "
                             f"its batches together (the listener's max_request_bytes); nothing was written for "
                             f"this partition")


def _decode_partition(records: bytes, partition: int, snap: "TopicSnapshot", budget: _DecodeBudget,
                      transactional: bool = False) -> list[PartitionBatch]:
    """The partition's batches, decoded and validated, charged to the request's ``budget``; ``transactional``:
    the request's transactional id was set, and every batch must say so (with its producer id), as Kafka's
    broker requires."""
    out = []
    for raw in split_batches(records):
        if budget.spent:
            raise budget.exceeded()
        try:
            batch = decode_batch(raw, max_decompressed_bytes=budget.left)
        except DecodeLimitExceeded:
            budget.left, budget.spent = 0, True
            raise budget.exceeded() from None
        budget.left -= batch.records_bytes
        if batch.control:
            raise InvalidRequest("a producer cannot write control batches")
        if batch.transactional != transactional or (transactional and batch.producer_id < 0):
            raise InvalidRequest("transactional batches need the request's transactional_id, and a request with "
                                 "a transactional_id only transactional batches with a producer id")
        if not len(batch):
            continue
        table = batch_table(batch)
        ProducePipeline.validate(snap, table, partition)
        out.append(PartitionBatch(partition, table, batch.producer_id, batch.producer_epoch, batch.base_sequence))
    if not out:
        raise InvalidRequest(f"no records for partition {partition} of {snap.topic}")
    return out


def _decode_all(todo: list, budget: _DecodeBudget, transactional: bool) -> list:
    """Each ``(topic, partition, snapshot, records)`` of ``todo`` decoded in request order, one budget for all:
    ``(topic, partition, its batches or the KafkaError that refused them)``."""
    out = []
    for topic, partition, snap, records in todo:
        try:
            got = _decode_partition(records, partition, snap, budget, transactional)
        except KafkaError as e:
            got = e
        except Exception as e:  # a decoder bug must not cost the request its answers (no top-level error code)
            got = unexpected_error(e, "Kafka Produce", f"{topic}-{partition} (decoding)")
        out.append((topic, partition, got))
    return out


def _decode_inline(todo: list, total: int, transactional: bool) -> list | None:
    """The request decoded on the event loop (:func:`_decode_all`) if its records are at most
    ``INLINE_DECODE_BYTES`` on the wire and decode to at most ``INLINE_DECODED_BYTES``; else None, having done
    at most that much work (a compressed batch is never decompressed past the smaller budget)."""
    if sum(len(records) for *_, records in todo) > INLINE_DECODE_BYTES:
        return None
    small = _DecodeBudget(min(total, INLINE_DECODED_BYTES))
    decoded = _decode_all(todo, small, transactional)
    return None if small.spent and small.total < total else decoded


def _stage(ctx: "FrontContext", tid: str, staged: list) -> dict[tuple[str, int], Exception]:
    """Stage a transactional request's batches with the coordinator; the partitions that failed, with why (a
    KafkaError, or what the store raised)."""
    failed: dict[tuple[str, int], Exception] = {}
    for topic, partition, batches in staged:
        try:
            ctx.produce.stage(tid, topic, batches)
        except Exception as e:
            failed[(topic, partition)] = e
    return failed


async def produce(ctx: "FrontContext", conn: "Connection", rq: "Request"):
    req = rq.body
    pipeline = ctx.produce
    answers: dict[tuple[str, int], dict] = {}  # in request order: a partition's entry is made when it is met
    todo: list[tuple[str, int, "TopicSnapshot", bytes]] = []  # the partitions that passed the checks, to decode
    staged: list[tuple[str, int, list[PartitionBatch]]] = []  # a transactional request's batches, per partition
    starts: dict[tuple[str, int], int] = {}  # each existing partition's log start offset, answered as Kafka does
    tid = req.transactional_id
    fail: KafkaError | None = None
    try:
        if tid is not None:
            pipeline.authorize_transactional(conn.principal, tid)
        if req.acks not in (0, 1, -1):
            raise InvalidRequiredAcks(f"acks must be 0, 1 or -1, got {req.acks}")
    except KafkaError as e:
        fail = e
    for td in req.topic_data:
        topic = td.name
        for pd in td.partition_data:
            answers[(topic, pd.index)] = {}
            try:
                if fail is not None:
                    raise fail
                pipeline.admit(conn.principal, topic)
                snap = await pipeline.snapshot_async(topic, pd.index)
                starts[(topic, pd.index)] = snap.log_start_offset(pd.index)
                todo.append((topic, pd.index, snap, pd.records or b""))
            except Exception as e:  # a KafkaError, or the store failed reading the topic's metadata
                error = entry_error(ctx, e, "Produce", f"{topic}-{pd.index} (metadata)")
                answers[(topic, pd.index)] = {"error": error}
    decoded = _decode_inline(todo, ctx.max_frame_bytes, tid is not None)
    if decoded is None:  # one budget for the whole request
        decoded = await asyncio.to_thread(_decode_all, todo, _DecodeBudget(ctx.max_frame_bytes), tid is not None)
    queued: dict[str, list[PartitionBatch]] = {}
    for topic, partition, got in decoded:
        if isinstance(got, KafkaError):
            ctx.metrics.count_error(got)
            answers[(topic, partition)] = {"error": got}
        elif tid is not None:  # held by the coordinator until EndTxn: no offset yet (docs/kafka-clients.md)
            staged.append((topic, partition, got))
            answers[(topic, partition)] = {"count": len(got), "base_offset": -1}
        else:
            queued.setdefault(topic, []).extend(got)
            answers[(topic, partition)] = {"count": len(got)}
    if staged:  # one worker-thread hop for the whole request
        failed = await asyncio.to_thread(_stage, ctx, tid, staged)
        for (topic, partition), e in failed.items():
            answers[(topic, partition)] = {"error": entry_error(ctx, e, "Produce", f"{topic}-{partition} (staging)")}
    # Unknown or fenced producer ids are refused before anything is queued.  A non-transactional id that passed
    # once on this connection stays valid (only transactional epochs move), so it is not read again.
    unchecked = {(b.producer_id, b.producer_epoch) for bs in queued.values() for b in bs if b.idempotent}
    unchecked -= conn.producers
    try:
        if unchecked:
            batches = [b for bs in queued.values() for b in bs]
            transactional = await asyncio.to_thread(pipeline.check_producers, batches, frozenset(conn.producers))
            conn.producers.update(p for p, tx in transactional.items() if not tx)
    except Exception as e:  # an unknown or fenced producer id, or the store failed: nothing of the request is written
        err = entry_error(ctx, e, "Produce", "(producer ids)")
        for topic, bs in queued.items():
            for b in bs:
                answers[(topic, b.partition)] = {"error": err}
        queued = {}
    futures = []
    async with rq.in_order():  # appends in request order: idempotent sequences depend on it
        for topic, bs in queued.items():
            try:  # buffer.memory full, or the accumulator closed: this topic's batches are not queued
                futures.append((topic, bs, pipeline.append(topic, bs)))
            except KafkaError as e:
                ctx.metrics.count_error(e)
                for b in bs:
                    answers[(topic, b.partition)] = {"error": e}
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
            "log_append_time": a.get("log_append_time", -1), "log_start_offset": starts.get((topic, partition), -1),
            "error_message": public_message(e.message) if e else None})
    return {"responses": [{"name": t, "partition_responses": ps} for t, ps in responses.items()]}
