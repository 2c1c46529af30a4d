"""JSON Schemas: parsing (drafts 4 to 2020-12, references by name), record validation, and typed columns.

The schema is checked against its draft's meta-schema by ``jsonschema``; records are validated by
``jsonschema_rs`` with linear-time regular expressions, so a ``pattern`` cannot be made to backtrack for minutes
on a hostile value (Python's ``re`` can). A reference's ``name`` is the URI its ``$ref`` uses
(``{"$ref": "customer.json"}``), as Confluent resolves them.

**Typed columns** keep what a Delta type can say and nothing it cannot: ``object`` with ``properties`` is a
struct of those properties (others stay in the bytes; names Delta cannot hold -- containing `` ,;{}()\\n\\t=``
-- or repeating one case-insensitively are left out), ``object`` with only ``additionalProperties`` a map,
``array`` with one ``items`` schema a list, ``string`` string, ``integer`` long, ``number`` double,
``boolean`` boolean, ``["T", "null"]`` and ``oneOf``/``anyOf`` of one type and null that type, ``integer`` with
``number`` double; anything else -- several types, tuples, ``true``, an ``enum`` of non-strings, a recursive
``$ref``, nesting past :data:`~lakelog.schema.schema_limits.MAX_NESTING` -- the value's JSON text as a string.
"""

from __future__ import annotations

import json
import re
from typing import Mapping

import numpy as np
import pyarrow as pa

from lakelog.schema.json_compatibility import incompatibilities
from lakelog.schema.parsed_schema import (JSON, ParsedSchema, RecordDecodeError, SchemaReference, Untypeable,
                                          load_json)
from lakelog.schema.schema_errors import InvalidSchema
from lakelog.schema.schema_limits import MAX_NESTING, MAX_TYPED_LEAVES

#: characters a Delta column name cannot hold without column mapping (Delta's ``checkFieldNames``)
_BAD_NAME = re.compile(r"[ ,;{}()\n\t=]")
_INT64 = (-(2**63), 2**63 - 1)
ROOT = "urn:lakelog:schema"  # the base URI of a schema without an $id


class JsonSchema(ParsedSchema):
    """A JSON Schema; ``dependencies`` maps each reference's name (a URI) to its parsed schema."""

    schema_type = JSON

    def __init__(self, raw: str, references: tuple[SchemaReference, ...] = (),
                 dependencies: Mapping[str, ParsedSchema] | None = None) -> None:
        import jsonschema
        import jsonschema_rs
        from referencing import Registry, Resource
        from referencing.jsonschema import DRAFT7

        self.raw = raw
        self.references = tuple(references)
        self.doc = load_json(raw)
        if not isinstance(self.doc, (dict, bool)):
            raise InvalidSchema("a JSON Schema is an object or a boolean")
        resources: dict[str, object] = {}
        for name, dep in (dependencies or {}).items():
            if not isinstance(dep, JsonSchema):
                raise InvalidSchema(f"a JSON Schema can reference only JSON Schemas, not {dep.schema_type}")
            resources.update(dep.resources)
            resources[name] = dep.doc
        self.resources = resources
        cls = jsonschema.validators.validator_for(self.doc, default=jsonschema.Draft7Validator)
        try:
            cls.check_schema(self.doc)
        except jsonschema.SchemaError as e:
            raise InvalidSchema(f"invalid JSON Schema: {e.message}") from None
        except RecursionError:
            raise InvalidSchema("invalid JSON Schema: nested too deeply") from None
        root_uri = self.doc.get("$id") if isinstance(self.doc, dict) and isinstance(self.doc.get("$id"), str) else ROOT
        registry = Registry().with_resources(
            (uri, Resource.from_contents(doc, default_specification=DRAFT7)) for uri, doc in resources.items())
        try:
            registry = registry.with_resource(root_uri, Resource.from_contents(self.doc, default_specification=DRAFT7))
        except Exception as e:  # referencing's errors on a malformed $id or $schema
            raise InvalidSchema(f"invalid JSON Schema: {e}") from None
        self.root = registry.resolver(base_uri=root_uri)
        _check_refs(self)
        try:
            draft = (jsonschema_rs.validator_for if isinstance(self.doc, dict) and "$schema" in self.doc
                     else jsonschema_rs.Draft7Validator)  # Confluent's default draft
            self._validator = draft(
                self.doc, registry=jsonschema_rs.Registry(list(resources.items())) if resources else None,
                pattern_options=jsonschema_rs.RegexOptions(), offline=True)
        except (ValueError, jsonschema_rs.ReferencingError) as e:
            raise InvalidSchema(f"invalid JSON Schema: {' '.join(str(e).split())[:300]}") from None
        self._canonical = json.dumps(self.doc, separators=(",", ":"), ensure_ascii=False)

    @property
    def canonical(self) -> str:
        return self._canonical

    def record_names(self) -> list[str]:
        title = self.doc.get("title") if isinstance(self.doc, dict) else None
        return [title] if isinstance(title, str) and title else ["JsonSchema"]

    def incompatibilities(self, writer: ParsedSchema) -> list[str]:
        if not isinstance(writer, JsonSchema):
            return [f"a {writer.schema_type} schema cannot be read as JSON Schema"]
        return incompatibilities(self, writer)

    def validation_error(self, instance) -> str | None:
        """Why ``instance`` does not match, or None."""
        for error in self._validator.iter_errors(instance):
            where = "/".join(str(p) for p in error.instance_path)
            return f"{error.message}" + (f" at /{where}" if where else "")
        return None

    def resolve(self, node, resolver):
        """``node`` with its ``$ref`` followed (None if it does not resolve), and the resolver of where it led."""
        from referencing.exceptions import Unresolvable

        ref = node.get("$ref") if isinstance(node, dict) else None
        if not isinstance(ref, str):
            return node, resolver
        try:
            resolved = resolver.lookup(ref)
        except (Unresolvable, ValueError, TypeError):
            return None, resolver
        return resolved.contents, resolved.resolver

    def _compile_columns(self):
        return JsonColumns(self)


