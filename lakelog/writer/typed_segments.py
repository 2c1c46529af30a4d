"""Typed columns on the append path: batches validated and typed against the Schema Registry, the table schema
a commit evolves to, and segments that carry ``key_record`` / ``value_record`` beside the bytes.

Schema evolution is Delta schema evolution: a commit whose batches hold a field the table schema lacks carries
a ``metaData`` action with the widened schema, so the commit that first writes a new schema version is the one
that makes its fields visible to every reader. A field whose type would change is refused (``INVALID_RECORD``).
"""

from __future__ import annotations

import pyarrow as pa

from lakelog.errors import InvalidRecord, KafkaError
from lakelog.schema.record_typing import SchemaLookup, type_records
from lakelog.schema.typed_columns import TYPED_COLUMNS, TypeConflict, conform, merge_types, same_type
from lakelog.storage.delta_schema import schema_string, top_level_fields
from lakelog.storage.record_schema import TABLE_SCHEMA
from lakelog.storage.topic_snapshot import TopicSnapshot


def table_types(snap: TopicSnapshot) -> dict[str, pa.DataType]:
    """The typed columns the table schema has, by name."""
    fields = top_level_fields(snap.schema_string)
    return {name: fields[name] for name in TYPED_COLUMNS if name in fields}


def type_batches(topic: str, snap: TopicSnapshot, schemas: SchemaLookup | None, batches, results,
                 indices: list[int]) -> list[int]:
    """Validate and type the batches at ``indices`` (each gets ``typed``); a batch that fails gets its
    ``INVALID_RECORD`` in ``results``. The indices that passed."""
    config = snap.config
    if not (config.schema_validation("key") or config.schema_validation("value")):
        return list(indices)
    types = table_types(snap)
    ok = []
    for i in indices:
        b = batches[i]
        try:
            typed = type_records(b.records, config, schemas, topic=topic, partition=b.partition)
            merged = {name: _merge(types.get(name), arr.type, name, i) for name, arr in typed.items()}
        except KafkaError as e:
            results[i] = e
            continue
        types.update(merged)
        b.typed = typed
        ok.append(i)
    return ok


def _merge(old: pa.DataType | None, new: pa.DataType, name: str, i: int) -> pa.DataType:
    try:
        return merge_types(old, new, name)
    except TypeConflict as e:
        raise InvalidRecord(f"batch {i}: {e}") from None


def commit_types(snap: TopicSnapshot, batches) -> tuple[dict[str, pa.DataType], dict | None]:
    """The typed columns after a commit of ``batches`` (typed by :func:`type_batches`), and the ``metaData``
    action's fields that widen the table to them (None: the schema stays)."""
    before = table_types(snap)
    types = dict(before)
    for b in batches:
        for name, arr in getattr(b, "typed", {}).items():
            types[name] = merge_types(types.get(name), arr.type, name)
    if all(name in before and same_type(before[name], t) for name, t in types.items()):
        return types, None
    out = [pa.field(f.name, types[f.name]) if f.name in types else f for f in table_arrow_fields(snap.schema_string)]
    out += [pa.field(name, types[name]) for name in TYPED_COLUMNS if name in types and name not in before]
    return types, {"schemaString": schema_string(out)}


def table_arrow_fields(schema_string: str | None) -> list[pa.Field]:
    """A table schema's fields as Arrow fields (the created schema for None)."""
    if not schema_string:
        return list(TABLE_SCHEMA)
    declared = {f.name: f for f in TABLE_SCHEMA}
    return [declared.get(name) or pa.field(name, t) for name, t in top_level_fields(schema_string).items()]


def table_arrow_schema(snap: TopicSnapshot, metadata: dict | None = None) -> pa.Schema:
    """The table schema as of ``snap``, or as ``metadata`` (a ``metaData`` action) widens it."""
    return pa.schema(table_arrow_fields(metadata["schemaString"] if metadata else snap.schema_string))


def with_typed_columns(table: pa.Table, parts: list[tuple[dict[str, pa.Array], int]],
                       types: dict[str, pa.DataType]) -> pa.Table:
    """``table`` (the concatenated records of ``parts``: each batch's typed columns and record count) with the
    typed columns any of them has, fitted to ``types``."""
    for name in TYPED_COLUMNS:
        if name not in types or not any(name in typed for typed, _ in parts):
            continue
        t = types[name]
        arrays = [conform(typed[name], t) if name in typed else pa.nulls(n, t) for typed, n in parts]
        table = table.append_column(pa.field(name, t), pa.chunked_array(arrays, t))
    return table


def unify_tables(tables: list[pa.Table]) -> list[pa.Table]:
    """Segment tables read back for a rewrite, their typed columns fitted to one type (a column a table lacks
    is added as nulls), so they concatenate."""
    types: dict[str, pa.DataType] = {}
    for t in tables:
        for name in TYPED_COLUMNS:
            if name in t.column_names:
                types[name] = merge_types(types.get(name), t.schema.field(name).type, name)
    if not types:
        return tables
    out = []
    for t in tables:
        for name, typ in types.items():
            if name in t.column_names:
                col = t.column(name)
                idx = t.column_names.index(name)
                t = t.set_column(idx, pa.field(name, typ),
                                 pa.chunked_array([conform(c, typ) for c in col.chunks], typ))
            else:
                t = t.append_column(pa.field(name, typ), pa.nulls(t.num_rows, typ))
        out.append(t.select([n for n in t.column_names if n not in types] + [n for n in TYPED_COLUMNS if n in types]))
    return out
