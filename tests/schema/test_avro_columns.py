"""The vectorized Avro decoder against fastavro, the reference: for random schemas and records, the typed column
holds exactly what fastavro decodes, field by field; and every malformed payload is refused naming its record.
"""

from __future__ import annotations

import io
import json
import math

import fastavro
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from avro_strategies import avro_schemas, typed, values
from lakelog.schema.avro_columns import PADDING
from lakelog.schema.avro_schema import AvroSchema
from lakelog.schema.parsed_schema import RecordDecodeError


def encode(parsed, records) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    blobs = []
    for r in records:
        b = io.BytesIO()
        fastavro.schemaless_writer(b, parsed, r)
        blobs.append(b.getvalue())
    offs = np.cumsum([0] + [len(x) for x in blobs])
    return np.frombuffer(b"".join(blobs) + b"\0" * PADDING, np.uint8), offs[:-1], offs[1:]


def same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_typed_column_equals_fastavro(data):
    schema = data.draw(avro_schemas())
    parsed_ours = AvroSchema(json.dumps(schema))
    columns = parsed_ours.columns()
    assert columns.type is not None, columns.untyped
    records = data.draw(st.lists(values(schema), min_size=1, max_size=12))
    parsed = fastavro.parse_schema(parsed_ours.expanded())
    buf, starts, ends = encode(parsed, records)
    got = columns.decode(buf, starts, ends).to_pylist()
    assert columns.decode(buf, starts, ends, build=False) is None  # validation alone agrees
    for blob_start, blob_end, row in zip(starts, ends, got):
        reference = fastavro.schemaless_reader(io.BytesIO(buf[blob_start:blob_end].tobytes()), parsed, None)
        assert same(row, typed(schema, reference)), (schema, reference, row)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_any_corruption_is_refused_or_decodes_like_fastavro(data):
    """Truncating or flipping bytes of a valid record: either both decoders refuse it, or ours gives exactly
    fastavro's record -- never a silent difference, never a crash."""
    schema = data.draw(avro_schemas())
    ours = AvroSchema(json.dumps(schema))
    parsed = fastavro.parse_schema(ours.expanded())
    record = data.draw(values(schema))
    buf, starts, ends = encode(parsed, [record])
    raw = bytearray(buf[:ends[0]].tobytes())
    if data.draw(st.booleans()) and len(raw) > 1:
        raw = raw[:data.draw(st.integers(0, len(raw) - 1))]
    else:
        i = data.draw(st.integers(0, max(len(raw) - 1, 0)))
        if raw:
            raw[i] ^= data.draw(st.integers(1, 255))
    arr = np.frombuffer(bytes(raw) + b"\0" * PADDING, np.uint8)
    try:
        got = ours.columns().decode(arr, np.array([0]), np.array([len(raw)])).to_pylist()[0]
    except RecordDecodeError as e:
        assert e.row == 0 and e.reason
        return
    stream = io.BytesIO(bytes(raw))
    reference = fastavro.schemaless_reader(stream, parsed, None)
    assert stream.tell() == len(raw)
    assert same(got, typed(schema, reference))


SCHEMA = {"type": "record", "name": "r", "fields": [
    {"name": "s", "type": "string"}, {"name": "a", "type": {"type": "array", "items": "null"}},
    {"name": "u", "type": ["null", "int"]}, {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["X"]}},
    {"name": "b", "type": "boolean"}]}


@pytest.mark.parametrize("payload,reason", [
    (b"\x06ab", "ends inside a string"),  # a 3-byte string with 2 bytes
    (b"\x03", "negative length"),
    (b"\x02\xff\x00\x04\x00\x00", "not UTF-8"),
    (b"\x00\x80\x80\x80\x80\x80\x80\x80\x80\x40", "items that take no bytes"),  # 2^62 null items
    (b"\x00\x00\x04", "union branch outside"),
    (b"\x00\x00\x00\x02", "enum index outside"),
    (b"\x00\x00\x00\x00\x02", "boolean byte other than"),
    (b"\x00\x00\x00\x00\x01\x00", "trailing bytes"),
    (b"\x00\x00\x00\x00", "ends inside a boolean"),
    (b"\xff" * 11, "beyond 64 bits"),
])
def test_malformed_payloads_are_refused(payload, reason):
    cols = AvroSchema(json.dumps(SCHEMA)).columns()
    good = b"\x02a\x00\x00\x00\x01"
    data = good + payload
    buf = np.frombuffer(data + b"\0" * PADDING, np.uint8)
    with pytest.raises(RecordDecodeError) as e:
        cols.decode(buf, np.array([0, len(good)]), np.array([len(good), len(data)]), build=False)
    assert e.value.row == 1 and reason in e.value.reason, e.value.reason


def test_recursive_schemas_validate_but_are_not_typed():
    linked = {"type": "record", "name": "Node", "fields": [{"name": "v", "type": "int"},
                                                            {"name": "next", "type": ["null", "Node"]}]}
    ours = AvroSchema(json.dumps(linked))
    assert ours.columns().type is None and "contains itself" in ours.columns().untyped
    parsed = fastavro.parse_schema(ours.expanded())
    buf, starts, ends = encode(parsed, [{"v": 1, "next": {"v": 2, "next": None}}])
    assert ours.columns().decode(buf, starts, ends, build=False) is None
    deep = b"\x02\x02" * 200 + b"\x02\x00"  # 200 levels: deeper than lakelog decodes
    with pytest.raises(RecordDecodeError, match="nested deeper"):
        ours.columns().decode(np.frombuffer(deep + b"\0" * PADDING, np.uint8), np.array([0]), np.array([len(deep)]),
                              build=False)
