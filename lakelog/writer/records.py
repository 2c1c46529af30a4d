"""Producer input: normalised into Arrow record batches and validated, one partition's batch
(:class:`PartitionBatch`), and where it landed (:class:`AppendResult`).

Input is an Arrow table (or a list of dicts) with ``key`` and ``value``
(binary or string), optional ``headers`` (list of {key: str, value: binary}) and
optional ``timestamp`` (epoch milliseconds, or an Arrow timestamp).  Output is
always a table of :data:`INPUT_SCHEMA`.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field
from typing import Iterable, Mapping

import pyarrow as pa
import pyarrow.compute as pc

from lakelog.errors import InvalidRecord, InvalidRequest, InvalidTimestamp, MessageTooLarge
from lakelog.storage.record_fields import as_bytes
from lakelog.storage.record_schema import HEADER_TYPE, TIMESTAMP_TYPE
from lakelog.storage.topic_config import (MAX_MESSAGE_BYTES, MESSAGE_TIMESTAMP_AFTER_MAX_MS,
                                  MESSAGE_TIMESTAMP_BEFORE_MAX_MS, TopicConfig)

INPUT_SCHEMA = pa.schema(
    [("key", pa.binary()), ("value", pa.binary()), ("headers", HEADER_TYPE), ("timestamp", TIMESTAMP_TYPE)]
)
MAX_TIMESTAMP_MS = 253402300799999  # 9999-12-31T23:59:59.999Z


@dataclass
class PartitionBatch:
    """Records for one partition, optionally from an idempotent producer."""

    partition: int
    records: pa.Table  # INPUT_SCHEMA (other accepted input is normalised on creation)
    producer_id: int = -1
    producer_epoch: int = -1
    base_sequence: int = -1
    # A committing transaction's records: (Delta txn app id, version).  The commit sets the app id to the version,
    # and a batch whose app id is already at or past its version is a duplicate (the commit was applied before).
    transaction: tuple[str, int] | None = None
    #: the typed columns of its records (``key_record``, ``value_record``), set when the committer validates it
    typed: dict = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.records, pa.Table) or self.records.schema != INPUT_SCHEMA:
            self.records = normalize_records(self.records)

    @property
    def idempotent(self) -> bool:
        """Sequence-checked (a committing transaction's records were checked when they were staged)."""
        return self.producer_id >= 0 and self.transaction is None

    @functools.cached_property
    def nbytes(self) -> int:
        """The records' Arrow size (asked by the accumulator several times per batch; the table never changes)."""
        return self.records.nbytes


@dataclass(frozen=True)
class AppendResult:
    """Where a batch landed: like one partition entry of Kafka's ProduceResponse."""

    partition: int
    base_offset: int
    record_count: int
    log_append_time: int = -1  # epoch ms when the topic uses LogAppendTime, else -1
    duplicate: bool = False

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.record_count - 1


def records_from_dicts(records: Iterable[Mapping]) -> pa.Table:
    keys, values, headers, stamps = [], [], [], []
    for r in records:
        keys.append(as_bytes(r.get("key")))
        values.append(as_bytes(r.get("value")))
        hs = r.get("headers")
        if hs is None:
            headers.append(None)
        else:
            if isinstance(hs, Mapping):
                hs = [{"key": k, "value": v} for k, v in hs.items()]
            headers.append([{"key": str(h["key"]), "value": as_bytes(h.get("value"))} for h in hs])
        ts = r.get("timestamp")
        if ts is not None and (isinstance(ts, bool) or not isinstance(ts, int)):
            raise InvalidTimestamp(f"record timestamp must be an integer of epoch milliseconds, got {ts!r}")
        stamps.append(ts)
    return pa.table(
        {
            "key": pa.array(keys, pa.binary()),
            "value": pa.array(values, pa.binary()),
            "headers": pa.array(headers, HEADER_TYPE),
            "timestamp": _timestamps_from_ms(pa.array(stamps, pa.int64())),
        },
        schema=INPUT_SCHEMA,
    )


def _timestamps_from_ms(ms: pa.Array) -> pa.Array:
    if ms.null_count == len(ms):
        return pa.nulls(len(ms), TIMESTAMP_TYPE)
    bad = pc.any(pc.or_(pc.less(ms, 0), pc.greater(ms, MAX_TIMESTAMP_MS))).as_py()
    if bad:
        raise InvalidTimestamp(f"record timestamps must be between 0 and {MAX_TIMESTAMP_MS} epoch milliseconds")
    return pc.multiply(ms, 1000).cast(pa.int64()).view(TIMESTAMP_TYPE) if ms.null_count == 0 else \
        pc.multiply(ms, 1000).cast(TIMESTAMP_TYPE)


def normalize_records(data) -> pa.Table:
    """Any accepted producer input as a table of :data:`INPUT_SCHEMA` (raises ``INVALID_REQUEST``)."""
    if isinstance(data, (list, tuple)):
        return records_from_dicts(data)
    if isinstance(data, pa.RecordBatch):
        data = pa.Table.from_batches([data])
    if not isinstance(data, pa.Table):
        raise InvalidRequest(f"records must be an Arrow table or a list of dicts, got {type(data).__name__}")
    n = data.num_rows
    cols = {}
    for name in ("key", "value"):
        if name in data.column_names:
            col = data.column(name)
            if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
                col = col.cast(pa.binary())
            elif pa.types.is_large_binary(col.type):
                col = col.cast(pa.binary())
            elif not pa.types.is_binary(col.type):
                raise InvalidRequest(f"column {name!r} must be binary or string, got {col.type}")
            cols[name] = col
        else:
            cols[name] = pa.nulls(n, pa.binary())
    if "headers" in data.column_names:
        try:
            cols["headers"] = data.column("headers").cast(HEADER_TYPE)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
            raise InvalidRequest(f"column 'headers' must be list<struct<key string, value binary>>: {e}") from None
    else:
        cols["headers"] = pa.nulls(n, HEADER_TYPE)
    if "timestamp" in data.column_names:
        ts = data.column("timestamp")
        if pa.types.is_timestamp(ts.type):
            ms = pc.cast(ts, pa.timestamp("us", tz="UTC")).cast(pa.int64())
            ms_arr = pc.divide(ms, 1000)
            _timestamps_from_ms(ms_arr.combine_chunks() if hasattr(ms_arr, "combine_chunks") else ms_arr)
            cols["timestamp"] = pc.cast(ts, TIMESTAMP_TYPE)
        elif pa.types.is_integer(ts.type):
            arr = ts.combine_chunks() if isinstance(ts, pa.ChunkedArray) else ts
            cols["timestamp"] = _timestamps_from_ms(arr.cast(pa.int64()))
        else:
            raise InvalidRequest(f"column 'timestamp' must be epoch milliseconds or a timestamp, got {ts.type}")
    else:
        cols["timestamp"] = pa.nulls(n, TIMESTAMP_TYPE)
    return pa.table(cols, schema=INPUT_SCHEMA)


def record_sizes(records: pa.Table) -> pa.Array:
    """Per-record size in bytes as Kafka counts it for ``max.message.bytes`` (key + value + headers)."""
    size = pc.add(pc.fill_null(pc.binary_length(records.column("key")), 0),
                  pc.fill_null(pc.binary_length(records.column("value")), 0))
    headers = records.column("headers")
    if headers.null_count < len(headers):
        flat = pc.list_flatten(headers)
        parents = pc.list_parent_indices(headers)
        hk = pc.fill_null(pc.binary_length(pc.struct_field(flat, "key").cast(pa.binary())), 0)
        hv = pc.fill_null(pc.binary_length(pc.struct_field(flat, "value")), 0)
        per_header = pc.add(hk, hv)
        sums = pa.table({"p": parents, "s": per_header}).group_by("p").aggregate([("s", "sum")])
        extra = [0] * len(headers)
        for p, s in zip(sums.column("p").to_pylist(), sums.column("s_sum").to_pylist()):
            extra[p] = s
        size = pc.add(size, pa.array(extra, pa.int64()))
    return size


def validate_records(records: pa.Table, config: TopicConfig, *, topic: str, partition: int,
                     now_ms: int | None = None) -> None:
    """Check records against the topic's limits; raise the Kafka error naming the first violation."""
    if records.num_rows == 0:
        raise InvalidRequest(f"empty batch for topic {topic} partition {partition}")
    limit = config.get(MAX_MESSAGE_BYTES)
    if _data_bytes_bound(records) > limit:  # else no record can be larger: skip the per-record sizes
        sizes = record_sizes(records)
        biggest = pc.max(sizes).as_py() or 0
        if biggest > limit:
            i = pc.index(sizes, biggest).as_py()
            raise MessageTooLarge(f"record {i} for topic {topic} partition {partition} is {biggest} bytes, "
                                  f"larger than max.message.bytes={limit}")
    headers = records.column("headers")
    if headers.null_count < len(headers):
        flat = pc.list_flatten(headers)
        if flat.null_count or pc.struct_field(flat, "key").null_count:
            raise InvalidRecord(f"a record header for topic {topic} partition {partition} has a null key "
                                f"(Kafka requires every header to have a key)")
    if config.compacted and records.column("key").null_count:
        raise InvalidRecord(f"compacted topic {topic} cannot accept a record without a key (partition {partition})")
    if not config.log_append_time and records.column("timestamp").null_count < records.num_rows:
        now = now_ms if now_ms is not None else int(time.time() * 1000)
        before, after = config.get(MESSAGE_TIMESTAMP_BEFORE_MAX_MS), config.get(MESSAGE_TIMESTAMP_AFTER_MAX_MS)
        ts_ms = pc.divide(records.column("timestamp").cast(pa.int64()), 1000)
        lo, hi = pc.min(ts_ms).as_py(), pc.max(ts_ms).as_py()
        if now - lo > before:
            raise InvalidTimestamp(f"timestamp {lo} for topic {topic} partition {partition} is more than "
                                   f"message.timestamp.before.max.ms={before} before the append time {now}")
        if hi - now > after:
            raise InvalidTimestamp(f"timestamp {hi} for topic {topic} partition {partition} is more than "
                                   f"message.timestamp.after.max.ms={after} after the append time {now}")


def _data_bytes_bound(records: pa.Table) -> int:
    """An upper bound of the batch's key, value and header bytes: the sizes of the buffers holding them."""
    return sum(records.column(name).get_total_buffer_size() for name in ("key", "value", "headers"))
