"""Record batches <-> lakelog's Arrow tables: what Produce appends and what Fetch returns.

Produce: a decoded :class:`~kafka_front.record_batch.Batch` becomes a table of
the writer's input schema (key, value, headers, timestamp).  Fetch: stored
records (``FILE_SCHEMA``, offset order) become v2 batches, one per run of
records of one producer id, epoch and timestamp type -- so a consumer sees each
record's producer id, epoch and sequence as they were written.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from lakelog.errors import InvalidTimestamp
from lakelog.storage.record_schema import HEADER_TYPE, LOG_APPEND_TIME, TIMESTAMP_TYPE
from lakelog.writer.records import INPUT_SCHEMA, MAX_TIMESTAMP_MS

from kafka_front.record_batch import NO_TIMESTAMP, Batch, encode_batch, encode_columns


def batch_table(batch: Batch) -> pa.Table:
    """The batch's records in the writer's input schema; a record without a timestamp (-1) gets the append time."""
    stamps = batch.timestamps
    lo, hi = int(stamps.min()), int(stamps.max())
    missing = stamps == NO_TIMESTAMP
    if lo < 0 and (stamps[~missing] < 0).any() or hi > MAX_TIMESTAMP_MS:
        raise InvalidTimestamp(f"record timestamps must be between 0 and {MAX_TIMESTAMP_MS} epoch milliseconds "
                               f"(or -1 for none), got {lo}..{hi}")
    ts = pa.array(stamps * 1000, TIMESTAMP_TYPE, mask=missing if lo == NO_TIMESTAMP else None)
    header_col = batch.headers if batch.headers is not None else pa.nulls(len(batch), HEADER_TYPE)
    return pa.table([batch.keys, batch.values, header_col, ts], schema=INPUT_SCHEMA)


def table_batches(records: pa.Table, *, max_bytes: int | None = None) -> tuple[bytes, int]:
    """(batches, records encoded) for stored ``records``; stops before ``max_bytes`` once something is encoded
    (Kafka's rule: the first batch goes out whole, whatever the limit).  Runs without headers are encoded
    column-wise (:func:`~kafka_front.record_batch.encode_columns`), others record by record."""
    n = records.num_rows
    if n == 0:
        return b"", 0
    records = records.combine_chunks()
    offsets = records.column("offset").to_numpy()
    stamps = records.column("timestamp").cast(pa.int64()).to_numpy() // 1000
    types = records.column("timestampType").to_numpy()
    pids = records.column("producerId").to_numpy()
    epochs = records.column("producerEpoch").to_numpy()
    seqs = records.column("sequence").to_numpy()
    keys, values, hcol = (records.column(c).chunk(0) for c in ("key", "value", "headers"))
    change = np.flatnonzero((pids[1:] != pids[:-1]) | (epochs[1:] != epochs[:-1]) | (types[1:] != types[:-1])) + 1
    bounds = [0, *change.tolist(), n]
    out, size, done = [], 0, 0
    for i, j in zip(bounds[:-1], bounds[1:]):
        pid, epoch = int(pids[i]), int(epochs[i])
        common = dict(producer_id=pid, producer_epoch=epoch, base_sequence=int(seqs[i]) if pid >= 0 else -1,
                      log_append_time=int(types[i]) == LOG_APPEND_TIME)
        base = int(offsets[i])
        hs = hcol.slice(i, j - i)
        if hs.null_count == len(hs):
            data = encode_columns(base_offset=base, offsets=offsets[i:j], timestamps=stamps[i:j],
                                  keys=keys.slice(i, j - i), values=values.slice(i, j - i), **common)
        else:
            data = encode_batch(base_offset=base, offset_deltas=(offsets[i:j] - base).tolist(),
                                timestamps=stamps[i:j].tolist(), keys=keys.slice(i, j - i).to_pylist(),
                                values=values.slice(i, j - i).to_pylist(),
                                headers=[None if h is None else [(x["key"], x["value"]) for x in h]
                                         for h in hs.to_pylist()], **common)
        if out and max_bytes is not None and size + len(data) > max_bytes:
            break
        out.append(data)
        size += len(data)
        done = j
    return b"".join(out), done
