"""Confluent v3 produce records: concatenated JSON records in, lakelog's input table out, delivery reports back.

A v3 produce body is one or more JSON objects, concatenated (whitespace between them
is allowed)::

    {"partition_id": 1, "headers": [{"name": "h", "value": "aGk="}],
     "key": {"type": "BINARY", "data": "Zm9vYmFy"}, "value": {"type": "JSON", "data": {"foo": "bar"}},
     "timestamp": "2021-02-05T19:14:42Z"}

``type`` is ``BINARY`` (base64 ``data``), ``STRING`` or ``JSON`` (``data`` is any JSON
value; the record holds its compact JSON text).  Schema-registry types (``AVRO``,
``PROTOBUF``, ``JSONSCHEMA``, or ``subject``/``schema_id``... fields) are refused: lakelog
has no schema registry.  A record without ``timestamp`` is stamped with the time the
request arrived, as a Kafka producer stamps CreateTime at send.

Every record is judged on its own, as Confluent's proxy does: a record that is malformed
gets its own error report, and the others are produced.  Decoding is one msgspec pass over
the whole body when the body splits cleanly (:func:`decode_body`), else per object
(:class:`ObjectScanner`), which is also how a streamed body is read as it arrives.

Pure CPU; no I/O.  Thread-safe (no shared state).
"""

from __future__ import annotations

import binascii
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Annotated, Any, Iterator, Literal, Union

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakelog.errors import InvalidTimestamp, KafkaError, MessageTooLarge
from lakelog.storage.record_schema import HEADER_TYPE, TIMESTAMP_TYPE
from lakelog.writer.records import INPUT_SCHEMA, MAX_TIMESTAMP_MS, normalize_records

from api.schemas import INT32_MAX
from api.v3.errors import BadRequest, error_body

TYPES = ("BINARY", "JSON", "STRING")
_SCHEMA_TYPES = ("AVRO", "JSONSCHEMA", "PROTOBUF")