def _check_refs(schema: JsonSchema) -> None:
    """Every ``$ref`` of the schema resolves (to itself, its references or a local pointer)."""
    stack = [(schema.doc, schema.root)]
    seen = 0
    while stack:
        node, base = stack.pop()
        seen += 1
        if seen > 100_000:
            raise InvalidSchema("the JSON Schema has more than 100000 subschemas")
        if isinstance(node, dict):
            if isinstance(node.get("$ref"), str):
                target, _ = schema.resolve(node, base)
                if target is None:
                    raise InvalidSchema(f"invalid JSON Schema: the reference {node['$ref']!r} does not resolve")
            stack.extend((v, base) for k, v in node.items() if k not in ("enum", "const", "default", "examples"))
        elif isinstance(node, list):
            stack.extend((v, base) for v in node)


# -- typed columns ----------------------------------------------------------------------------------------
class _Plan:
    """How one subschema becomes a column: ``kind`` in string, long, double, boolean, text (JSON text), struct
    (``fields``), list (``item``) or map (``item``)."""

    __slots__ = ("kind", "fields", "item", "type", "leaves")

    def __init__(self, kind: str, fields=None, item=None) -> None:
        self.kind, self.fields, self.item = kind, fields, item
        if kind == "struct":
            self.type = pa.struct([pa.field(n, p.type) for n, p in fields])
            self.leaves = sum(p.leaves for _, p in fields)
        elif kind == "list":
            self.type, self.leaves = pa.list_(item.type), item.leaves
        elif kind == "map":
            self.type, self.leaves = pa.map_(pa.string(), item.type), item.leaves + 1
        else:
            self.type = {"string": pa.string(), "text": pa.string(), "long": pa.int64(), "double": pa.float64(),
                         "boolean": pa.bool_()}[kind]
            self.leaves = 1


_TEXT = _Plan("text")


class _Planner:
    def __init__(self, schema: JsonSchema) -> None:
        self.schema = schema
        self.active: set[int] = set()
        self.memo: dict[int, _Plan] = {}

    def plan(self, node, base: str, depth: int) -> _Plan:
        if depth > MAX_NESTING:
            return _TEXT
        if isinstance(node, dict) and "$ref" in node:
            target, base = self.schema.resolve(node, base)
            if target is None or id(target) in self.active:  # unresolvable, or recursive: its JSON text
                return _TEXT
            node = target
        if not isinstance(node, dict):
            return _TEXT
        key = id(node)
        if key in self.memo:
            return self.memo[key]
        if key in self.active:
            return _TEXT
        self.active.add(key)
        try:
            out = self._plan(node, base, depth)
        finally:
            self.active.discard(key)
        if out.leaves > MAX_TYPED_LEAVES:
            raise Untypeable(f"it expands to more than {MAX_TYPED_LEAVES} columns")
        self.memo[key] = out
        return out

    def _plan(self, node: dict, base: str, depth: int) -> _Plan:
        for combiner in ("oneOf", "anyOf"):
            if isinstance(node.get(combiner), list):
                branches = [b for b in node[combiner] if not _is_null_schema(b)]
                plans = [self.plan(b, base, depth + 1) for b in branches]
                if len(plans) == 1 and len(node) == 1:
                    return plans[0]
                if plans and all(p.kind == plans[0].kind and p.type == plans[0].type for p in plans) and len(node) == 1:
                    return plans[0]
                return _TEXT
        if isinstance(node.get("allOf"), list):
            return _TEXT if len(node["allOf"]) != 1 else self.plan(node["allOf"][0], base, depth + 1)
        types = node.get("type")
        if types is None:
            if "properties" in node or "additionalProperties" in node:
                types = "object"
            elif "items" in node:
                types = "array"
            elif isinstance(node.get("enum"), list) and node["enum"] and all(isinstance(e, str) for e in node["enum"]):
                types = "string"
            elif isinstance(node.get("const"), str):
                types = "string"
            else:
                return _TEXT
        if isinstance(types, list):
            kinds = [t for t in types if t != "null"]
            if set(kinds) == {"integer", "number"}:
                kinds = ["number"]
            if len(kinds) != 1:
                return _TEXT
            types = kinds[0]
        if types == "string":
            return _Plan("string")
        if types == "integer":
            return _Plan("long")
        if types == "number":
            return _Plan("double")
        if types == "boolean":
            return _Plan("boolean")
        if types == "array":
            items = node.get("items")
            return _Plan("list", item=self.plan(items, base, depth + 1)) if isinstance(items, dict) else _TEXT
        if types == "object":
            props = node.get("properties")
            if isinstance(props, dict) and props:
                fields, seen = [], set()
                for name, sub in props.items():
                    if _BAD_NAME.search(name) or not name or name.lower() in seen:
                        continue
                    seen.add(name.lower())
                    fields.append((name, self.plan(sub, base, depth + 1)))
                return _Plan("struct", fields=fields) if fields else _TEXT
            extra = node.get("additionalProperties")
            if isinstance(extra, dict) and extra:
                return _Plan("map", item=self.plan(extra, base, depth + 1))
        return _TEXT


