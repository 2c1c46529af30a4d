"""Fetch (with long polls) and ListOffsets.

Fetch reads committed records only: the high watermark is the last commit, and
with no transactions the last stable offset equals it, so both isolation
levels read the same.  A fetch that finds fewer than ``min_bytes`` waits up to
``max_wait_ms`` and wakes when one of its topics commits
(:class:`~kafka_front.commit_waiter.CommitWaiter`).  Limits: ``max_bytes`` for
the response and ``partition_max_bytes`` per partition, except that the first
batch found always goes out whole (Kafka's rule, so a large record cannot stall
a consumer).  Fetch sessions (KIP-227) are not kept: every answer has session
id 0, which tells clients to send full fetches.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from lakelog.errors import KafkaError, TopicAuthorizationFailed
from lakelog.reader.log_reader import check_partition

from api.auth import TOPIC

from kafka_front.fetch_ahead import Chunk
from kafka_front.record_table import table_batches

if TYPE_CHECKING:
    from lakelog import Log

    from kafka_front.connection import Connection
    from kafka_front.context import FrontContext
    from kafka_front.request import Request

EARLIEST, LATEST, MAX_TIMESTAMP = -2, -1, -3


def read_chunk(log: "Log", topic: str, partition: int, offset: int, max_bytes: int) -> Chunk:
    """Records of a partition from ``offset``, encoded as record batches of at most ``max_bytes`` (but at least
    the first batch); raises the fetch's KafkaError (OFFSET_OUT_OF_RANGE, UNKNOWN_TOPIC_OR_PARTITION, ...)."""
    res = log.fetch(topic, partition, offset, max_bytes=max(max_bytes, 1))
    data, done = table_batches(res.records, max_bytes=max_bytes) if res.records.num_rows else (b"", 0)
    if done == res.records.num_rows:
        nxt = res.next_offset
    else:
        nxt = res.records.column("offset")[done - 1].as_py() + 1 if done else offset
    return Chunk(data, nxt, res.high_watermark, res.log_start_offset)


def _read_ahead(ctx: "FrontContext", topic: str, partition: int, offset: int, max_bytes: int) -> Chunk | None:
    """The chunk read ahead for this request, with the partition's current offsets, if there is one."""
    if ctx.fetch_ahead is None:
        return None
    snap = ctx.log.snapshot(topic)
    if not 0 <= partition < snap.partition_count:
        return None
    lso = snap.log_start_offset(partition)
    chunk = ctx.fetch_ahead.take(topic, partition, offset, max_bytes, lso)
    return None if chunk is None else dataclasses.replace(chunk, high_watermark=snap.high_watermark(partition),
                                                          log_start_offset=lso)


def _read(ctx: "FrontContext", wanted: list[tuple], max_bytes: int, denied: set[str]) -> tuple[list[dict], int]:
    """One pass over the fetch's partitions (blocking: runs in a worker thread)."""
    out, total = [], 0
    for topic, partition, offset, part_max in wanted:
        entry = {"topic": topic, "partition_index": partition, "error_code": 0, "high_watermark": -1,
                 "last_stable_offset": -1, "log_start_offset": -1, "aborted_transactions": None,
                 "preferred_read_replica": -1, "records": b""}
        out.append(entry)
        if topic in denied:
            entry["error_code"] = TopicAuthorizationFailed.code
            continue
        budget = max(min(part_max, max_bytes - total), 1)  # the first batch goes whole even past it
        try:
            if total >= max_bytes:  # the answer is full: this partition's offsets only
                res = ctx.log.fetch(topic, partition, offset, max_records=1)
                chunk = Chunk(b"", offset, res.high_watermark, res.log_start_offset)
            else:
                chunk = (_read_ahead(ctx, topic, partition, offset, budget)
                         or read_chunk(ctx.log, topic, partition, offset, budget))
                if ctx.fetch_ahead is not None:
                    ctx.fetch_ahead.read_ahead(topic, partition, chunk, budget)
        except KafkaError as e:
            entry["error_code"] = e.code
            if e.code == 1:  # OFFSET_OUT_OF_RANGE: the client resets from these
                snap = ctx.log.snapshot(topic)
                entry["high_watermark"] = entry["last_stable_offset"] = snap.high_watermark(partition)
                entry["log_start_offset"] = snap.log_start_offset(partition)
            continue
        entry["high_watermark"] = entry["last_stable_offset"] = chunk.high_watermark
        entry["log_start_offset"] = chunk.log_start_offset
        entry["records"] = chunk.records
        total += len(chunk.records)
    return out, total


