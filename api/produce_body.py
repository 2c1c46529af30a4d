"""The JSON produce bodies: their types, their decoder and their JSON schema (msgspec).

A produce request carries thousands of records, so its body is decoded and
validated in one pass of msgspec's C decoder into slotted structs, which profiled
cheaper than pydantic's TypeAdapter doing the same checks.  The same structs give the OpenAPI document its ``ProduceBody``
schema, so the documented and the enforced body cannot drift apart.

Two forms, told apart as Kafka clients never have to: a body whose top level
has ``batches`` is the idempotent form, any other the simple form.  Unknown
fields are refused in both (``additionalProperties: false``).  The structs are
untracked by the garbage collector (``gc=False``): decoded JSON holds no cycles,
and a thousand tracked objects per request would trigger collections.
"""

from __future__ import annotations

from typing import Annotated, Literal, Union

import msgspec

from api.schemas import INT32_MAX, INT64_MAX

Int32 = Annotated[int, msgspec.Meta(ge=0, le=INT32_MAX)]
Int64 = Annotated[int, msgspec.Meta(ge=0, le=INT64_MAX)]
Epoch = Annotated[int, msgspec.Meta(ge=0, le=32767)]
Encoding = Literal["utf8", "base64"]


class HeaderIn(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """A record header: ``key`` text, ``value`` in the request's encoding (or null)."""

    key: str
    value: Union[str, None] = None


class RecordIn(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """A record of an idempotent batch (its partition is the batch's)."""

    key: Union[str, None] = None
    value: Union[str, None] = None
    headers: Union[list[HeaderIn], None] = None
    timestamp: Union[Int64, None] = None


class SimpleRecordIn(RecordIn, forbid_unknown_fields=True, gc=False):
    """A record of the simple form; without ``partition`` the server partitions it."""

    partition: Union[Int32, None] = None


class SimpleProduce(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """Records the server partitions: explicit partition, else murmur2(key), else sticky."""

    records: list[SimpleRecordIn]
    encoding: Encoding = "utf8"


class ProducerBatchIn(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    partition: Int32
    base_sequence: Int32
    records: list[RecordIn]


class IdempotentProduce(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """Batches of an idempotent producer (from ``POST /v1/producers``), one sequence range each."""

    producer_id: Int64
    producer_epoch: Epoch
    batches: list[ProducerBatchIn]
    encoding: Encoding = "utf8"


_SIMPLE = msgspec.json.Decoder(SimpleProduce)
_IDEMPOTENT = msgspec.json.Decoder(IdempotentProduce)


class MalformedBody(ValueError):
    """The body is not JSON, or not a produce body; the message says where."""


# msgspec's own errors, and what it raises for bytes that are not UTF-8 or nest deeper than it recurses.
_UNDECODABLE = (msgspec.DecodeError, UnicodeDecodeError, RecursionError)


def decode_produce(body: bytes) -> SimpleProduce | IdempotentProduce:
    """The validated body; raises :class:`MalformedBody` naming the first problem and its JSON path."""
    try:
        return _SIMPLE.decode(body)  # the common form first: an idempotent body fails fast, at its first field
    except _UNDECODABLE as simple_error:
        try:
            return _IDEMPOTENT.decode(body)
        except _UNDECODABLE as idempotent_error:
            e = idempotent_error if _is_idempotent_form(body) else simple_error
            raise MalformedBody(f"malformed produce request: {_describe(e)}") from None


def _describe(e: Exception) -> str:
    if isinstance(e, UnicodeDecodeError):
        return f"the body is not UTF-8 (byte {e.start})"
    if isinstance(e, RecursionError):
        return "the body nests deeper than a produce request can"
    return str(e)


def _is_idempotent_form(body: bytes) -> bool:
    try:
        top = msgspec.json.decode(body)
    except _UNDECODABLE:
        return False
    return isinstance(top, dict) and "batches" in top


def openapi_components() -> dict[str, dict]:
    """JSON schemas for the OpenAPI document: ``ProduceBody`` (either form) and the structs it refers to."""
    (simple, idempotent), components = msgspec.json.schema_components(
        [SimpleProduce, IdempotentProduce], ref_template="#/components/schemas/{name}")
    components["ProduceBody"] = {"anyOf": [simple, idempotent],
                                 "description": "The simple form, or the idempotent form (a top-level `batches`)."}
    return components