class DataIn(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """A key or value: its ``type`` and its ``data`` (absent or null: a null key/value)."""

    type: Union[str, None] = None
    data: Any = None


class HeaderIn(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """A header: ``name`` text, ``value`` base64 (or null)."""

    name: str
    value: Union[str, None] = None


class RecordIn(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """One record of a v3 produce request (Confluent's ``ProduceRequest``)."""

    partition_id: Union[Annotated[int, msgspec.Meta(ge=0, le=INT32_MAX)], None] = None
    headers: Union[list[HeaderIn], None] = None
    key: Union[DataIn, None] = None
    value: Union[DataIn, None] = None
    timestamp: Union[datetime, None] = None


class _StringData(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    type: Literal["STRING"]
    data: Union[str, None] = None


class _StringRecord(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """The common record, decoded without a per-record pass in Python: a STRING value, a STRING key or none."""

    value: _StringData
    key: Union[_StringData, None] = None


_ONE = msgspec.json.Decoder(RecordIn)
_STRINGS = msgspec.json.Decoder(_StringRecord)
_UNDECODABLE = (msgspec.DecodeError, UnicodeDecodeError, RecursionError)


def _describe(e: Exception) -> str:
    if isinstance(e, UnicodeDecodeError):
        return "the record is not UTF-8"
    if isinstance(e, RecursionError):
        return "the record nests too deeply"
    text = str(e)
    if "unknown field" in text and any(f in text for f in ("subject", "schema")):
        text += " (lakelog has no schema registry: use the types BINARY, JSON or STRING)"
    return text


def decode_one(raw: bytes) -> RecordIn | KafkaError:
    """One record's JSON object, or the 400 error saying what is wrong with it."""
    try:
        return _ONE.decode(raw)
    except _UNDECODABLE as e:
        return BadRequest(f"malformed record: {_describe(e)}")


def decode_body(body: bytes) -> list[RecordIn | KafkaError] | None:
    """All records of a whole body, or None when one of them is malformed (then read it per object with
    :class:`ObjectScanner`, to give each record its own answer).

    One msgspec pass: ``decode_lines`` reads a sequence of JSON values separated by optional whitespace,
    which is exactly concatenated JSON.
    """
    try:
        return _ONE.decode_lines(body)
    except _UNDECODABLE:
        return None


def decode_strings(body: bytes, now_ms: int) -> "Converted | None":
    """The records of a body whose every record is a STRING value with a STRING key or none, and nothing else,
    converted column at a time; None for any other body (then :func:`decode_body`)."""
    try:
        records = _STRINGS.decode_lines(body)
    except _UNDECODABLE:
        return None
    n = len(records)
    if n == 0:
        return None
    try:
        values = pa.array([r.value.data for r in records], pa.string()).view(pa.binary())
        keys = [r.key for r in records]
        if any(keys):
            key_types = "STRING" if all(keys) else ["STRING" if k is not None else None for k in keys]
            key_col = pa.array([None if k is None else k.data for k in keys], pa.string()).view(pa.binary())
        else:
            key_types, key_col = None, pa.nulls(n, pa.binary())
    except (pa.ArrowInvalid, pa.ArrowTypeError, UnicodeEncodeError):  # a lone surrogate: judge per record
        return None
    stamps = pa.array(np.full(n, now_ms * 1000, dtype=np.int64)).view(TIMESTAMP_TYPE)  # now_ms is in range
    table = pa.table([key_col, values, pa.nulls(n, HEADER_TYPE), stamps], schema=INPUT_SCHEMA)
    out = Converted(n, table, range(n))
    out.key_types, out.value_types, out.stamp_ms = key_types, "STRING", now_ms
    return out


class ObjectScanner:
    """Finds complete top-level JSON objects in a growing buffer (a streamed body): ``feed`` bytes, take
    ``objects()``.  A byte outside an object that is not whitespace ends the stream (``error``), and so does
    an object growing past ``max_object_bytes``.

    The scan is incremental -- it resumes where the last one stopped, inside a string too -- so a body
    streamed in many small chunks costs time in proportion to its size, not to its size squared.
    """

    _TOKEN = re.compile(rb'[][{}"]')
    _STRING_REST = re.compile(rb'(?:[^"\\]|\\.)*', re.S)  # a string's characters up to its quote (or a lone \)
    _SPACE = re.compile(rb"\s*")

    def __init__(self, max_object_bytes: int) -> None:
        self.buffer = bytearray()
        self.max_object_bytes = max_object_bytes
        self.error: KafkaError | None = None
        self._depth = 0  # nesting depth of the object being scanned (0: between objects)
        self._resume = 0  # where the scan of the buffer goes on
        self._in_string = False

    def feed(self, data: bytes) -> None:
        self.buffer += data

    def objects(self) -> list[bytes]:
        """The complete objects now in the buffer, removed from it, in order."""
        out: list[bytes] = []
        buf = self.buffer
        while self.error is None:
            if self._depth == 0:  # between objects: skip whitespace; the next byte must open one
                pos = self._SPACE.match(buf, self._resume).end()
                del buf[:pos]
                self._resume = 0
                if not buf:
                    break
                if buf[0] != 0x7B:  # "{"
                    self.error = BadRequest("malformed request: expected a JSON object in the stream")
                    break
            end = self._scan(buf)
            if end is None:
                if len(buf) > self.max_object_bytes:
                    self.error = MessageTooLarge(f"a record of the stream is larger than the front's limit of "
                                                 f"{self.max_object_bytes} bytes (max_request_bytes)")
                break
            out.append(bytes(buf[:end]))
            del buf[:end]
            self._resume = 0
        return out

    def _scan(self, buf: bytearray) -> int | None:
        """The end of the object starting at 0, or None (the state is kept to resume when more bytes come)."""
        pos, depth = self._resume, self._depth
        while True:
            if self._in_string:
                pos = self._STRING_REST.match(buf, pos).end()
                if pos >= len(buf) or buf[pos] != 0x22:  # no closing quote yet (or a lone backslash at the end)
                    self._resume, self._depth = pos, depth
                    return None
                self._in_string = False
                pos += 1
                continue
            m = self._TOKEN.search(buf, pos)
            if m is None:
                self._resume, self._depth = len(buf), depth
                return None
            pos = m.end()
            c = buf[m.start()]
            if c == 0x22:
                self._in_string = True
                continue
            depth += 1 if c in (0x7B, 0x5B) else -1
            if depth == 0:
                self._depth = 0
                return pos


def _bytes_of(d: DataIn | None, what: str) -> bytes | None:
    if d is None or d.data is None:
        if d is not None and d.type is not None and d.type not in TYPES:
            raise BadRequest(_type_complaint(d.type, what))
        return None
    t = d.type
    if t == "STRING":
        if not isinstance(d.data, str):
            raise BadRequest(f"{what}: data of type STRING must be a JSON string")
        return _utf8(d.data, what)
    if t == "BINARY":
        if not isinstance(d.data, str):
            raise BadRequest(f"{what}: data={msgspec.json.encode(d.data).decode()[:40]} is not a base64 string")
        try:
            return binascii.a2b_base64(d.data, strict_mode=True)
        except (binascii.Error, ValueError):
            raise BadRequest(f"{what}: data is not a base64 string") from None
    if t == "JSON":
        return msgspec.json.encode(d.data)
    raise BadRequest(_type_complaint(t, what))


def _utf8(text: str, what: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        raise BadRequest(f"{what}: data holds a lone surrogate, which is not text") from None


def _type_complaint(t: str | None, what: str) -> str:
    if t is None or t in _SCHEMA_TYPES:
        return (f"{what}: type {t or '(none)'} needs a schema registry, which lakelog does not have; "
                f"use BINARY, JSON or STRING")
    return f"{what}: unknown type {t!r}; use BINARY, JSON or STRING"


@dataclass
class Converted:
    """Records ready to produce: ``table`` (lakelog's input schema) holds the good ones, ``rows`` their
    positions in the request; ``errors`` answers the others by position."""

    count: int
    table: pa.Table | None = None
    rows: "list[int] | range" = field(default_factory=list)  # a range when every record is good
    explicit: list | None = None
    key_types: list | str | None = None  # one type for all records, None for none, or one per record
    value_types: list | str | None = None
    stamp_ms: int | None = None  # the CreateTime every record has, when they share one
    errors: dict[int, KafkaError] = field(default_factory=dict)


def convert(records: list[RecordIn | KafkaError], now_ms: int) -> Converted:
    """Turn decoded records into lakelog's input table; a record that cannot be converted gets an error."""
    out = Converted(len(records))
    fast = _convert_uniform(records, now_ms)
    if fast is not None:
        return fast
    keys, values, headers, stamps, parts, ktypes, vtypes = [], [], [], [], [], [], []
    for i, r in enumerate(records):
        if isinstance(r, KafkaError):
            out.errors[i] = r
            continue
        try:
            k = _bytes_of(r.key, "key")
            v = _bytes_of(r.value, "value")
            hs = None
            if r.headers:
                hs = []
                for h in r.headers:
                    hv = None
                    if h.value is not None:
                        try:
                            hv = binascii.a2b_base64(h.value, strict_mode=True)
                        except (binascii.Error, ValueError):
                            raise BadRequest(f"header {h.name!r}: value is not a base64 string") from None
                    hs.append({"key": h.name, "value": hv})
            ts = now_ms if r.timestamp is None else _epoch_ms(r.timestamp)
            if not 0 <= ts <= MAX_TIMESTAMP_MS:
                raise InvalidTimestamp(f"timestamp {r.timestamp.isoformat()} is outside [1970-01-01T00:00:00Z, "
                                       f"9999-12-31T23:59:59.999Z]")
        except KafkaError as e:
            out.errors[i] = e
            continue
        out.rows.append(i)
        keys.append(k)
        values.append(v)
        headers.append(hs)
        stamps.append(ts)
        parts.append(r.partition_id)
        ktypes.append(None if r.key is None else r.key.type)
        vtypes.append(None if r.value is None else r.value.type)
    if out.rows:
        cols = {"key": pa.array(keys, pa.binary()), "value": pa.array(values, pa.binary()),
                "timestamp": pa.array(stamps, pa.int64())}
        if any(h is not None for h in headers):
            cols["headers"] = pa.array(headers, HEADER_TYPE)
        try:
            out.table = normalize_records(pa.table(cols))
        except KafkaError as e:  # not expected (each field was checked): judge each record alone
            if len(records) == 1:
                return Converted(1, errors={0: e})
            return _convert_each(records, now_ms)
        out.explicit = parts if any(p is not None for p in parts) else None
        out.key_types, out.value_types = ktypes, vtypes
    return out


def _convert_each(records: list[RecordIn | KafkaError], now_ms: int) -> Converted:
    out = Converted(len(records))
    tables, parts, ktypes, vtypes = [], [], [], []
    for i, r in enumerate(records):
        one = convert([r], now_ms) if not isinstance(r, KafkaError) else None
        if one is None or one.table is None or one.errors:
            err = r if isinstance(r, KafkaError) else None
            if err is None and one is not None and one.errors:
                err = one.errors[0]
            if err is None:
                err = BadRequest("record rejected")
            out.errors[i] = err
            continue
        out.rows.append(i)
        tables.append(one.table)
        parts.append(None if one.explicit is None else one.explicit[0])
        ktypes += _per_record(one.key_types, 1)
        vtypes += _per_record(one.value_types, 1)
    if tables:
        out.table = pa.concat_tables(tables)
        out.explicit = parts if any(p is not None for p in parts) else None
        out.key_types, out.value_types = ktypes, vtypes
    return out


def _per_record(types: list | str | None, n: int) -> list:
    return types if isinstance(types, list) else [types] * n


def _epoch_ms(ts: datetime) -> int:
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=timezone.utc)
    delta = ts - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_ABSENT = object()


def _convert_uniform(records: list, now_ms: int) -> Converted | None:
    """The common request, column at a time: every record has no headers, partition or timestamp, no key or
    keys of one type, and values of one type, BINARY aside (base64 is decoded per record).  None otherwise."""
    for r in records:
        if isinstance(r, KafkaError) or r.headers is not None or r.partition_id is not None \
                or r.timestamp is not None:
            return None
    n = len(records)
    cols = {}
    types = {}
    for name in ("key", "value"):
        items = [getattr(r, name) for r in records]
        kinds = {_ABSENT if d is None else d.type for d in items}
        if len(kinds) != 1:
            return None
        kind = next(iter(kinds))
        if kind is _ABSENT:
            cols[name] = pa.nulls(n, pa.binary())
            types[name] = None
        elif kind == "STRING":
            try:
                cols[name] = pa.array([d.data for d in items], pa.string()).view(pa.binary())
            except (pa.ArrowInvalid, pa.ArrowTypeError, UnicodeEncodeError):
                return None
            types[name] = kind
        else:
            return None
    cols["timestamp"] = pa.array(np.full(n, now_ms, dtype=np.int64))
    out = Converted(n, normalize_records(pa.table(cols)), range(n))
    out.key_types, out.value_types, out.stamp_ms = types["key"], types["value"], now_ms
    return out


# -- delivery reports ------------------------------------------------------------------------------
SEPARATOR = b"\r\n"  # after each report, as Confluent's proxy separates its chunks
REPORT_SLICE = 8192  # reports made and sent at a time (about 1.5 MB of answer), whatever the request's size


def _iso_time(ms: int) -> bytes:
    """ISO-8601 UTC text, as Java's ``Instant.toString`` writes it (no fraction for whole seconds)."""
    text = datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    return (text + (f".{ms % 1000:03d}Z" if ms % 1000 else "Z")).encode()


def _names(cluster_id: str, topic: str) -> bytes:
    return b'{"error_code":200,"cluster_id":' + msgspec.json.encode(cluster_id) + b',"topic_name":' \
        + msgspec.json.encode(topic)


def run_reports(cluster_id: str, topic: str, converted: Converted, partition: int, base_offset: int,
                stamp_ms: int) -> Iterator[bytes] | None:
    """The reports of a request whose records all landed in order in one partition from ``base_offset``, with
    one timestamp, no keys and values of one type and size -- the common request, answered with one join
    per slice of :data:`REPORT_SLICE` records instead of a format per record.  None for any other request
    (then :func:`reports`)."""
    table = converted.table
    if converted.errors or table is None or converted.key_types is not None \
            or not isinstance(converted.value_types, str):
        return None
    sizes = pc.binary_length(table.column("value"))
    if sizes.null_count:
        return None
    bounds = pc.min_max(sizes).as_py()
    if bounds["min"] != bounds["max"]:
        return None
    head = _names(cluster_id, topic) + b',"partition_id":%d,"offset":' % partition
    tail = b',"timestamp":"' + _iso_time(stamp_ms) + b'","key":null,"value":{"type":"' \
        + converted.value_types.encode() + b'","size":%d}' % bounds["min"] + b"}" + SEPARATOR
    glue = (tail + head).decode()
    end = base_offset + table.num_rows
    return (head + glue.join(map(str, range(first, min(first + REPORT_SLICE, end)))).encode() + tail
            for first in range(base_offset, end, REPORT_SLICE))


def reports(cluster_id: str, topic: str, converted: Converted, partitions: np.ndarray, offsets: np.ndarray,
            stamps_ms: np.ndarray, failures: dict[int, KafkaError]) -> Iterator[bytes]:
    """One delivery report per record of the request, in order, each followed by CRLF, made and yielded
    :data:`REPORT_SLICE` records at a time: Confluent's ``ProduceResponse`` with ``error_code`` 200, or the
    record's error (its code and message).  ``partitions``, ``offsets`` and ``stamps_ms`` are per good row
    (``converted.rows``); ``failures`` maps a good row's index to the error its batch met in the commit."""
    table = converted.table
    template, columns = b"", []
    if table is not None and converted.rows:
        names = _names(cluster_id, topic).replace(b"%", b"%%")
        fmt = [names + b',"partition_id":%d,"offset":%d,"timestamp":"']
        columns = [partitions, offsets]
        unique = np.unique(stamps_ms)
        if len(unique) == 1:
            fmt.append(_iso_time(int(unique[0])).replace(b"%", b"%%"))
        else:
            fmt.append(b"%s")
            columns.append(_IsoTimes(stamps_ms))
        for name, types in (("key", converted.key_types), ("value", converted.value_types)):
            fmt.append(b'","key":' if name == "key" else b',"value":')
            if types is None:
                fmt.append(b"null")
                continue
            sizes = pc.fill_null(pc.binary_length(table.column(name)), 0).to_numpy()
            if isinstance(types, str):
                fmt.append(b'{"type":"' + types.encode() + b'","size":%d}')
                columns.append(sizes)
            else:
                fmt.append(b"%s")
                columns.append(_TypedSizes(types, sizes))
        template = b"".join(fmt) + b"}" + SEPARATOR
    rows = np.asarray(converted.rows, dtype=np.int64)
    for first in range(0, converted.count, REPORT_SLICE):
        last = min(first + REPORT_SLICE, converted.count)
        lo, hi = np.searchsorted(rows, [first, last]).tolist()  # the good rows of requests [first, last)
        good = [template % a for a in zip(*(c[lo:hi].tolist() if isinstance(c, np.ndarray) else c[lo:hi]
                                               for c in columns))] if hi > lo else []
        if not failures and not converted.errors:
            yield b"".join(good)
            continue
        out: list[bytes] = [b""] * (last - first)
        for j in range(lo, hi):
            e = failures.get(j)
            out[int(rows[j]) - first] = good[j - lo] if e is None else msgspec.json.encode(error_body(e)) + SEPARATOR
        for i, e in converted.errors.items():
            if first <= i < last:
                out[i - first] = msgspec.json.encode(error_body(e)) + SEPARATOR
        yield b"".join(out)


class _IsoTimes:
    """Report timestamps of a slice of rows, rendered when the slice is made."""

    def __init__(self, stamps_ms: np.ndarray) -> None:
        self.stamps_ms = stamps_ms

    def __getitem__(self, rows: slice) -> list[bytes]:
        return [_iso_time(ms) for ms in self.stamps_ms[rows].tolist()]


class _TypedSizes:
    """The key or value part of reports whose records differ in type (``null`` or ``{"type","size"}``)."""

    def __init__(self, types: list, sizes: np.ndarray) -> None:
        self.types, self.sizes = types, sizes

    def __getitem__(self, rows: slice) -> list[bytes]:
        return [b"null" if t is None else b'{"type":"%s","size":%d}' % (t.encode(), z)
                for t, z in zip(self.types[rows], self.sizes[rows].tolist())]
