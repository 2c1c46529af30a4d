"""The message browser: a page of one partition's records from an offset, a time or the end, rendered as text,
pretty JSON or hex, optionally only those whose key contains a search string.  Pure over :class:`~lakelog.Log`."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timezone

from lakelog.errors import InvalidRequest, UnknownTopicOrPartition

SCAN_LIMIT = 10_000  # records a key search reads at most, from the start offset


@dataclass
class Browse:
    partition: int
    start_offset: int
    next_offset: int
    high_watermark: int
    log_start_offset: int
    records: list[dict] = field(default_factory=list)
    scanned: int = 0


def render(data: bytes | None, fmt: str) -> str:
    """Bytes as text (UTF-8, invalid bytes replaced), pretty JSON (text if not JSON) or hex."""
    if data is None:
        return "null"
    if fmt == "hex":
        return data.hex(" ")
    text = data.decode("utf-8", errors="replace")
    if fmt == "json":
        try:
            return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
        except ValueError:
            return text
    return text


def _start(log, topic: str, partition: int, start: str, offset: int, timestamp: str, limit: int) -> tuple[int, int, int]:
    snap = log.snapshot(topic)
    if not 0 <= partition < snap.partition_count:
        raise UnknownTopicOrPartition(f"partition {partition} of topic {topic} does not exist")
    lso, hw = snap.log_start_offset(partition), snap.high_watermark(partition)
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
    raise InvalidRequest(f"start {start!r} is not one of latest, offset, timestamp")


def browse(log, topic: str, partition: int, *, start: str, offset: int, timestamp: str, fmt: str, key: str,
           limit: int) -> Browse:
    if fmt not in ("text", "json", "hex"):
        raise InvalidRequest(f"format {fmt!r} is not one of text, json, hex")
    limit = max(1, min(limit, 500))
    first, lso, hw = _start(log, topic, partition, start, offset, timestamp, limit)
    view = Browse(partition, first, first, hw, lso)
    pos = first
    needle = key.encode() if key else None
    while pos < hw and len(view.records) < limit and view.scanned < SCAN_LIMIT:
        res = log.fetch(topic, partition, pos, max_records=min(500, SCAN_LIMIT - view.scanned))
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
                "key": None if r["key"] is None else render(r["key"], fmt),
                "value": render(r["value"], fmt),
                "headers": [(h["key"], render(h["value"], fmt)) for h in (r["headers"] or [])]})
            if len(view.records) >= limit:
                break
        pos = max(pos, res.next_offset if res.next_offset > pos else pos)
    view.next_offset = pos
    return view