def _is_null_schema(node) -> bool:
    return isinstance(node, dict) and node.get("type") == "null" and len(node) == 1


def _convert(plan: _Plan, value, row: int):
    """``value`` (parsed JSON) as the Python value of ``plan``'s Arrow type."""
    if value is None:
        return None
    kind = plan.kind
    if kind == "text":
        return value if isinstance(value, str) and plan is not _TEXT else json.dumps(value, separators=(",", ":"),
                                                                                     ensure_ascii=False)
    if kind == "string":
        return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    if kind == "long":
        if isinstance(value, bool) or not isinstance(value, (int, float)) or (isinstance(value, float)
                                                                             and not value.is_integer()):
            raise RecordDecodeError(row, f"{value!r} is not an integer")
        value = int(value)
        if not _INT64[0] <= value <= _INT64[1]:
            raise RecordDecodeError(row, f"the integer {value} does not fit 64 bits")
        return value
    if kind == "double":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise RecordDecodeError(row, f"{value!r} is not a number")
        try:
            return float(value)
        except OverflowError:
            raise RecordDecodeError(row, f"the number {value} does not fit a double") from None
    if kind == "boolean":
        if not isinstance(value, bool):
            raise RecordDecodeError(row, f"{value!r} is not a boolean")
        return value
    if kind == "struct":
        if not isinstance(value, dict):
            raise RecordDecodeError(row, "a value that is not an object where the schema has one")
        return {name: _convert(p, value.get(name), row) for name, p in plan.fields}
    if kind == "list":
        if not isinstance(value, list):
            raise RecordDecodeError(row, "a value that is not an array where the schema has one")
        return [_convert(plan.item, v, row) for v in value]
    if not isinstance(value, dict):
        raise RecordDecodeError(row, "a value that is not an object where the schema has one")
    return [(k, _convert(plan.item, v, row)) for k, v in value.items()]


class JsonColumns:
    """A JSON Schema compiled for a batch of records: JSON text in, validated, out as :attr:`type`."""

    def __init__(self, schema: JsonSchema) -> None:
        self.schema = schema
        self.untyped: str | None = None
        try:
            self.plan = _Planner(schema).plan(schema.doc, schema.root, 0) if schema.doc is not True else _TEXT
            self.type = self.plan.type
        except Untypeable as e:
            self.plan, self.type, self.untyped = None, None, str(e)

    def decode(self, data: np.ndarray, starts: np.ndarray, ends: np.ndarray, *, build: bool = True):
        values = []
        raw = data.tobytes() if len(starts) else b""
        for row, (s, e) in enumerate(zip(starts.tolist(), ends.tolist())):
            try:
                value = json.loads(raw[s:e])
            except (ValueError, RecursionError):
                raise RecordDecodeError(row, "not valid JSON (UTF-8)") from None
            problem = self.schema.validation_error(value)
            if problem is not None:
                raise RecordDecodeError(row, problem)
            values.append(value)
        if not build:
            return None
        if self.plan is None:
            raise Untypeable(self.untyped or "no Delta type")
        converted = [_convert(self.plan, v, row) for row, v in enumerate(values)]
        try:
            return pa.array(converted, self.type)
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as e:
            raise RecordDecodeError(0, f"a value its typed column cannot hold: {e}") from None
