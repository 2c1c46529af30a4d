"""Hypothesis strategies: random Avro schemas (nested records, arrays, maps, enums, fixed, unions, logical
types) and records of them, and what a typed column holds for a record fastavro decoded."""

from __future__ import annotations

import datetime as dt
import decimal
import uuid

from hypothesis import strategies as st

_names = st.from_regex(r"[a-z][a-z0-9_]{0,6}", fullmatch=True)
PRIMITIVES = ["boolean", "int", "long", "float", "double", "bytes", "string"]
LOGICAL = [
    {"type": "int", "logicalType": "date"},
    {"type": "long", "logicalType": "timestamp-millis"},
    {"type": "long", "logicalType": "timestamp-micros"},
    {"type": "string", "logicalType": "uuid"},
    {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 3},
]


class _Counter:
    n = 0

    @classmethod
    def name(cls, prefix: str) -> str:
        cls.n += 1
        return f"{prefix}{cls.n}"


def _leaf():
    return st.one_of(st.sampled_from(PRIMITIVES), st.sampled_from(LOGICAL),
                     st.lists(_names, min_size=1, max_size=5, unique=True).map(
                         lambda s: {"type": "enum", "name": _Counter.name("E"), "symbols": [x.upper() for x in s]}),
                     st.integers(1, 8).map(lambda n: {"type": "fixed", "name": _Counter.name("F"), "size": n}))


def _extend(children):
    record = st.lists(st.tuples(_names, children), min_size=1, max_size=5, unique_by=lambda t: t[0]).map(
        lambda fs: {"type": "record", "name": _Counter.name("R"), "fields": [{"name": n, "type": t} for n, t in fs]})
    return st.one_of(record,
                     children.map(lambda t: {"type": "array", "items": t}),
                     children.map(lambda t: {"type": "map", "values": t}),
                     children.map(lambda t: ["null", t] if not isinstance(t, list) else t))


def _distinct_union(ts):
    """A union of distinct branch kinds (Avro's rule), with null first when present."""
    out, kinds = [], set()
    for t in ts:
        kind = t if isinstance(t, str) else (t["type"] if t["type"] not in ("record", "enum", "fixed") else t["name"])
        if isinstance(t, list) or kind in kinds:
            continue
        kinds.add(kind)
        out.append(t)
    return out


def avro_schemas():
    """A record schema with fields of every kind, nested up to a few levels."""
    field = st.recursive(_leaf(), _extend, max_leaves=12)
    multi = st.lists(st.sampled_from(["int", "string", "double", "boolean", "bytes"]), min_size=2, max_size=4,
                     unique=True).map(lambda b: ["null", *b])
    fields = st.lists(st.tuples(_names, st.one_of(field, multi)), min_size=1, max_size=8, unique_by=lambda t: t[0])
    return fields.map(lambda fs: {"type": "record", "name": _Counter.name("Top"),
                                  "fields": [{"name": n, "type": t} for n, t in fs]})


def values(schema, named=None):
    """A strategy of values of ``schema`` as fastavro writes them."""
    named = {} if named is None else named
    if isinstance(schema, list):
        return st.one_of([values(b, named) if b != "null" else st.none() for b in schema])
    if isinstance(schema, str):
        if schema in named:
            return values(named[schema], named)
        return {"null": st.none(), "boolean": st.booleans(), "int": st.integers(-(2**31), 2**31 - 1),
                "long": st.integers(-(2**63), 2**63 - 1),
                "float": st.floats(width=32, allow_nan=False), "double": st.floats(allow_nan=False),
                "bytes": st.binary(max_size=20), "string": st.text(max_size=20)}[schema]
    kind, logical = schema["type"], schema.get("logicalType")
    if logical == "date":
        return st.dates(dt.date(1900, 1, 1), dt.date(2200, 1, 1))
    if logical in ("timestamp-millis", "timestamp-micros"):
        base = st.datetimes(dt.datetime(1900, 1, 1), dt.datetime(2200, 1, 1), timezones=st.just(dt.timezone.utc))
        return base.map(lambda d: d.replace(microsecond=d.microsecond // 1000 * 1000)) if logical.endswith("millis") \
            else base
    if logical == "uuid":
        return st.uuids().map(str)
    if logical == "decimal":
        return st.integers(-(10**12) + 1, 10**12 - 1).map(lambda i: decimal.Decimal(i).scaleb(-3))
    if kind == "record":
        named[schema["name"]] = schema
        return st.fixed_dictionaries({f["name"]: values(f["type"], named) for f in schema["fields"]})
    if kind == "enum":
        named[schema["name"]] = schema
        return st.sampled_from(schema["symbols"])
    if kind == "fixed":
        named[schema["name"]] = schema
        return st.binary(min_size=schema["size"], max_size=schema["size"])
    if kind == "array":
        return st.lists(values(schema["items"], named), max_size=4)
    if kind == "map":
        return st.dictionaries(st.text(max_size=5), values(schema["values"], named), max_size=4)
    return values(kind, named)


def typed(schema, value):
    """What the typed column holds for ``value`` (a record fastavro decoded with ``schema``), in Arrow's
    ``to_pylist`` form: maps as (key, value) pairs, a union of several types as ``member<i>`` structs, uuids as
    strings."""
    if value is None:
        return None
    if isinstance(schema, list):
        branches = [b for b in schema if b != "null"]
        if len(branches) == 1:
            return typed(branches[0], value)
        if set(branches) <= {"int", "long"} or set(branches) <= {"float", "double"}:
            return value
        members = {}
        for i, b in enumerate(branches):
            matches = _matches(b, value)
            members[f"member{i}"] = typed(b, value) if matches and not any(members.values()) else None
        return members
    if isinstance(schema, str):
        return value
    kind = schema["type"]
    if schema.get("logicalType") == "uuid":
        return str(value)
    if kind == "record":
        return {f["name"]: typed(f["type"], value.get(f["name"])) for f in schema["fields"]}
    if kind == "array":
        return [typed(schema["items"], v) for v in value]
    if kind == "map":
        return [(k, typed(schema["values"], v)) for k, v in value.items()]
    return value


def _matches(branch, value) -> bool:
    return {"int": lambda v: isinstance(v, int) and not isinstance(v, bool),
            "string": lambda v: isinstance(v, str), "double": lambda v: isinstance(v, float),
            "boolean": lambda v: isinstance(v, bool), "bytes": lambda v: isinstance(v, bytes)}[branch](value)


def uuid_of(i: int) -> str:
    return str(uuid.UUID(int=i))
