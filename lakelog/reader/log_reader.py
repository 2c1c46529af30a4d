"""Fetching records and resolving offsets against a :class:`TopicSnapshot`.

Only committed data is ever read: the snapshot's high watermark bounds every
fetch.  ``OFFSET_OUT_OF_RANGE`` is raised below the log start offset and above
the high watermark, as a Kafka broker does.  Stateless and thread-safe.

On an object store a fetch reads ahead: up to :data:`READ_AHEAD` segments are
requested at once (while their stored sizes fit the fetch's ``max_bytes``), so
a fetch spanning many small segments costs about one round trip, not one each.
"""

from __future__ import annotations

import functools
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Iterator

import pyarrow as pa
import pyarrow.compute as pc

from lakelog.errors import InvalidRequest, OffsetOutOfRange, UnknownTopicOrPartition
from lakelog.reader.segment_reader import read_segment
from lakelog.storage.record_schema import FILE_SCHEMA
from lakelog.storage.storage_root import StorageRoot
from lakelog.storage.topic_snapshot import TopicSnapshot

EARLIEST = -2
LATEST = -1
READ_AHEAD = 8  # segment reads in flight per fetch on an object store


@dataclass
class FetchResult:
    """Records of one partition from ``offset`` on, with the partition's offsets at fetch time."""

    partition: int
    records: pa.Table  # FILE_SCHEMA columns, offset order
    high_watermark: int
    log_start_offset: int
    next_offset: int


def check_partition(snap: TopicSnapshot, partition: int) -> None:
    if not isinstance(partition, int) or not 0 <= partition < snap.partition_count:
        raise UnknownTopicOrPartition(
            f"partition {partition} of topic {snap.topic} does not exist (the topic has {snap.partition_count})")


def fetch(root: StorageRoot, snap: TopicSnapshot, partition: int, offset: int, *, max_records: int | None = None,
          max_bytes: int | None = None, record_overhead: int = 0) -> FetchResult:
    """Records with offset >= ``offset`` (at least one if any, like Kafka, even past ``max_bytes``).  A record
    counts against ``max_bytes`` as its key and value plus ``record_overhead`` (what its caller's encoding adds
    per record)."""
    check_partition(snap, partition)
    hw, lso = snap.high_watermark(partition), snap.log_start_offset(partition)
    if offset < lso or offset > hw:
        raise OffsetOutOfRange(f"offset {offset} of topic {snap.topic} partition {partition} is out of range "
                               f"[log start offset {lso}, high watermark {hw}]")
    if max_records is not None and max_records < 1 or max_bytes is not None and max_bytes < 1:
        raise InvalidRequest("max_records and max_bytes must be positive")
    tables, count, size = [], 0, 0
    for t in _segment_tables(root, snap, partition, offset, hw, max_bytes):
        if max_records is not None and count + t.num_rows > max_records:
            t = t.slice(0, max_records - count)
        if max_bytes is not None and t.num_rows:
            sizes = pc.add(pc.add(pc.fill_null(pc.binary_length(t.column("key")), 0),
                                  pc.fill_null(pc.binary_length(t.column("value")), 0)), record_overhead)
            cum = pc.cumulative_sum(sizes).to_pylist()
            keep = sum(1 for c in cum if size + c <= max_bytes)
            if keep == 0 and count == 0:
                keep = 1
            if keep < t.num_rows:
                t = t.slice(0, keep)
                tables.append(t)
                count += t.num_rows
                break
            size += cum[-1] if cum else 0
        tables.append(t)
        count += t.num_rows
        if max_records is not None and count >= max_records:
            break
    records = pa.concat_tables(tables) if tables else FILE_SCHEMA.empty_table()
    next_offset = records.column("offset")[-1].as_py() + 1 if records.num_rows else max(offset, min(hw, offset))
    if not records.num_rows and offset < hw:
        next_offset = hw  # only gaps (compacted away) between offset and the high watermark
    return FetchResult(partition, records, hw, lso, next_offset)


def _segment_tables(root: StorageRoot, snap: TopicSnapshot, partition: int, offset: int, hw: int,
                    max_bytes: int | None) -> Iterator[pa.Table]:
    """The records of each segment from ``offset`` up to ``hw``, in order; read ahead on object stores."""
    segments = (seg for seg in snap.index.segments_from(partition, offset) if seg.base_offset < hw)
    if root.is_local:
        for seg in segments:
            yield read_segment(root, snap.topic, seg, start=offset, end=hw)
        return
    pending, budget = [], max_bytes if max_bytes is not None else 2**63
    try:
        for seg in segments:
            if pending and (len(pending) >= READ_AHEAD or budget <= 0):
                yield pending.pop(0).result()
            pending.append(readers().submit(read_segment, root, snap.topic, seg, start=offset, end=hw))
            budget -= seg.bytes
        while pending:
            yield pending.pop(0).result()
    finally:  # the caller stopped early: reads not started are dropped
        for f in pending:
            f.cancel()


@functools.cache
def readers() -> ThreadPoolExecutor:
    """The threads that read segments ahead from an object store (shared by all fetches)."""
    return ThreadPoolExecutor(max_workers=32, thread_name_prefix="lakelog-read")


def offset_for_timestamp(root: StorageRoot, snap: TopicSnapshot, partition: int, ts_ms: int) -> int | None:
    """First offset whose timestamp >= ``ts_ms`` (Kafka's offsetsForTimes); None if there is none."""
    check_partition(snap, partition)
    lso = snap.log_start_offset(partition)
    segs = snap.index.segments(partition)
    ts_us = ts_ms * 1000
    i = snap.index.first_segment_with_max_timestamp_at_least(partition, ts_us)
    for seg in segs[i:]:
        t = read_segment(root, snap.topic, seg, start=lso, columns=["offset", "timestamp"])
        if not t.num_rows:
            continue
        hits = pc.greater_equal(t.column("timestamp").cast(pa.int64()), ts_us)
        idx = pc.index(hits, True).as_py()
        if idx >= 0:
            return t.column("offset")[idx].as_py()
    return None


def resolve_offset(root: StorageRoot, snap: TopicSnapshot, partition: int, spec: int | str) -> int:
    """``earliest``/-2, ``latest``/-1, or a timestamp (epoch ms, as an int >= 0 with ``ts:`` prefix or str).

    A timestamp with no record at or after it resolves to the high watermark (Kafka answers -1; callers that
    need that distinction use :func:`offset_for_timestamp`).
    """
    check_partition(snap, partition)
    if spec in ("earliest", EARLIEST):
        return snap.log_start_offset(partition)
    if spec in ("latest", LATEST):
        return snap.high_watermark(partition)
    try:
        ts = int(spec)
    except (TypeError, ValueError):
        raise InvalidRequest(f"offset spec must be earliest, latest or epoch milliseconds, got {spec!r}") from None
    if ts < 0:
        raise InvalidRequest(f"timestamp must be >= 0, got {ts}")
    found = offset_for_timestamp(root, snap, partition, ts)
    return snap.high_watermark(partition) if found is None else found
