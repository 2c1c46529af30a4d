"""Fetch (with long polls) and ListOffsets.

Fetch reads committed records only: the high watermark is the last commit, and
with no transactions the last stable offset equals it, so both isolation
levels read the same.  A fetch that finds fewer than ``min_bytes`` waits up to
``max_wait_ms`` and wakes when one of its topics commits
(:class:`~kafka_front.commit_waiter.CommitWaiter`).  Fetch sessions (KIP-227)
are not kept: every answer has session id 0, which tells clients to send full
fetches.

Byte limits are Kafka's (``KafkaApis.handleFetchRequest`` and
``ReplicaManager.readFromLog``):

* the response's limit is the request's ``max_bytes`` capped by the broker's ``fetch.max.bytes``
  (``FrontContext.fetch_max_bytes``, Kafka's default 55 MiB), whatever the request asks; ``min_bytes`` is
  capped by it too;
* a partition listed more than once is answered once, where it was first listed, with the offset and limit
  of its last listing (Kafka's ``FetchRequest.fetchData`` puts every listing into one ``LinkedHashMap``);
* partitions are read in request order, each up to ``min(partition_max_bytes, what is left of the
  response's limit)``; only until the first partition that returns data may a read exceed those limits
  (Kafka's ``minOneMessage``: ``readFromLog`` starts it as ``!hardMaxBytesLimit``, true for every version
  served here, as only Fetch v0-2 have a hard limit, and clears it once a read returns bytes), and then by
  one record alone, so that a record larger than the limits cannot stall a consumer.  Once the response's
  limit is spent, later partitions get their offsets and no records.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from lakelog.broker.authorizer import TOPIC
from lakelog.errors import KafkaError, TopicAuthorizationFailed
from lakelog.reader.log_reader import check_partition

from kafka_front.fetch_ahead import Chunk
from kafka_front.record_batch import HEADER_SIZE
from kafka_front.record_table import table_batches

if TYPE_CHECKING:
    from lakelog import Log

    from kafka_front.connection import Connection
    from kafka_front.context import FrontContext
    from kafka_front.request import Request

EARLIEST, LATEST, MAX_TIMESTAMP = -2, -1, -3
# What a v2 record adds to its key and value without headers: varints of its length, timestamp and offset
# deltas, key and value lengths, plus attributes and header count (7 to 21 bytes); the estimate is for small
# records written close together, whose varints take a byte or two.  The log reads about as many records as
# encode into the budget: an estimate too low reads records the cut to the budget drops, and the next read
# reads again (BENCHMARKS.md, kafka_checks).
RECORD_OVERHEAD = 12


def read_chunk(log: "Log", topic: str, partition: int, offset: int, max_bytes: int, min_one: bool = True) -> Chunk:
    """Records of a partition from ``offset``, encoded as record batches of at most ``max_bytes``; ``min_one``:
    the first record goes out even if it alone is larger.  Raises the fetch's KafkaError (OFFSET_OUT_OF_RANGE,
    UNKNOWN_TOPIC_OR_PARTITION, ...)."""
    res = log.fetch(topic, partition, offset, max_bytes=max(max_bytes - HEADER_SIZE, 1),
                    record_overhead=RECORD_OVERHEAD)
    data, done = (table_batches(res.records, max_bytes=max_bytes, min_one=min_one) if res.records.num_rows
                  else (b"", 0))
    if done == res.records.num_rows:
        nxt = res.next_offset
    else:
        nxt = res.records.column("offset")[done - 1].as_py() + 1 if done else offset
    return Chunk(data, nxt, res.high_watermark, res.log_start_offset)


def _read_ahead(ctx: "FrontContext", topic: str, partition: int, offset: int, max_bytes: int,
                min_one: bool) -> Chunk | None:
    """The chunk read ahead for this request, with the partition's current offsets, if there is one."""
    if ctx.fetch_ahead is None:
        return None
    snap = ctx.log.snapshot(topic)
    if not 0 <= partition < snap.partition_count:
        return None
    lso = snap.log_start_offset(partition)
    chunk = ctx.fetch_ahead.take(topic, partition, offset, max_bytes, lso, min_one=min_one)
    return None if chunk is None else dataclasses.replace(chunk, high_watermark=snap.high_watermark(partition),
                                                          log_start_offset=lso)


