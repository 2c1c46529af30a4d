"""Avro schemas: parsing (with references), identity, and Avro's schema-resolution compatibility.

Parsing and the compatibility rules are the ``avro`` package's (Apache Avro's Python port of Java's
``SchemaCompatibility``, the rules Confluent's registry applies); lakelog adds only the bounds of
:mod:`~lakelog.schema.schema_limits` and the way references become named types.
"""

from __future__ import annotations

import json
import warnings
from typing import Mapping

from avro.compatibility import ReaderWriterCompatibilityChecker, SchemaCompatibilityType
from avro.errors import AvroException, IgnoredLogicalType
from avro.name import Names
from avro.schema import NamedSchema, Schema, make_avsc_object

from lakelog.schema.parsed_schema import AVRO, ParsedSchema, SchemaReference, load_json
from lakelog.schema.schema_errors import InvalidSchema
from lakelog.schema.schema_limits import MAX_ENUM_SYMBOLS, MAX_FIELDS, MAX_UNION_BRANCHES

# Avro's rule: an unknown or malformed logical type is ignored and the underlying type used. The avro package
# warns each time; lakelog maps the logical types it knows itself (avro_columns.py).
warnings.filterwarnings("ignore", category=IgnoredLogicalType)


class AvroSchema(ParsedSchema):
    """An Avro schema; ``dependencies`` maps each reference's name to its parsed schema (whose named types this
    one may use by name)."""

    schema_type = AVRO

    def __init__(self, raw: str, references: tuple[SchemaReference, ...] = (),
                 dependencies: Mapping[str, ParsedSchema] | None = None) -> None:
        self.raw = raw
        self.references = tuple(references)
        self.doc = load_json(raw)
        _check_bounds(self.doc)
        deps = [d for d in (dependencies or {}).values()]
        for d in deps:
            if not isinstance(d, AvroSchema):
                raise InvalidSchema(f"an Avro schema can reference only Avro schemas, not {d.schema_type}")
        self._deps = deps
        names = Names()
        _define(deps, names, set())
        self._dependency_names = dict(names.names)
        try:
            self.schema: Schema = make_avsc_object(self.doc, names)
        except (AvroException, TypeError, ValueError, KeyError, AttributeError, RecursionError) as e:
            raise InvalidSchema(f"invalid Avro schema: {_message(e)}") from None
        seeded = Names()
        seeded.names = dict(self._dependency_names)
        self._canonical = json.dumps(self.schema.to_json(seeded), separators=(",", ":"))

    @property
    def canonical(self) -> str:
        return self._canonical

    def expanded(self) -> dict | list | str:
        """The schema as JSON with every named type defined where first used (self-contained, as fastavro
        takes it)."""
        return self.schema.to_json(Names())

    def record_names(self) -> list[str]:
        s = self.schema
        return [s.fullname] if isinstance(s, NamedSchema) else [s.type]

    def _compile_columns(self):
        from lakelog.schema.avro_columns import AvroColumns

        return AvroColumns(self.schema)

    def incompatibilities(self, writer: ParsedSchema) -> list[str]:
        if not isinstance(writer, AvroSchema):
            return [f"a {writer.schema_type} schema cannot be read as Avro"]
        result = ReaderWriterCompatibilityChecker().get_compatibility(self.schema, writer.schema)
        if result.compatibility is SchemaCompatibilityType.compatible:
            return []
        kinds = [str(getattr(i, "name", i)).upper() for i in result.incompatibilities] or ["INCOMPATIBLE"]
        messages = sorted(result.messages) or ["incompatible"]
        locations = sorted(result.locations)
        return [f"{{errorType:'{kind}', description:'{msg}', location:'{loc}'}}"
                for kind, msg, loc in zip(kinds, messages, locations + [""] * len(messages))]


def _define(deps: list, names: Names, seen: set[int]) -> None:
    """Add every dependency's named types (theirs first) to ``names``, each schema once."""
    for dep in deps:
        if id(dep) in seen:
            continue
        seen.add(id(dep))
        _define(dep._deps, names, seen)
        try:
            make_avsc_object(dep.doc, names)
        except AvroException as e:
            if "already in use" not in str(e):  # the same type reached through two references
                raise InvalidSchema(f"invalid Avro reference: {_message(e)}") from None


def _check_bounds(doc) -> None:
    """Count fields, enum symbols and union branches without recursion (the text's nesting is bounded already)."""
    fields = 0
    stack = [doc]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            if len(node) > MAX_UNION_BRANCHES:
                raise InvalidSchema(f"a union of {len(node)} branches; lakelog accepts up to {MAX_UNION_BRANCHES}")
            stack.extend(node)
        elif isinstance(node, dict):
            kind = node.get("type")
            if kind == "enum" and isinstance(node.get("symbols"), list) and len(node["symbols"]) > MAX_ENUM_SYMBOLS:
                raise InvalidSchema(f"enum {node.get('name')!r} has {len(node['symbols'])} symbols; lakelog accepts "
                                    f"up to {MAX_ENUM_SYMBOLS}")
            if kind in ("record", "error") and isinstance(node.get("fields"), list):
                fields += len(node["fields"])
                if fields > MAX_FIELDS:
                    raise InvalidSchema(f"the schema has more than {MAX_FIELDS} fields")
                stack.extend(f.get("type") for f in node["fields"] if isinstance(f, dict))
            for key in ("type", "items", "values"):
                if key in node and not isinstance(node[key], str):
                    stack.append(node[key])


def _message(e: Exception) -> str:
    return " ".join(str(e).split())[:500]
