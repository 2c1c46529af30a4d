"""Record batches <-> lakelog's Arrow tables: what Produce appends and what Fetch returns.

Produce: a decoded :class:`~kafka_front.record_batch.Batch` becomes a table of
the writer's input schema (key, value, headers, timestamp).  Fetch: stored
records (``FILE_SCHEMA``, offset order) become v2 batches, one per run of
records of one producer id, epoch and timestamp type -- so a consumer sees each
record's producer id, epoch and sequence as they were written.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from lakelog.errors import InvalidTimestamp
from lakelog.storage.record_schema import HEADER_TYPE, LOG_APPEND_TIME, TIMESTAMP_TYPE
from lakelog.writer.records import INPUT_SCHEMA, MAX_TIMESTAMP_MS

from kafka_front.record_batch import NO_TIMESTAMP, Batch, encode_batch


def batch_table(batch: Batch) -> pa.Table:
    """The batch's records in the writer's input schema; a record without a timestamp (-1) gets the append time."""
    stamps = batch.timestamps
    lo, hi = min(stamps), max(stamps)
    if lo < 0 and (lo != NO_TIMESTAMP or any(0 > s != NO_TIMESTAMP for s in stamps)) or hi > MAX_TIMESTAMP_MS:
        raise InvalidTimestamp(f"record timestamps must be between 0 and {MAX_TIMESTAMP_MS} epoch milliseconds "
                               f"(or -1 for none), got {lo}..{hi}")
    ms = pa.array(stamps, pa.int64())
    if lo == NO_TIMESTAMP:
        ms = pc.if_else(pc.equal(ms, NO_TIMESTAMP), pa.scalar(None, pa.int64()), ms)
    ts = pc.multiply(ms, 1000).cast(TIMESTAMP_TYPE)
    headers = batch.headers
    if any(h is not None for h in headers):
        header_col = pa.array([None if hs is None else [{"key": k, "value": v} for k, v in hs] for hs in headers],
                              HEADER_TYPE)
    else:
        header_col = pa.nulls(len(headers), HEADER_TYPE)
    return pa.table([pa.array(batch.keys, pa.binary()), pa.array(batch.values, pa.binary()), header_col, ts],
                    schema=INPUT_SCHEMA)


def table_batches(records: pa.Table, *, max_bytes: int | None = None) -> tuple[bytes, int]:
    """(batches, records encoded) for stored ``records``; stops before ``max_bytes`` once something is encoded
    (Kafka's rule: the first batch goes out whole, whatever the limit)."""
    n = records.num_rows
    if n == 0:
        return b"", 0
    offsets = records.column("offset").to_pylist()
    stamps = pc.divide(records.column("timestamp").cast(pa.int64()), 1000).to_pylist()
    types = records.column("timestampType").to_pylist()
    keys = records.column("key").to_pylist()
    values = records.column("value").to_pylist()
    hcol = records.column("headers")
    headers = None if hcol.null_count == n else \
        [None if hs is None else [(h["key"], h["value"]) for h in hs] for hs in hcol.to_pylist()]
    pids = records.column("producerId").to_pylist()
    epochs = records.column("producerEpoch").to_pylist()
    seqs = records.column("sequence").to_pylist()
    out, size, i = [], 0, 0
    while i < n:
        j = i + 1
        pid, epoch, ttype = pids[i], epochs[i], types[i]
        while j < n and pids[j] == pid and epochs[j] == epoch and types[j] == ttype and j - i < 10_000:
            j += 1
        base = offsets[i]
        data = encode_batch(base_offset=base, offset_deltas=[o - base for o in offsets[i:j]],
                            timestamps=stamps[i:j], keys=keys[i:j], values=values[i:j],
                            headers=headers[i:j] if headers is not None else None, producer_id=pid,
                            producer_epoch=epoch, base_sequence=seqs[i] if pid >= 0 else -1,
                            log_append_time=ttype == LOG_APPEND_TIME)
        if out and max_bytes is not None and size + len(data) > max_bytes:
            break
        out.append(data)
        size += len(data)
        i = j
    return b"".join(out), i