def _read(ctx: "FrontContext", wanted: dict[tuple[str, int], tuple[int, int]], max_bytes: int,
          denied: set[str]) -> tuple[list[dict], int]:
    """One pass over the fetch's partitions, with Kafka's limits (the module doc); blocking: runs in a worker
    thread.  ``wanted``: (topic, partition) -> (fetch offset, partition max bytes), in request order."""
    out, total, left, min_one = [], 0, max_bytes, True
    for (topic, partition), (offset, part_max) in wanted.items():
        entry = {"topic": topic, "partition_index": partition, "error_code": 0, "high_watermark": -1,
                 "last_stable_offset": -1, "log_start_offset": -1, "aborted_transactions": None,
                 "preferred_read_replica": -1, "records": b""}
        out.append(entry)
        if topic in denied:
            entry["error_code"] = TopicAuthorizationFailed.code
            continue
        budget = max(min(part_max, left), 0)
        try:
            if budget == 0 and not min_one:  # nothing may go out: this partition's offsets only
                res = ctx.log.fetch(topic, partition, offset, max_records=1)
                chunk = Chunk(b"", offset, res.high_watermark, res.log_start_offset)
            else:
                chunk = (_read_ahead(ctx, topic, partition, offset, budget, min_one)
                         or read_chunk(ctx.log, topic, partition, offset, budget, min_one))
                if ctx.fetch_ahead is not None and chunk.records:
                    ctx.fetch_ahead.read_ahead(topic, partition, chunk, max(budget, 1))
        except KafkaError as e:
            entry["error_code"] = e.code  # offsets stay -1, as Kafka's readFromLog answers an error (the client
            continue                       # resets through ListOffsets)
        entry["high_watermark"] = entry["last_stable_offset"] = chunk.high_watermark
        entry["log_start_offset"] = chunk.log_start_offset
        entry["records"] = chunk.records
        if chunk.records:
            min_one = False
            total += len(chunk.records)
            left = max(0, left - len(chunk.records))
    return out, total


def response_limit(ctx: "FrontContext", body) -> int:
    """The most record bytes a Fetch answers ``body`` with, but for one record past it (the module doc)."""
    return max(min(body.max_bytes, ctx.fetch_max_bytes), 0)


def _wanted(body) -> dict[tuple[str, int], tuple[int, int]]:
    """(topic, partition) -> (fetch offset, partition max bytes): a partition listed twice where it was first
    listed, with its last listing's values (Kafka's LinkedHashMap)."""
    wanted: dict[tuple[str, int], tuple[int, int]] = {}
    for t in body.topics:
        for p in t.partitions:
            wanted[(t.topic, p.partition)] = (p.fetch_offset, p.partition_max_bytes)
    return wanted


async def fetch(ctx: "FrontContext", conn: "Connection", rq: "Request") -> dict:
    req = rq.body
    wanted = _wanted(req)
    topics = {t for t, _ in wanted}
    denied = {t for t in topics if not ctx.authorizer.allowed(conn.principal, "Read", TOPIC, t)}
    deadline = time.monotonic() + req.max_wait.total_seconds()
    max_bytes = response_limit(ctx, req)
    min_bytes = max(min(req.min_bytes, max_bytes), 1)
    while True:
        entries, total = await asyncio.to_thread(_read, ctx, wanted, max_bytes, denied)
        errors = any(e["error_code"] for e in entries)
        remaining = deadline - time.monotonic()
        if total >= min_bytes or errors or remaining <= 0 or not wanted:
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
                if entry["offset"] < 0:  # no such record: Kafka answers no leader epoch either
                    entry["leader_epoch"] = -1
            except KafkaError as e:
                ctx.metrics.count_error(e)
                entry["error_code"] = e.code
            parts.append(entry)
        topics.append({"name": t.name, "partitions": parts})
    return {"topics": topics}
