"""Validating a batch's keys and values against the Schema Registry, and typing them: the one function every
produce path meets (the committer calls it for each batch it appends).

A key or value of a topic with ``confluent.<side>.schema.validation`` (or ``lakelog.<side>.schema.columns``) set
must be in Confluent's wire format -- magic byte 0, a 4-byte big-endian schema id, the payload (for Protobuf,
message indexes first) -- naming a schema registered under the subject the topic's subject name strategy gives
(``<topic>-<side>`` by default), and decode by it. A value that is plain JSON (no magic byte) is taken when
that subject's latest version is a JSON Schema, and checked against it. Null keys and values (tombstones)
pass. Anything else refuses the whole batch with ``INVALID_RECORD`` naming the record, as a broker refuses a
batch; nothing of it is written.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
import pyarrow as pa

from lakelog.errors import InvalidRecord
from lakelog.schema.parsed_schema import JSON, ParsedSchema, RecordDecodeError, Untypeable
from lakelog.schema.typed_columns import KEY_COLUMN, VALUE_COLUMN, TypeConflict, conform, merge_types
from lakelog.storage.topic_config import TopicConfig

MAGIC = 0
HEADER = 5  # magic byte + schema id
PADDING = 16
COLUMNS = {"key": KEY_COLUMN, "value": VALUE_COLUMN}


class SchemaLookup(Protocol):
    """What typing needs of the Schema Registry (:class:`lakelog.schema_registry.schema_registry.SchemaRegistry`)."""

    def schema_by_id(self, schema_id: int) -> ParsedSchema | None:
        """The schema with this id, or None if no schema has it."""

    def subjects_of(self, schema_id: int) -> set[str]:
        """Subjects with a version (live or soft-deleted) holding this id."""

    def latest_schema(self, subject: str) -> tuple[int, ParsedSchema] | None:
        """The id and schema of the subject's latest live version, or None."""


def type_records(records: pa.Table, config: TopicConfig, schemas: SchemaLookup | None, *, topic: str,
                 partition: int) -> dict[str, pa.Array]:
    """Check the batch's keys and values as the topic's configs ask; the typed columns to write beside them
    (``key_record``, ``value_record``: present for the sides that materialise, and that hold a non-null
    record). Raises :class:`~lakelog.errors.InvalidRecord`."""
    out: dict[str, pa.Array] = {}
    for side in ("key", "value"):
        if not config.schema_validation(side):
            continue
        if schemas is None:
            raise InvalidRecord(f"topic {topic} validates its {side}s against the Schema Registry, which this "
                                f"writer does not have")
        typed = _type_side(records.column(side), side, config, schemas, topic, partition,
                           build=config.schema_columns(side))
        if typed is not None:
            out[COLUMNS[side]] = typed
    return out


