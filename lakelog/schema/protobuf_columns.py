"""Protobuf records as typed columns (Spark's ``from_protobuf`` mapping, Delta-safe): a schema's first message
planned as an Arrow struct, and a batch of Confluent-framed records (message indexes, then the message) decoded
into it (:class:`ProtobufColumns`). The mapping is stated in :mod:`lakelog.schema.protobuf_schema`.
"""

from __future__ import annotations

from decimal import Decimal
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from lakelog.schema.parsed_schema import RecordDecodeError, Untypeable
from lakelog.schema.schema_limits import MAX_NESTING, MAX_TYPED_LEAVES

if TYPE_CHECKING:
    from lakelog.schema.protobuf_schema import ProtobufSchema

_WRAPPERS = {"google.protobuf.DoubleValue", "google.protobuf.FloatValue", "google.protobuf.Int64Value",
             "google.protobuf.UInt64Value", "google.protobuf.Int32Value", "google.protobuf.UInt32Value",
             "google.protobuf.BoolValue", "google.protobuf.StringValue", "google.protobuf.BytesValue"}
_TIMESTAMP = "google.protobuf.Timestamp"

class _Field:
    __slots__ = ("name", "kind", "repeated", "presence", "item", "key", "symbols", "type")


def _field_plan(fd, active: set, depth: int, count: list) -> _Field:
    from google.protobuf.descriptor import FieldDescriptor as F

    p = _Field()
    p.name, p.repeated = fd.name, fd.is_repeated
    p.presence = fd.has_presence and not p.repeated
    p.item = p.key = p.symbols = None
    count[0] += 1
    if count[0] > MAX_TYPED_LEAVES:
        raise Untypeable(f"it expands to more than {MAX_TYPED_LEAVES} columns")
    if fd.type == F.TYPE_MESSAGE:
        mt = fd.message_type
        if mt.GetOptions().map_entry:
            key, value = mt.fields_by_name["key"], mt.fields_by_name["value"]
            p.kind, p.repeated, p.presence = "map", False, False
            p.key, p.item = _field_plan(key, active, depth + 1, count), _field_plan(value, active, depth + 1, count)
            p.type = pa.map_(p.key.type, p.item.type)
            return p
        if mt.full_name == _TIMESTAMP:
            p.kind, p.type = "timestamp", pa.timestamp("us", tz="UTC")
        elif mt.full_name in _WRAPPERS:
            inner = _field_plan(mt.fields_by_name["value"], active, depth + 1, count)
            p.kind, p.item, p.type = "wrapper", inner, inner.type
        else:
            p.kind, p.item = "message", _message_plan(mt, active, depth + 1, count)
            p.type = p.item.type
    elif fd.type == F.TYPE_ENUM:
        p.kind, p.type = "enum", pa.string()
        p.symbols = {v.number: v.name for v in fd.enum_type.values}
    else:
        p.kind = {F.TYPE_DOUBLE: "double", F.TYPE_FLOAT: "float", F.TYPE_INT32: "int", F.TYPE_SINT32: "int",
                  F.TYPE_SFIXED32: "int", F.TYPE_INT64: "long", F.TYPE_SINT64: "long", F.TYPE_SFIXED64: "long",
                  F.TYPE_UINT32: "long", F.TYPE_FIXED32: "long", F.TYPE_UINT64: "ulong", F.TYPE_FIXED64: "ulong",
                  F.TYPE_BOOL: "bool", F.TYPE_STRING: "string", F.TYPE_BYTES: "bytes"}.get(fd.type)
        if p.kind is None:
            raise Untypeable(f"field {fd.name} is a proto2 group")
        p.type = {"double": pa.float64(), "float": pa.float32(), "int": pa.int32(), "long": pa.int64(),
                  "ulong": pa.decimal128(20, 0), "bool": pa.bool_(), "string": pa.string(),
                  "bytes": pa.binary()}[p.kind]
    if p.repeated:
        p.type = pa.list_(p.type)
    return p


class _Message:
    __slots__ = ("fields", "type")


def _message_plan(desc, active: set, depth: int, count: list) -> _Message:
    if desc.full_name in active:
        raise Untypeable(f"message {desc.full_name} contains itself")
    if depth > MAX_NESTING:
        raise Untypeable(f"messages nest deeper than {MAX_NESTING}")
    if not desc.fields:
        raise Untypeable(f"message {desc.full_name} has no fields (Parquet holds no empty struct)")
    active.add(desc.full_name)
    m = _Message()
    m.fields = [_field_plan(f, active, depth, count) for f in desc.fields]
    active.discard(desc.full_name)
    m.type = pa.struct([pa.field(f.name, f.type) for f in m.fields])
    return m


