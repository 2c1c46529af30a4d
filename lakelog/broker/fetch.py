"""Fetch for clients of neither Kafka nor Spark (HTTP, the console): committed records of one partition, as JSON values."""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING

import pyarrow as pa

from lakelog.errors import InvalidRequest
from lakelog.storage.record_schema import LOG_APPEND_TIME

if TYPE_CHECKING:
    from lakelog import Log

DEFAULT_MAX_RECORDS = 500  # Kafka's max.poll.records
DEFAULT_MAX_BYTES = 52_428_800  # Kafka's fetch.max.bytes


def _encoder(encoding: str):
    if encoding == "base64":
        return lambda b, where: None if b is None else base64.b64encode(b).decode("ascii")

    def utf8(b: bytes | None, where: str) -> str | None:
        if b is None:
            return None
        try:
            return b.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidRequest(f"{where} is not valid UTF-8; fetch with encoding=base64") from None

    return utf8


def fetch_records(log: "Log", topic: str, partition: int, offset: int, *, max_records: int, max_bytes: int,
                  encoding: str) -> dict:
    """Records with offset >= ``offset`` plus the partition's offsets; ``OFFSET_OUT_OF_RANGE`` outside
    [log start offset, high watermark]."""
    res = log.fetch(topic, partition, offset, max_records=max_records, max_bytes=max_bytes)
    enc = _encoder(encoding)
    t = res.records
    offsets = t.column("offset").to_pylist()
    stamps = t.column("timestamp").cast(pa.int64()).to_pylist()
    types = t.column("timestampType").to_pylist()
    keys, values = t.column("key").to_pylist(), t.column("value").to_pylist()
    headers, pids, seqs = t.column("headers").to_pylist(), t.column("producerId").to_pylist(), \
        t.column("sequence").to_pylist()
    out = []
    for i, off in enumerate(offsets):
        where = f"record {off} of {topic}-{partition}"
        hs = headers[i]
        out.append({
            "offset": off,
            "timestamp": stamps[i] // 1000,
            "timestamp_type": "LogAppendTime" if types[i] == LOG_APPEND_TIME else "CreateTime",
            "key": enc(keys[i], f"the key of {where}"),
            "value": enc(values[i], f"the value of {where}"),
            "headers": None if hs is None else [{"key": h["key"], "value": enc(h["value"], f"a header of {where}")}
                                                for h in hs],
            "producer_id": pids[i],
            "sequence": seqs[i],
        })
    return {"topic": topic, "partition": partition, "high_watermark": res.high_watermark,
            "last_stable_offset": res.high_watermark,  # no transaction is ever open inside a topic table
            "log_start_offset": res.log_start_offset, "next_offset": res.next_offset, "encoding": encoding,
            "records": out}
