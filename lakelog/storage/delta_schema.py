"""A Delta table schema (the ``schemaString`` of a ``metaData`` action) to Arrow types and back.

Only the types a Delta table holds without table features: boolean, byte, short, integer, long, float,
double, string, binary, date, timestamp (UTC, microseconds), decimal(p, s), struct, array and map. Every
field written is nullable (a typed column's fields may be absent in older records).
"""

from __future__ import annotations

import json
import re

import pyarrow as pa

_PRIMITIVES = {"boolean": pa.bool_(), "byte": pa.int8(), "short": pa.int16(), "integer": pa.int32(),
               "long": pa.int64(), "float": pa.float32(), "double": pa.float64(), "string": pa.string(),
               "binary": pa.binary(), "date": pa.date32(), "timestamp": pa.timestamp("us", tz="UTC")}
_DECIMAL = re.compile(r"decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)")


def to_arrow(delta_type) -> pa.DataType:
    """A Delta type (its JSON form, parsed) as an Arrow type; ValueError for one lakelog does not write."""
    if isinstance(delta_type, str):
        if delta_type in _PRIMITIVES:
            return _PRIMITIVES[delta_type]
        m = _DECIMAL.fullmatch(delta_type)
        if m:
            return pa.decimal128(int(m.group(1)), int(m.group(2)))
        raise ValueError(f"unsupported Delta type {delta_type!r}")
    kind = delta_type.get("type")
    if kind == "struct":
        return pa.struct([pa.field(f["name"], to_arrow(f["type"]), f.get("nullable", True))
                          for f in delta_type["fields"]])
    if kind == "array":
        return pa.list_(to_arrow(delta_type["elementType"]))
    if kind == "map":
        return pa.map_(to_arrow(delta_type["keyType"]), to_arrow(delta_type["valueType"]))
    raise ValueError(f"unsupported Delta type {kind!r}")


def to_delta(t: pa.DataType):
    """An Arrow type as a Delta type (JSON form); ValueError for a type Delta cannot hold."""
    for name, arrow in _PRIMITIVES.items():
        if t == arrow:
            return name
    if pa.types.is_decimal128(t):
        return f"decimal({t.precision},{t.scale})"
    if pa.types.is_struct(t):
        return {"type": "struct", "fields": [field_to_delta(f) for f in t]}
    if pa.types.is_map(t):
        return {"type": "map", "keyType": to_delta(t.key_type), "valueType": to_delta(t.item_type),
                "valueContainsNull": True}
    if pa.types.is_list(t):
        return {"type": "array", "elementType": to_delta(t.value_type), "containsNull": True}
    raise ValueError(f"Arrow type {t} has no Delta type")


def field_to_delta(f: pa.Field) -> dict:
    return {"name": f.name, "type": to_delta(f.type), "nullable": f.nullable, "metadata": {}}


def top_level_fields(schema_string: str | None) -> dict[str, pa.DataType]:
    """Name -> Arrow type of the table schema's top-level fields (empty for no schema string)."""
    if not schema_string:
        return {}
    return {f["name"]: to_arrow(f["type"]) for f in json.loads(schema_string)["fields"]}


def schema_string(fields: list[pa.Field]) -> str:
    """A Delta schema string of ``fields`` (in order)."""
    return json.dumps({"type": "struct", "fields": [field_to_delta(f) for f in fields]}, separators=(",", ":"))