async def fetch(ctx: "FrontContext", conn: "Connection", rq: "Request") -> dict:
    req = rq.body
    wanted = [(t.topic, p.partition, p.fetch_offset, p.partition_max_bytes) for t in req.topics for p in t.partitions]
    topics = {w[0] for w in wanted}
    denied = {t for t in topics if not ctx.authorizer.allowed(conn.principal, "Read", TOPIC, t)}
    deadline = time.monotonic() + req.max_wait.total_seconds()
    max_bytes = max(req.max_bytes, 1)
    while True:
        entries, total = await asyncio.to_thread(_read, ctx, wanted, max_bytes, denied)
        errors = any(e["error_code"] for e in entries)
        remaining = deadline - time.monotonic()
        if total >= max(req.min_bytes, 1) or errors or remaining <= 0 or not wanted:
            break
        await ctx.waiter.wait(topics, remaining)
    responses: dict[str, list] = {}
    for e in entries:
        responses.setdefault(e.pop("topic"), []).append(e)
    return {"error_code": 0, "session_id": 0,
            "responses": [{"topic": t, "partitions": ps} for t, ps in responses.items()]}


def _list_offset(ctx: "FrontContext", topic: str, partition: int, spec: int) -> tuple[int, int]:
    """(timestamp, offset) Kafka answers for ``spec``: -2 earliest, -1 latest, -3 max timestamp, else the first
    offset at or after a timestamp (-1, -1 if none)."""
    snap = ctx.log.snapshot(topic)
    check_partition(snap, partition)
    if spec == EARLIEST:
        return -1, snap.log_start_offset(partition)
    if spec == LATEST:
        return -1, snap.high_watermark(partition)
    if spec == MAX_TIMESTAMP:
        # The largest timestamp among records still in the log (not below the log start offset): segments
        # in decreasing order of their max timestamp, until one cannot beat what was found.
        start, best = snap.log_start_offset(partition), (-1, -1)
        for seg in sorted(ctx.log.segments(topic, partition), key=lambda s: -s.max_timestamp):
            if seg.last_offset < start:
                continue
            if best[1] >= 0 and seg.max_timestamp // 1000 <= best[0]:
                break
            t = ctx.log.read(topic, partition, max(seg.base_offset, start), seg.last_offset + 1)
            if not t.num_rows:
                continue
            stamps = t.column("timestamp").cast(pa.int64())
            i = pc.index(stamps, pc.max(stamps)).as_py()
            found = (stamps[i].as_py() // 1000, t.column("offset")[i].as_py())
            if best[1] < 0 or found[0] > best[0]:  # ties: the earlier segment's (smaller) offset is kept
                best = found
        return best
    found = ctx.log.offsets_for_times(topic, {partition: spec})[partition]
    if found is None:
        return -1, -1
    rec = ctx.log.fetch(topic, partition, found, max_records=1).records
    return rec.column("timestamp").cast(pa.int64())[0].as_py() // 1000, found


async def list_offsets(ctx: "FrontContext", conn: "Connection", rq: "Request") -> dict:
    topics = []
    for t in rq.body.topics:
        allowed = ctx.authorizer.allowed(conn.principal, "Describe", TOPIC, t.name)
        parts = []
        for p in t.partitions:
            entry = {"partition_index": p.partition_index, "error_code": 0, "timestamp": -1, "offset": -1,
                     "leader_epoch": 0}
            try:
                if not allowed:
                    raise TopicAuthorizationFailed(f"not authorized to Describe topic {t.name!r}")
                entry["timestamp"], entry["offset"] = await asyncio.to_thread(
                    _list_offset, ctx, t.name, p.partition_index, p.timestamp)
            except KafkaError as e:
                ctx.metrics.count_error(e)
                entry["error_code"] = e.code
            parts.append(entry)
        topics.append({"name": t.name, "partitions": parts})
    return {"topics": topics}
