"""Avro's binary encoding to Arrow columns: the type mapping, and a decoder that works a column at a time.

**Types** follow Spark's ``from_avro`` (spark-avro's ``SchemaConverters``), limited to what a Delta table holds
without table features: boolean, int, long, float, double, bytes and fixed (binary), string, enum (string),
record (struct), array (list), map (map<string, V>), ``[null, T]`` (T, nullable), a union of int and long
(long) or of float and double (double), any other union a struct of ``member0``, ``member1``, ... (one per
non-null branch, the taken one set); logical types date (date), time-millis (int), time-micros (long),
timestamp-millis/micros and local-timestamp-millis/micros (timestamp, UTC, microseconds), timestamp-nanos
(long), decimal up to precision 38 (decimal(p, s); wider: binary), uuid (string). A recursive schema, a
field of type ``null``, case-insensitively repeated field names, or more than
:data:`~lakelog.schema.schema_limits.MAX_TYPED_LEAVES` leaf columns cannot be typed (:attr:`AvroColumns.untyped`
says why); such a schema still validates records.

**Decoding** is vectorized with numpy: each schema node reads its value for all the batch's records at once,
from each record's current position (varints one byte-round at a time over the records still reading), so the
Python cost is per batch and per schema node, not per record -- what lets a typed topic take records at the
rate the front receives them (BENCHMARKS.md, "Typed columns"); fastavro, record by record, is the tests'
reference decoder. The nodes are :mod:`lakelog.schema.avro_nodes`'. Every read is bounded by its record's end; a record that ends early, holds trailing bytes,
an out-of-range union branch or enum symbol, a negative length, invalid UTF-8, a boolean other than 0/1, a
decimal wider than its precision or a malformed uuid raises :class:`RecordDecodeError` naming the record.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from avro.schema import (ArraySchema, BytesDecimalSchema, DateSchema, EnumSchema, FixedDecimalSchema, FixedSchema,
                         MapSchema, NamedSchema, RecordSchema, Schema, TimeMicrosSchema, TimeMillisSchema,
                         TimestampMicrosSchema, TimestampMillisSchema, UnionSchema, UUIDSchema)

from lakelog.schema.avro_nodes import (PADDING, ArrayNode, BooleanNode, BytesNode, DecodeContext, EnumNode, FixedNode,
                                      FloatNode, IntNode, MapNode, Node, NullNode, RecordNode, UnionNode)
from lakelog.schema.parsed_schema import Untypeable
from lakelog.schema.schema_limits import MAX_TYPED_LEAVES

__all__ = ["AvroColumns", "PADDING"]


class AvroColumns:
    """An Avro schema compiled for decoding: :attr:`type` (its Arrow type, or None with :attr:`untyped` saying
    why) and :meth:`decode`."""

    def __init__(self, schema: Schema) -> None:
        self.root = _compile(schema, {})
        self.untyped: str | None = None
        try:
            leaves = self.root.leaves({})
            if self.root.type is None:
                raise Untypeable("a field of type null has no Delta type")
            if leaves > MAX_TYPED_LEAVES:
                raise Untypeable(f"it expands to {leaves} columns, more than {MAX_TYPED_LEAVES}")
            _check_names(self.root.type)
        except Untypeable as e:
            self.untyped = str(e)
        self.type = self.root.type if self.untyped is None else None

    def decode(self, data: np.ndarray, starts: np.ndarray, ends: np.ndarray, *, build: bool = True) -> pa.Array | None:
        """The values at ``data[starts[i]:ends[i]]`` (``data`` padded with :data:`PADDING` zero bytes), as one
        array of :attr:`type` (``build``) or only checked; :class:`RecordDecodeError` for the first bad one."""
        if build and self.type is None:
            raise Untypeable(self.untyped or "no Delta type")
        ctx = DecodeContext(data, ends.astype(np.int64), build)
        rows = np.arange(len(starts))
        arr, pos = self.root.read(ctx, rows, starts.astype(np.int64))
        trailing = pos != ctx.ends
        if trailing.any():
            ctx.fail(rows, trailing, "trailing bytes after the value")
        return arr


def _compile(schema: Schema, named: dict) -> Node:
    """The decoding node of ``schema``; named types are compiled once (recursive schemas share the node)."""
    if isinstance(schema, NamedSchema) and schema.fullname in named:
        return named[schema.fullname]
    logical = schema.get_prop("logicalType") if hasattr(schema, "get_prop") else None
    kind = schema.type
    if isinstance(schema, RecordSchema):
        node = RecordNode(schema.fullname)
        named[schema.fullname] = node
        node.fields = [(f.name, _compile(f.type, named)) for f in schema.fields]
        node.finish()
        return node
    if isinstance(schema, EnumSchema):
        node = named[schema.fullname] = EnumNode(list(schema.symbols))
        return node
    if isinstance(schema, FixedDecimalSchema):
        node = named[schema.fullname] = FixedNode(schema.size, "decimal", schema.get_prop("precision"),
                                                  schema.get_prop("scale") or 0)
        return node
    if isinstance(schema, FixedSchema):
        node = named[schema.fullname] = FixedNode(schema.size)
        return node
    if isinstance(schema, ArraySchema):
        return ArrayNode(_compile(schema.items, named))
    if isinstance(schema, MapSchema):
        return MapNode(_compile(schema.values, named))
    if isinstance(schema, UnionSchema):
        return UnionNode([_compile(s, named) for s in schema.schemas], [s.type for s in schema.schemas])
    if isinstance(schema, BytesDecimalSchema):
        return BytesNode(False, "decimal", schema.get_prop("precision"), schema.get_prop("scale") or 0)
    if isinstance(schema, UUIDSchema):
        return BytesNode(True, "uuid")
    if isinstance(schema, DateSchema):
        return IntNode(False, "date")
    if isinstance(schema, TimeMillisSchema):
        return IntNode(False, None)
    if isinstance(schema, (TimeMicrosSchema,)):
        return IntNode(True, None)
    if isinstance(schema, TimestampMillisSchema):
        return IntNode(True, "timestamp-millis")
    if isinstance(schema, TimestampMicrosSchema):
        return IntNode(True, "timestamp-micros")
    if kind == "null":
        return NullNode()
    if kind == "boolean":
        return BooleanNode()
    if kind in ("int", "long"):
        local = logical if kind == "long" and logical in ("local-timestamp-millis", "local-timestamp-micros") else None
        return IntNode(kind == "long", local)
    if kind in ("float", "double"):
        return FloatNode(kind == "double")
    if kind in ("bytes", "string"):
        return BytesNode(kind == "string")
    raise Untypeable(f"unknown Avro type {kind!r}")


def _check_names(type_: pa.DataType) -> None:
    """Struct field names must differ case-insensitively (Spark resolves columns case-insensitively)."""
    stack = [type_]
    while stack:
        t = stack.pop()
        if pa.types.is_struct(t):
            seen: set[str] = set()
            for f in t:
                low = f.name.lower()
                if low in seen:
                    raise Untypeable(f"fields named {f.name!r} differ only in case")
                seen.add(low)
                stack.append(f.type)
        elif pa.types.is_list(t):
            stack.append(t.value_type)
        elif pa.types.is_map(t):
            stack.append(t.item_type)
