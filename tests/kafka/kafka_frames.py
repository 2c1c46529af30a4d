"""Kafka request frames for the hostile-input tests and the fuzzer: hypothesis strategies over kio's generated
schemas, byte-level mutations of valid frames, and the crafted frames of the hostile-clients review.

* :func:`request_values` -- plain values (dicts, lists, ints, str, bytes) for any kio request class, the form
  :func:`kafka_front.messages.build` takes;
* :func:`encode_frame` -- a whole frame (size prefix, header v1/v2, body) for (api_key, version, values);
* :func:`mutated` -- a strategy of byte-level mutations of a frame (flips, boundary integers written over
  lengths, varints, truncation, insertion), its size prefix kept true;
* :func:`served_versions` -- every (api_key, version) the listener advertises.
"""

from __future__ import annotations

import dataclasses
import io
import struct
import typing

from hypothesis import strategies as st
from kio.schema.request_header.v1.header import RequestHeader as HeaderV1
from kio.schema.request_header.v2.header import RequestHeader as HeaderV2
from kio.serial import entity_writer

from kafka_front.apis import APIS
from kafka_front.frame_check import field_kind
from kafka_front.messages import build, request_type

_INTS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64, "timedelta_i32": 32, "timedelta_i64": 41}  # ms: exact
_UINTS = {"uint8": 8, "uint16": 16, "uint32": 32, "uint64": 64}
BOUNDARY = [0, 1, -1, 2, 7, 0x7F, 0x80, 0x7FFF, 0x8000, 0xFFFF, 1 << 20, (1 << 31) - 1, -(1 << 31), 4_000_000_000]


def served_versions() -> list[tuple[int, int]]:
    return [(k, v) for k, a in sorted(APIS.items()) for v in range(a.min_version, a.max_version + 1)]


def _primitive(kafka_type: str) -> st.SearchStrategy:
    if kafka_type in _INTS:
        bits = _INTS[kafka_type]
        return st.integers(-(1 << (bits - 1)), (1 << (bits - 1)) - 1) | st.sampled_from([0, 1, -1])
    if kafka_type in _UINTS:
        return st.integers(0, (1 << _UINTS[kafka_type]) - 1)
    if kafka_type == "string":
        return st.text(max_size=12)
    if kafka_type in ("bytes", "records"):
        return st.binary(max_size=40)
    if kafka_type == "bool":
        return st.booleans()
    if kafka_type == "uuid":
        return st.uuids()
    if kafka_type == "error_code":
        return st.sampled_from([0, 1, 3, 35])
    if kafka_type == "float64":
        return st.floats(allow_nan=False)
    if kafka_type == "datetime_i64":
        return st.integers(0, 1 << 41)
    raise AssertionError(f"no strategy for kafka_type {kafka_type!r}")


def request_values(cls: type, depth: int = 0, names: dict[str, st.SearchStrategy] | None = None
                   ) -> st.SearchStrategy:
    """Plain values for the kio dataclass ``cls`` (nulls where its version allows them, arrays of 0-3);
    ``names``: strategies for string fields of these names (a topic or group that exists)."""
    hints = typing.get_type_hints(cls)
    fields = {}
    for f in dataclasses.fields(cls):
        is_array, nullable, element = field_kind(hints[f.name])
        if dataclasses.is_dataclass(element):
            one = request_values(element, depth + 1, names)
        elif names and f.name in names and f.metadata["kafka_type"] == "string":
            one = names[f.name]
        else:
            one = _primitive(f.metadata["kafka_type"])
        value = st.lists(one, max_size=3 if depth < 2 else 1) if is_array else one
        if nullable and (is_array or not dataclasses.is_dataclass(element)) and "tag" not in f.metadata:
            value = st.none() | value
        fields[f.name] = value
    return st.fixed_dictionaries(fields)


def encode_frame(api_key: int, version: int, values: dict, correlation_id: int = 7,
                 client_id: str | None = "fuzz") -> bytes:
    """The whole request frame, size prefix included."""
    cls = request_type(api_key, version)
    buf = io.BytesIO()
    header = HeaderV2 if cls.__flexible__ else HeaderV1
    entity_writer(header)(buf, header(request_api_key=api_key, request_api_version=version,
                                      correlation_id=correlation_id, client_id=client_id))
    entity_writer(cls)(buf, build(cls, values))
    data = buf.getvalue()
    return struct.pack(">i", len(data)) + data


@st.composite
def mutated(draw, frame: bytes) -> bytes:
    """``frame`` with 1-4 byte-level mutations after its 8-byte api key/version head (so the frame still reaches
    the parser of its API and version), the size prefix made true again."""
    body = bytearray(frame[4:])
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "int32", "int16", "varint", "truncate", "insert", "delete"]))
        if len(body) <= 8:
            body += b"\x00"
        at = draw(st.integers(8, len(body) - 1))
        if kind == "flip":
            body[at] ^= 1 << draw(st.integers(0, 7))
        elif kind in ("int32", "int16"):  # an array count or a string/bytes length
            size = 4 if kind == "int32" else 2
            value = draw(st.sampled_from(BOUNDARY)) & ((1 << (8 * size)) - 1)
            at = min(at, len(body) - size)
            body[at:at + size] = value.to_bytes(size, "big")
        elif kind == "varint":  # a compact count or length
            value = draw(st.sampled_from([0, 1, 2, 0x7F, 0x80, 1 << 20, (1 << 32) - 1, (1 << 35) - 1]))
            body[at:at + 1] = uvarint(value)
        elif kind == "truncate":
            del body[max(at, 8):]
        elif kind == "insert":
            body[at:at] = draw(st.binary(min_size=1, max_size=8))
        else:
            del body[at:at + draw(st.integers(1, 4))]
    return struct.pack(">i", len(body)) + bytes(body)


def uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def huge_count_frames() -> dict[str, bytes]:
    """The review's frames that aborted the whole process (finding 1): a Metadata v12 whose topics array
    declares 2**32-1 entries (kio reserved 32 GiB) and a CreateTopics v7 whose broker_ids declare 4e9."""
    metadata = bytearray(encode_frame(3, 12, {"topics": []}))
    head = 4 + 8 + 2 + len("fuzz") + 1  # size, api key/version/correlation, client id, header tagged fields
    metadata[head:head + 1] = uvarint((1 << 32) - 1)  # a compact count: 2**32-2 entries
    metadata[0:4] = struct.pack(">i", len(metadata) - 4)
    create = encode_frame(19, 7, {"topics": [{"name": "t", "num_partitions": -1, "replication_factor": -1,
                                              "assignments": [{"partition_index": 0, "broker_ids": [1]}],
                                              "configs": []}], "timeout": 1000})
    marker = create.index(b"\x02\x00\x00\x00\x01")  # broker_ids: compact count 1+1, then broker 1
    create = create[:marker] + uvarint(4_000_000_001) + create[marker + 1:]  # a compact count: 4e9 entries
    create = struct.pack(">i", len(create) - 4) + create[4:]
    return {"metadata-v12": bytes(metadata), "create-topics-v7": bytes(create)}


def null_array_frames() -> dict[str, bytes]:
    """Finding 8a: DescribeGroups v5 with groups = null, ListOffsets v7 with topics = null."""
    return {"describe-groups-v5": encode_frame(15, 5, {"groups": None}),
            "list-offsets-v7": encode_frame(2, 7, {"replica_id": -1, "topics": None})}