def _type_side(column, side: str, config: TopicConfig, schemas: SchemaLookup, topic: str, partition: int, *,
               build: bool) -> pa.Array | None:
    col = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    n = len(col)
    where = f"topic {topic} partition {partition}"
    valid = np.ones(n, bool) if not col.null_count else ~np.asarray(col.is_null().to_numpy(zero_copy_only=False))
    if not valid.any():
        return None
    buffers = col.buffers()
    offsets = np.frombuffer(buffers[1], dtype=np.int32, count=n + 1, offset=col.offset * 4).astype(np.int64)
    raw = np.frombuffer(buffers[2], dtype=np.uint8) if buffers[2] is not None else np.zeros(0, np.uint8)
    data = np.concatenate([raw[:offsets[-1]], np.zeros(PADDING, np.uint8)])
    starts, ends = offsets[:-1], offsets[1:]
    framed = valid & (ends - starts >= HEADER) & (data[starts] == MAGIC)
    ids = ((data[starts + 1].astype(np.int64) << 24) | (data[starts + 2].astype(np.int64) << 16)
           | (data[starts + 3].astype(np.int64) << 8) | data[starts + 4].astype(np.int64))
    strategy = config.subject_name_strategy(side)
    parts: list[tuple[np.ndarray, pa.Array | None, int]] = []
    for schema_id in np.unique(ids[framed]).tolist():
        rows = np.flatnonzero(framed & (ids == schema_id))
        parsed = schemas.schema_by_id(schema_id)
        if parsed is None:
            raise InvalidRecord(f"record {rows[0]} for {where}: its {side} names schema id {schema_id}, which the "
                                f"Schema Registry does not have")
        subject = _subject(strategy, topic, side, parsed, schemas.subjects_of(schema_id))
        if subject is None:
            raise InvalidRecord(f"record {rows[0]} for {where}: schema id {schema_id} of its {side} is not "
                                f"registered under the subject {strategy} gives ({_expected(strategy, topic, side)})")
        parts.append((rows, _decode(parsed, data, starts[rows] + HEADER, ends[rows], rows, schema_id, side, where,
                                    build), schema_id))
    plain = valid & ~framed
    if plain.any():
        rows = np.flatnonzero(plain)
        latest = schemas.latest_schema(f"{topic}-{side}") if strategy == "TopicNameStrategy" else None
        if latest is None or latest[1].schema_type != JSON:
            raise InvalidRecord(f"record {rows[0]} for {where}: its {side} is not in the Schema Registry's wire "
                                f"format (magic byte 0 and a schema id)")
        schema_id, parsed = latest
        parts.append((rows, _decode(parsed, data, starts[rows], ends[rows], rows, schema_id, side, where, build),
                      schema_id))
    if not build:
        return None
    merged = None
    for rows, arr, schema_id in parts:
        try:
            merged = merge_types(merged, arr.type, COLUMNS[side])
        except TypeConflict as e:
            raise InvalidRecord(f"record {rows[0]} for {where}: schema id {schema_id} cannot share the batch's "
                                f"{COLUMNS[side]}: {e}") from None
    return scatter_rows([(rows, conform(arr, merged)) for rows, arr, _ in parts], n, merged)


def _decode(parsed: ParsedSchema, data: np.ndarray, starts: np.ndarray, ends: np.ndarray, rows: np.ndarray,
            schema_id: int, side: str, where: str, build: bool) -> pa.Array | None:
    columns = parsed.columns()
    if build and columns.type is None:
        raise InvalidRecord(f"record {rows[0]} for {where}: schema id {schema_id} of its {side} cannot be written "
                            f"as typed columns ({columns.untyped}); validate only, or use another schema")
    try:
        return columns.decode(data, starts, ends, build=build)
    except RecordDecodeError as e:
        raise InvalidRecord(f"record {rows[e.row]} for {where}: its {side} does not match schema id {schema_id}: "
                            f"{e.reason}") from None
    except Untypeable as e:
        raise InvalidRecord(f"record {rows[0]} for {where}: schema id {schema_id} of its {side} cannot be typed: "
                            f"{e}") from None


def _subject(strategy: str, topic: str, side: str, parsed: ParsedSchema, subjects: set[str]) -> str | None:
    """The subject the strategy names for this record, if the id is registered under it."""
    if strategy == "TopicNameStrategy":
        candidates = [f"{topic}-{side}"]
    elif strategy == "RecordNameStrategy":
        candidates = parsed.record_names()
    else:
        candidates = [f"{topic}-{name}" for name in parsed.record_names()]
    return next((s for s in candidates if s in subjects), None)


def _expected(strategy: str, topic: str, side: str) -> str:
    return {"TopicNameStrategy": f"{topic}-{side}", "RecordNameStrategy": "the record's full name"}.get(
        strategy, f"{topic}-<the record's full name>")


def scatter_rows(parts: list[tuple[np.ndarray, pa.Array]], n: int, type_: pa.DataType) -> pa.Array:
    """An array of ``n`` values of ``type_``: each part's values at its rows, null elsewhere."""
    if len(parts) == 1 and len(parts[0][0]) == n:
        return parts[0][1]
    idx = np.full(n, -1, dtype=np.int64)
    arrays, base = [], 0
    for rows, arr in parts:
        idx[rows] = np.arange(base, base + len(rows))
        arrays.append(arr)
        base += len(rows)
    arrays.append(pa.nulls(1, type_))
    idx[idx < 0] = base
    return pa.concat_arrays(arrays).take(pa.array(idx))
