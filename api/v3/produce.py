"""v3 produce: decoded records through the broker's produce pipeline, answered with one delivery report each.

The records of one call (a whole body, or what one read of a stream completed) are checked
per record -- partition exists, the topic's limits (``validate_records``) -- and the good ones
go to the accumulator as one request, partitioned by the pipeline's partitioner
(explicit ``partition_id`` → murmur2(key) → sticky).  Offsets in the reports are the
committed ones: a report is only made after the durable commit (acks=all).  Reports are made a
slice of records at a time as they are sent, so an answer of many records is never held whole.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakelog.broker.produce import ProducePipeline
from lakelog.errors import KafkaError, UnknownTopicOrPartition

from api.v3.records import Converted, RecordIn, convert, reports, run_reports

if TYPE_CHECKING:
    from lakelog.storage.topic_snapshot import TopicSnapshot



def _keep(c: Converted, bad: dict[int, KafkaError]) -> Converted:
    """``c`` without the good rows (by index into ``c.rows``) in ``bad``, which become errors."""
    if not bad:
        return c
    mask = pa.array([j not in bad for j in range(len(c.rows))])
    out = Converted(c.count, errors=dict(c.errors))
    for j, e in bad.items():
        out.errors[c.rows[j]] = e
    keep = [j for j in range(len(c.rows)) if j not in bad]
    out.rows = [c.rows[j] for j in keep]
    if keep:
        out.table = c.table.filter(mask)
        out.explicit = None if c.explicit is None else [c.explicit[j] for j in keep]
        out.key_types = c.key_types if not isinstance(c.key_types, list) else [c.key_types[j] for j in keep]
        out.value_types = c.value_types if not isinstance(c.value_types, list) else [c.value_types[j] for j in keep]
    return out


def _check(c: Converted, topic: str, snap: "TopicSnapshot") -> Converted:
    """Refuse, per record, a partition that does not exist or a record over the topic's limits."""
    bad: dict[int, KafkaError] = {}
    n = snap.partition_count
    if c.explicit is not None:
        for j, p in enumerate(c.explicit):
            if p is not None and p >= n:
                bad[j] = UnknownTopicOrPartition(f"partition {p} of topic {topic} does not exist "
                                                 f"(the topic has {n} partitions)")
    c = _keep(c, bad)
    if c.table is None or not c.rows:
        return c
    try:
        ProducePipeline.validate(snap, c.table, -1)
        return c
    except KafkaError:
        pass
    bad = {}
    for j in range(len(c.rows)):  # some record is over a limit: find which, one at a time
        try:
            ProducePipeline.validate(snap, c.table.slice(j, 1), -1)
        except KafkaError as e:
            bad[j] = e
    return _keep(c, bad)


@dataclass
class Submitted:
    """Records handed to the accumulator (``future``: their commit), or none of them (``future`` None)."""

    cluster_id: str
    topic: str
    converted: Converted
    batches: list = field(default_factory=list)
    parts: pa.Array | None = None
    future: "asyncio.Future | None" = None


async def submit(pipeline: ProducePipeline, cluster_id: str, topic: str,
                 records: list[RecordIn | KafkaError] | Converted) -> Submitted:
    """Check ``records`` (decoded, or already converted) per record and queue the good ones for the group commit.
    Calls in one order queue in that order (a stream's records keep their order per partition)."""
    converted = records if isinstance(records, Converted) else convert(records, int(time.time() * 1000))
    out = Submitted(cluster_id, topic, converted)
    if converted.table is not None:
        highest = -1 if converted.explicit is None else max((p or 0) for p in converted.explicit)
        try:  # a partition beyond the topic is that record's error (below), not the call's
            snap = await pipeline.snapshot_async(topic, highest)
        except UnknownTopicOrPartition:
            snap = await pipeline.snapshot_async(topic)
        out.converted = converted = _check(converted, topic, snap)
        if converted.table is not None and converted.rows:
            out.batches, out.parts = pipeline.partition_rows(topic, converted.table, converted.explicit,
                                                             snap.partition_count)
            out.future = asyncio.wrap_future(pipeline.append(topic, out.batches))
    return out


async def answer(pipeline: ProducePipeline, sub: Submitted) -> tuple[Iterator[bytes], KafkaError | None]:
    """Wait for the commit of submitted records; the reports (CRLF after each, made a slice of records at a
    time as the iterator is read) and, when the call held one record and it failed, that record's error (a
    single-record request answers with its status)."""
    converted, batches, parts = sub.converted, sub.batches, sub.parts
    failures: dict[int, KafkaError] = {}
    partitions = offsets = stamps = np.zeros(0, np.int64)
    if sub.future is not None:
        results = await sub.future
        r = results[0]
        if parts is None and not isinstance(r, KafkaError) and converted.stamp_ms is not None:
            chunks = run_reports(sub.cluster_id, sub.topic, converted, r.partition, r.base_offset,
                                 r.log_append_time if r.log_append_time >= 0 else converted.stamp_ms)
            if chunks is not None:
                return chunks, None
        n = len(converted.rows)
        partitions = np.full(n, batches[0].partition, np.int64) if parts is None else \
            parts.to_numpy(zero_copy_only=False).astype(np.int64)
        offsets = np.full(n, -1, np.int64)
        stamps = pc.divide(converted.table.column("timestamp").cast(pa.int64()), 1000).to_numpy()
        stamps = np.array(stamps, np.int64)
        for b, r in zip(batches, results):
            rows = np.arange(n) if parts is None else np.flatnonzero(partitions == b.partition)
            if isinstance(r, KafkaError):
                pipeline.metrics.count_error(r)
                for j in rows.tolist():
                    failures[j] = r
                continue
            offsets[rows] = r.base_offset + np.arange(len(rows))
            if r.log_append_time >= 0:
                stamps[rows] = r.log_append_time
    for e in converted.errors.values():
        pipeline.metrics.count_error(e)
    chunks = reports(sub.cluster_id, sub.topic, converted, partitions, offsets, stamps, failures)
    single_error = None
    if converted.count == 1:
        single_error = converted.errors.get(0) or (failures.get(0) if failures else None)
    return chunks, single_error


async def produce(pipeline: ProducePipeline, cluster_id: str, topic: str,
                  records: list[RecordIn | KafkaError] | Converted) -> tuple[Iterator[bytes], KafkaError | None]:
    """:func:`submit` then :func:`answer`."""
    return await answer(pipeline, await submit(pipeline, cluster_id, topic, records))
