"""One entry point for every format: a schema's text, type and resolved references to its :class:`ParsedSchema`."""

from __future__ import annotations

from typing import Mapping

from lakelog.schema.parsed_schema import AVRO, JSON, PROTOBUF, SCHEMA_TYPES, ParsedSchema, SchemaReference
from lakelog.schema.schema_errors import InvalidSchema


def parse_schema(schema_type: str, text: str, references: tuple[SchemaReference, ...] = (),
                 dependencies: Mapping[str, ParsedSchema] | None = None) -> ParsedSchema:
    """Parse and check ``text`` as ``schema_type`` (``42201`` if it is not a valid schema of that type);
    ``dependencies``: each reference's name -> its parsed schema."""
    if schema_type not in SCHEMA_TYPES:
        raise InvalidSchema(f"unknown schema type {schema_type!r}; the types are {', '.join(SCHEMA_TYPES)}")
    if schema_type == AVRO:
        from lakelog.schema.avro_schema import AvroSchema

        return AvroSchema(text, references, dependencies)
    if schema_type == JSON:
        from lakelog.schema.json_schema import JsonSchema

        return JsonSchema(text, references, dependencies)
    assert schema_type == PROTOBUF
    from lakelog.schema.protobuf_schema import ProtobufSchema

    return ProtobufSchema(text, references, dependencies)
