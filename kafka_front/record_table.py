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

from kafka_front.record_batch import NO_TIMESTAMP, Batch, encode_batch, encode_columns_within


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


def table_batches(records: pa.Table, *, max_bytes: int | None = None, min_one: bool = True) -> tuple[bytes, int]:
    """(batches, records encoded) for stored ``records``, at most ``max_bytes`` long.  ``min_one``: if even the
    first record does not fit, it goes out alone in a batch of its own, whatever its size (Kafka's
    ``minOneMessage``, so that a large record cannot stall a consumer); otherwise nothing does.

    Batch boundaries are lakelog's to choose (records are stored, not batches): one batch per run of records
    of one producer id, epoch and timestamp type, so a consumer sees each record's producer id, epoch and
    sequence as written, and a run that does not fit whole is cut after the last record that does.  Runs
    without headers are encoded column-wise (:func:`~kafka_front.record_batch.encode_columns`), others record
    by record."""
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
    limit = 2**63 if max_bytes is None else max_bytes
    out, size, done = [], 0, 0
    for i, j in zip(bounds[:-1], bounds[1:]):
        pid, epoch = int(pids[i]), int(epochs[i])
        common = dict(base_offset=int(offsets[i]), producer_id=pid, producer_epoch=epoch,
                      base_sequence=int(seqs[i]) if pid >= 0 else -1, log_append_time=int(types[i]) == LOG_APPEND_TIME)
        plain = hcol.slice(i, j - i).null_count == j - i

        def encode(k: int, room: int | None = None) -> tuple[bytes, int]:
            """The run's longest prefix of at most k records that fits ``room`` (None: all k), as one batch."""
            if plain:
                return encode_columns_within(room, offsets=offsets[i:i + k], timestamps=stamps[i:i + k],
                                             keys=keys.slice(i, k), values=values.slice(i, k), **common)
            data = encode_batch(offset_deltas=(offsets[i:i + k] - offsets[i]).tolist(),
                                timestamps=stamps[i:i + k].tolist(), keys=keys.slice(i, k).to_pylist(),
                                values=values.slice(i, k).to_pylist(),
                                headers=[None if h is None else [(x["key"], x["value"]) for x in h]
                                         for h in hcol.slice(i, k).to_pylist()], **common)
            if room is None or len(data) <= room:
                return data, k
            return _bisect(encode, k, room)

        data, k = encode(j - i, limit - size)
        if not k:
            if out or not min_one:
                break
            data, k = encode(1)  # the first record, alone and whole, past the limits
        out.append(data)
        size += len(data)
        done = i + k
        if k < j - i:
            break
    return b"".join(out), done


def _bisect(encode, n: int, room: int) -> tuple[bytes, int]:
    """The longest prefix of a run's ``n`` records (with headers) whose batch fits ``room``; the whole run does
    not."""
    best: tuple[bytes, int] = (b"", 0)
    lo, hi = 1, n - 1
    while lo <= hi:
        mid = (lo + hi) // 2
        data, _ = encode(mid)
        if len(data) <= room:
            best, lo = (data, mid), mid + 1
        else:
            hi = mid - 1
    return best