def _value(p: _Field, v):
    kind = p.kind
    if kind == "message":
        return _message_value(p.item, v)
    if kind == "enum":
        return p.symbols.get(v, str(v))
    if kind == "ulong":
        return Decimal(v)
    if kind == "timestamp":
        return v.seconds * 1_000_000 + v.nanos // 1000
    if kind == "wrapper":
        return _value(p.item, v.value)
    return v


def _message_value(m: _Message, msg) -> dict:
    out = {}
    for p in m.fields:
        if p.kind == "map":
            out[p.name] = [(_value(p.key, k), _value(p.item, v)) for k, v in getattr(msg, p.name).items()]
        elif p.repeated:
            out[p.name] = [_value(p, v) for v in getattr(msg, p.name)]
        elif p.presence and not msg.HasField(p.name):
            out[p.name] = None
        else:
            out[p.name] = _value(p, getattr(msg, p.name))
    return out


def read_indexes(raw: bytes, pos: int, end: int) -> tuple[list[int], int]:
    """Confluent's message indexes at ``raw[pos:]`` (zig-zag varints: a count, then the path; a lone 0 is
    ``[0]``): (the path, the position after it). ValueError if they are malformed."""
    def varint(p: int) -> tuple[int, int]:
        shift = value = 0
        for _ in range(10):
            if p >= end:
                raise ValueError("the message indexes are truncated")
            b = raw[p]
            p += 1
            value |= (b & 0x7F) << shift
            if b < 0x80:
                return (value >> 1) ^ -(value & 1), p
            shift += 7
        raise ValueError("a message index is a varint longer than 10 bytes")

    count, pos = varint(pos)
    if count == 0:
        return [0], pos
    if not 0 < count <= MAX_NESTING:
        raise ValueError(f"{count} message indexes")
    path = []
    for _ in range(count):
        i, pos = varint(pos)
        path.append(i)
    return path, pos


class ProtobufColumns:
    """A Protobuf schema compiled for a batch of records (message indexes, then the message)."""

    def __init__(self, schema: ProtobufSchema) -> None:
        self.schema = schema
        self.untyped: str | None = None
        self._plans: dict[str, _Message] = {}
        self._classes: dict[str, type] = {}
        first = schema.message([0])
        try:
            self.type = self._plan(first).type
        except Untypeable as e:
            self.type, self.untyped = None, str(e)

    def _plan(self, desc) -> _Message:
        if desc.full_name not in self._plans:
            self._plans[desc.full_name] = _message_plan(desc, set(), 0, [0])
        return self._plans[desc.full_name]

    def _class(self, desc):
        from google.protobuf import message_factory

        if desc.full_name not in self._classes:
            self._classes[desc.full_name] = message_factory.GetMessageClass(desc)
        return self._classes[desc.full_name]

    def decode(self, data: np.ndarray, starts: np.ndarray, ends: np.ndarray, *, build: bool = True):
        raw = data.tobytes()
        values = []
        first = self.schema.message([0])
        for row, (s, e) in enumerate(zip(starts.tolist(), ends.tolist())):
            try:
                path, pos = read_indexes(raw, s, e)
            except ValueError as ex:
                raise RecordDecodeError(row, str(ex)) from None
            desc = self.schema.message(path)
            if desc is None:
                raise RecordDecodeError(row, f"the message indexes {path} name no message of the schema")
            try:
                msg = self._class(desc).FromString(raw[pos:e])
            except Exception as ex:  # protobuf's DecodeError (and upb's recursion limit)
                raise RecordDecodeError(row, f"not a valid {desc.full_name}: {' '.join(str(ex).split())[:200]}") \
                    from None
            if build:
                if desc.full_name != first.full_name:
                    raise RecordDecodeError(row, f"a {desc.full_name}, not the {first.full_name} the typed column "
                                                 f"holds (typed columns hold the schema's first message)")
                values.append(_message_value(self._plan(desc), msg))
        if not build:
            return None
        if self.type is None:
            raise Untypeable(self.untyped or "no Delta type")
        return pa.array(values, self.type)
