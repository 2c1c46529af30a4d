"""The message browser: a page of one partition's records from the beginning, an offset, a time or the end,
rendered as text, pretty JSON or hex, optionally only those whose key contains a search string.  Pure over
:class:`~lakelog.Log`.

Record bytes are hostile: a key, value or header is shown up to :data:`DISPLAY_BYTES` (the rest is counted,
not shown), and JSON is pretty-printed only when that cannot blow up -- nested at most :data:`PRETTY_DEPTH`
deep and at most :data:`PRETTY_GROWTH` times its size once indented; anything else is shown as it was sent.
One bad record never fails the page."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timezone

from lakelog.errors import InvalidRequest, UnknownTopicOrPartition

SCAN_LIMIT = 10_000  # records a key search reads at most, from the start offset
STARTS = ("earliest", "latest", "offset", "timestamp")  # Kafka's names: auto.offset.reset, --offset, offsets-for-times
DISPLAY_BYTES = 16 << 10  # of one key, value or header; a page of 500 records stays some MB even in hex
DISPLAY_HEADERS = 20  # headers shown per record; the others are counted
PRETTY_DEPTH = 64  # JSON nested deeper is shown as sent (indentation grows with depth times size)
PRETTY_GROWTH = 4  # nor is JSON whose indented text would be more than this many times the bytes sent


@dataclass
class Browse:
    partition: int
    start_offset: int
    next_offset: int
    high_watermark: int
    log_start_offset: int
    limit: int = 50
    records: list[dict] = field(default_factory=list)
    scanned: int = 0


def render(data: bytes | None, fmt: str, schemas=None) -> str:
    """Bytes as text (UTF-8, invalid bytes replaced), pretty JSON (as text if not JSON, or if indenting it
    would blow up), hex, or decoded by their schema (``schema``: the Schema Registry's wire format,
    :func:`decode_by_schema`); at most :data:`DISPLAY_BYTES` of them, then how many more there are."""
    if data is None:
        return "null"
    if fmt == "schema":
        return decode_by_schema(data, schemas)
    shown = data[:DISPLAY_BYTES]
    if fmt == "hex":
        text = shown.hex(" ")
    else:
        text = shown.decode("utf-8", errors="replace")
        if fmt == "json" and len(shown) == len(data):
            text = _pretty(text)
    return text + _more(len(shown), len(data))


def _more(shown: int, total: int) -> str:
    """The line telling how many of ``total`` bytes were not shown ("" when all were)."""
    return f"\n… {total - shown:,} more bytes ({total:,} in all)" if shown < total else ""


def _hex(data: bytes) -> str:
    """At most :data:`DISPLAY_BYTES` of ``data`` in hex, then how many more there are."""
    return data[:DISPLAY_BYTES].hex(" ") + _more(min(len(data), DISPLAY_BYTES), len(data))


def _record_json(value, size: int) -> str:
    """A decoded record as indented JSON, encoded only up to :data:`DISPLAY_BYTES` characters (a record of many
    small fields indents to many times the bytes it was sent as); past them, the text is cut and says so."""
    parts: list[str] = []
    length = 0
    for chunk in json.JSONEncoder(indent=2, ensure_ascii=False, default=str).iterencode(value):
        parts.append(chunk)
        length += len(chunk)
        if length > DISPLAY_BYTES:
            return "".join(parts)[:DISPLAY_BYTES] + f"\n… the rest of the record not shown ({size:,} bytes in all)"
    return "".join(parts)


def _pretty(text: str) -> str:
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):  # not JSON, or nested past the interpreter's recursion limit
        return text
    if _deeper_than(value, PRETTY_DEPTH):
        return text
    pretty = json.dumps(value, indent=2, ensure_ascii=False)
    return pretty if len(pretty) <= PRETTY_GROWTH * len(text) + 256 else text


def _deeper_than(value, limit: int) -> bool:
    """Whether arrays and objects in ``value`` nest more than ``limit`` deep (walked without recursion)."""
    stack = [(value, 1)]
    while stack:
        v, depth = stack.pop()
        if isinstance(v, (list, dict)):
            if depth > limit:
                return True
            stack.extend((c, depth + 1) for c in (v.values() if isinstance(v, dict) else v))
    return False


def _headers(headers: list | None, fmt: str) -> list[tuple[str, str]]:
    headers = headers or []
    out = [(h["key"][:DISPLAY_BYTES], render(h["value"], fmt)) for h in headers[:DISPLAY_HEADERS]]
    if len(headers) > DISPLAY_HEADERS:
        out.append(("…", f"{len(headers) - DISPLAY_HEADERS:,} more headers"))
    return out


def decode_by_schema(data: bytes, schemas) -> str:
    """A value in Confluent's wire format as ``schema id N`` and its record as JSON (its bytes in hex when it does
    not decode); anything else as text. Each cut at :data:`DISPLAY_BYTES`, as :func:`render` cuts."""
    import numpy as np

    from lakelog.schema.parsed_schema import RecordDecodeError, Untypeable
    from lakelog.schema.record_typing import HEADER, MAGIC, PADDING

    if schemas is None or len(data) < HEADER or data[0] != MAGIC:
        return render(data, "json")
    schema_id = int.from_bytes(data[1:HEADER], "big")
    try:
        parsed = schemas.schema_by_id(schema_id)
    except Exception:  # the store failed: show the bytes
        parsed = None
    if parsed is None:
        return f"schema id {schema_id} (not in the Schema Registry)\n{_hex(data[HEADER:])}"
    buf = np.frombuffer(data + bytes(PADDING), np.uint8)
    try:
        arr = parsed.columns().decode(buf, np.array([HEADER]), np.array([len(data)]))
        value = arr.to_pylist()[0]
    except (RecordDecodeError, Untypeable) as e:
        return f"schema id {schema_id} ({parsed.schema_type}): cannot decode ({e})\n{_hex(data[HEADER:])}"
    return f"schema id {schema_id} ({parsed.schema_type})\n" + _record_json(value, len(data))


def _start(log, topic: str, partition: int, start: str, offset: int, timestamp: str, limit: int) -> tuple[int, int, int]:
    snap = log.snapshot(topic)
    if not 0 <= partition < snap.partition_count:
        raise UnknownTopicOrPartition(f"partition {partition} of topic {topic} does not exist")
    lso, hw = snap.log_start_offset(partition), snap.high_watermark(partition)
    if start == "earliest":
        return lso, lso, hw
    if start == "latest":
        return max(lso, hw - limit), lso, hw
    if start == "offset":
        return min(max(offset, lso), hw), lso, hw
    if start == "timestamp":
        try:
            when = datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
        except ValueError:
            raise InvalidRequest(f"timestamp {timestamp!r} is not an ISO date-time (2026-01-31T12:00:00Z)") from None
        if when.tzinfo is None:
            when = when.replace(tzinfo=timezone.utc)
        found = log.offsets_for_times(topic, {partition: int(when.timestamp() * 1000)})[partition]
        return (hw if found is None else found), lso, hw
    raise InvalidRequest(f"start {start!r} is not one of {', '.join(STARTS)}")


def browse(log, topic: str, partition: int, *, start: str, offset: int, timestamp: str, fmt: str, key: str,
           limit: int) -> Browse:
    if fmt not in ("text", "json", "hex", "schema"):
        raise InvalidRequest(f"format {fmt!r} is not one of text, json, hex, schema")
    schemas = getattr(log, "schemas", None)
    limit = max(1, min(limit, 500))
    first, lso, hw = _start(log, topic, partition, start, offset, timestamp, limit)
    view = Browse(partition, first, first, hw, lso, limit)
    pos = first
    needle = key.encode() if key else None
    while pos < hw and len(view.records) < limit and view.scanned < SCAN_LIMIT:
        wanted = SCAN_LIMIT - view.scanned if needle is not None else limit - len(view.records)
        res = log.fetch(topic, partition, pos, max_records=min(500, wanted))
        rows = res.records.to_pylist()
        if not rows:
            break
        for r in rows:
            view.scanned += 1
            pos = r["offset"] + 1
            if needle is not None and (r["key"] is None or needle not in r["key"]):
                continue
            ts = r["timestamp"]
            view.records.append({
                "offset": r["offset"],
                "timestamp": int(ts.timestamp() * 1000) if hasattr(ts, "timestamp") else ts,
                "key": None if r["key"] is None else render(r["key"], fmt, schemas),
                "value": render(r["value"], fmt, schemas),
                "headers": _headers(r["headers"], fmt)})
            if len(view.records) >= limit:
                break
        if len(view.records) < limit:  # every row was read: skip what the fetch passed over (markers, gaps)
            pos = max(pos, res.next_offset)
    view.next_offset = pos
    return view
