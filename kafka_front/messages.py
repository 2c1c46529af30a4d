"""Kafka's message types (from kio) for any supported version: parsing requests, building responses.

Handlers answer with plain values -- dicts for structs, lists for arrays, ints
for error codes -- and :func:`build` turns them into the kio dataclass of the
response's version: fields the version lacks are dropped, fields the handler
left out get kio's default or a zero value.  So one handler serves every
version of its API, and no byte layout is written by hand.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import io
import types
import typing
import uuid

from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0
from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1
from kio.serial import entity_reader, entity_writer

API_VERSIONS_KEY = 18
ZERO_UUID = uuid.UUID(int=0)
_EPOCH = datetime.datetime.fromtimestamp(0, datetime.timezone.utc)


@functools.cache
def request_type(api_key: int, version: int) -> type:
    return load_request_schema(api_key, version)


@functools.cache
def response_type(api_key: int, version: int) -> type:
    return load_response_schema(api_key, version)


def is_flexible(api_key: int, version: int) -> bool:
    return bool(request_type(api_key, version).__flexible__)


def read_header(frame: bytes, flexible: bool):
    """(header, size): v2 (tagged fields) for flexible versions, else v1."""
    return entity_reader(RequestHeaderV2 if flexible else RequestHeaderV1)(frame, 0)


def read_request(api_key: int, version: int, frame: bytes, offset: int):
    """The request body at ``offset``; raises if it is malformed.  Bytes after a well-formed body are ignored,
    as Kafka's broker ignores them: librdkafka 2.x sends a field Metadata v11+ dropped
    (include_cluster_authorized_operations), which a broker reads as an empty tagged field."""
    value, _ = entity_reader(request_type(api_key, version))(frame, offset)
    return value


def encode_response(api_key: int, version: int, correlation_id: int, body) -> bytes:
    """A whole response frame (size prefix, header, body).  ApiVersions always takes header v0 (KIP-511), so a
    client that asked a version we do not know can still read the answer."""
    flexible = api_key != API_VERSIONS_KEY and response_type(api_key, version).__flexible__
    buf = io.BytesIO()
    buf.write(b"\0\0\0\0")
    if flexible:
        entity_writer(ResponseHeaderV1)(buf, ResponseHeaderV1(correlation_id=correlation_id))
    else:
        entity_writer(ResponseHeaderV0)(buf, ResponseHeaderV0(correlation_id=correlation_id))
    entity_writer(type(body))(buf, body)
    out = buf.getbuffer()
    out[0:4] = (len(out) - 4).to_bytes(4, "big")
    return bytes(out)


def build_response(api_key: int, version: int, values: dict):
    """The response dataclass of ``values``; a None where the version has no null is its zero value (what a
    client could be sent in its place: kio cannot write the None)."""
    return build(response_type(api_key, version), values, null_as_zero=True)


@functools.cache
def _hints(cls: type) -> dict[str, object]:
    return typing.get_type_hints(cls)


def _element(tp: object) -> object:
    """``X`` of ``tuple[X, ...]``, of ``X | None``, else ``tp``."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return _element(args[0])
    if origin is tuple:
        return typing.get_args(tp)[0]
    return tp


def _is_array(tp: object) -> bool:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return any(_is_array(a) for a in typing.get_args(tp) if a is not type(None))
    return origin is tuple


def _nullable(tp: object) -> bool:
    return typing.get_origin(tp) in (typing.Union, types.UnionType) and type(None) in typing.get_args(tp)


def _zero(kafka_type: str, tp: object):
    if _nullable(tp):
        return None
    return {"string": "", "bytes": b"", "bool": False, "uuid": ZERO_UUID, "records": None,
            "error_code": ErrorCode.none, "timedelta_i32": datetime.timedelta(0),
            "timedelta_i64": datetime.timedelta(0), "datetime_i64": _EPOCH, "float64": 0.0}.get(kafka_type, 0)


def _convert(kafka_type: str, tp: object, value):
    if value is None:
        return None
    if kafka_type == "error_code":
        return ErrorCode(int(value))
    if kafka_type in ("timedelta_i32", "timedelta_i64") and not isinstance(value, datetime.timedelta):
        return datetime.timedelta(milliseconds=value)
    if kafka_type == "datetime_i64" and isinstance(value, int):
        return None if value < 0 else datetime.datetime.fromtimestamp(value / 1000, datetime.timezone.utc)
    return value


def build(cls: type, values: dict, *, null_as_zero: bool = False):
    """An instance of the kio dataclass ``cls`` from plain ``values`` (see the module doc); ``null_as_zero``: a
    None given for a field the version does not let be null becomes its zero value (else it stays None, as a
    test writing a hostile request wants)."""
    hints = _hints(cls)
    kwargs = {}
    for f in dataclasses.fields(cls):
        tp = hints[f.name]
        kafka_type = f.metadata.get("kafka_type")
        if f.name in values and not (values[f.name] is None and null_as_zero and not _nullable(tp)):
            v = values[f.name]
            if _is_array(tp):
                el = _element(tp)
                if v is None:
                    kwargs[f.name] = None
                elif dataclasses.is_dataclass(el):
                    kwargs[f.name] = tuple(build(el, x, null_as_zero=null_as_zero) for x in v)
                else:
                    kwargs[f.name] = tuple(_zero(kafka_type, el) if x is None and null_as_zero
                                           else _convert(kafka_type, el, x) for x in v)
            elif dataclasses.is_dataclass(_element(tp)):
                kwargs[f.name] = None if v is None else build(_element(tp), v, null_as_zero=null_as_zero)
            else:
                kwargs[f.name] = _convert(kafka_type, tp, v)
        elif f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING:
            continue
        elif _is_array(tp):
            kwargs[f.name] = ()
        elif dataclasses.is_dataclass(_element(tp)):
            kwargs[f.name] = None if _nullable(tp) else build(_element(tp), {}, null_as_zero=null_as_zero)
        else:
            kwargs[f.name] = _zero(kafka_type, tp)
    return cls(**kwargs)
