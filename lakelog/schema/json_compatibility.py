"""JSON Schema compatibility: may a reader schema read every document a writer schema accepts?

No library implements Confluent's JSON Schema rules, so they are written here, by the checks Confluent's
``JsonSchemaDiff`` names (the names appear in the messages), for the keywords a data model uses: types (a
reader's ``number`` reads a writer's ``integer``), string, number, array and object constraints, ``enum``,
``required``, ``properties`` under open and closed content models (``additionalProperties``),
``oneOf``/``anyOf``/``allOf``, ``not``, and ``$ref`` (local, and into references); ``true`` and ``{}`` are
Confluent's empty open object, ``false`` compares only with ``true`` and ``false``, and ``propertyNames`` is not
compared (as Confluent's). The cases of Karapace's test suite (Apache-2.0) are the tests
(tests/schema/test_json_compatibility.py). Keywords outside these (``if``/``then``, ``dependentSchemas``,
``contains``, ``unevaluated*``) are compared for equality: a change to one is reported, never passed silently.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lakelog.schema.json_schema import JsonSchema

_TYPES = ("array", "boolean", "integer", "null", "number", "object", "string")
_OTHER = ("if", "then", "else", "dependencies", "dependentSchemas", "dependentRequired", "contains",
          "minContains", "maxContains", "unevaluatedProperties", "unevaluatedItems", "prefixItems", "const")
_MAX = 64  # nesting of the comparison (schemas are bounded to this depth at parse time)


def incompatibilities(reader: JsonSchema, writer: JsonSchema) -> list[str]:
    """Why ``reader`` cannot read what ``writer`` wrote (empty: it can)."""
    out: list[str] = []
    _Compare(reader, writer, out).compare(reader.doc, reader.root, writer.doc, writer.root, "#", 0)
    return out


class _Compare:
    def __init__(self, reader: JsonSchema, writer: JsonSchema, out: list[str]) -> None:
        self.reader, self.writer, self.out = reader, writer, out
        self.seen: set[tuple[int, int]] = set()

    def report(self, kind: str, path: str, detail: str = "") -> None:
        self.out.append(f"{{errorType:'{kind}', description:'{detail or kind.lower().replace('_', ' ')}', "
                        f"location:'{path}'}}")

    def compare(self, r, r_res, w, w_res, path: str, depth: int) -> None:
        if depth > _MAX:
            return
        if isinstance(r, dict) and "$ref" in r:
            r, r_res = self.reader.resolve(r, r_res)
        if isinstance(w, dict) and "$ref" in w:
            w, w_res = self.writer.resolve(w, w_res)
        if r is None or w is None:
            return self.report("REFERENCE_UNRESOLVED", path)
        pair = (id(r), id(w))
        if pair in self.seen:  # recursive schemas: this pair is being compared further up
            return
        self.seen.add(pair)
        # Confluent's model of the boolean schemas: false accepts nothing and reads only false or true; true
        # (and {}) is the empty open object; a "not" schema compares only with a "not" schema
        if r is False or w is False:
            if not ((r is False or _empty(r)) and (w is False or _empty(w))):
                self.report("TYPE_CHANGED", path, "a false schema compares only with true or false")
            return
        if not isinstance(r, (dict, bool)) or not isinstance(w, (dict, bool)):
            return
        r_not, w_not = _only_not(r), _only_not(w)
        if r_not or w_not:
            if r_not != w_not:
                self.report("NOT_TYPE_CHANGED", path)
            else:  # the reader must exclude no more than the writer did
                self.compare(w["not"], w_res, r["not"], r_res, f"{path}/not", depth + 1)
            return
        if _empty(r):
            if not (_empty(w) or _types(w) <= {"object"}):
                self.report("TYPE_CHANGED", path, f"the type changes from {sorted(_types(w))} to the empty schema")
            return
        if _empty(w):
            w = {"type": "object"}
        if self._combined(r, r_res, w, w_res, path, depth):
            return
        r_types, w_types = _types(r), _types(w)
        widened = {"integer"} if "number" in r_types else set()
        if not w_types <= r_types | widened:
            kind = "TYPE_NARROWED" if r_types & w_types else "TYPE_CHANGED"
            self.report(kind, path, f"the type changes from {sorted(w_types)} to {sorted(r_types)}")
            return
        self._enum(r, w, path)
        if w_types & {"string"}:
            self._bound(r, w, "maxLength", "MAX_LENGTH", path, smaller_is_narrower=True)
            self._bound(r, w, "minLength", "MIN_LENGTH", path, smaller_is_narrower=False)
            if "pattern" in r and r.get("pattern") != w.get("pattern"):
                self.report("PATTERN_ADDED" if "pattern" not in w else "PATTERN_CHANGED", path)
        if w_types & {"integer", "number"}:
            self._bound(r, w, "maximum", "MAXIMUM", path, smaller_is_narrower=True)
            self._bound(r, w, "minimum", "MINIMUM", path, smaller_is_narrower=False)
            self._bound(r, w, "exclusiveMaximum", "EXCLUSIVE_MAXIMUM", path, smaller_is_narrower=True)
            self._bound(r, w, "exclusiveMinimum", "EXCLUSIVE_MINIMUM", path, smaller_is_narrower=False)
            rm, wm = r.get("multipleOf"), w.get("multipleOf")
            if rm is not None and (wm is None or not _divides(rm, wm)):
                self.report("MULTIPLE_OF_ADDED" if wm is None else "MULTIPLE_OF_CHANGED", path)
        if w_types & {"array"}:
            self._array(r, r_res, w, w_res, path, depth)
        if w_types & {"object"}:
            self._object(r, r_res, w, w_res, path, depth)
        for key in _OTHER:
            if key in r and r.get(key) != w.get(key):
                self.report(f"{_snake(key)}_CHANGED", path)

    def _combined(self, r, r_res, w, w_res, path, depth) -> bool:
        """``oneOf``/``anyOf``/``allOf`` on either side; True when it decided the comparison."""
        r_sum = r.get("oneOf") or r.get("anyOf")
        w_sum = w.get("oneOf") or w.get("anyOf")
        if isinstance(w_sum, list):  # every writer branch must be read by a reader branch (or the reader)
            r_branches = r_sum if isinstance(r_sum, list) else [r]
            for i, wb in enumerate(w_sum):
                if not any(self._fits(rb, r_res, wb, w_res, depth) for rb in r_branches):
                    if isinstance(r_sum, list) and len(r_sum) < len(w_sum):
                        self.report("SUM_TYPE_NARROWED", f"{path}/oneOf/{i}")
                    else:
                        self.compare(r_branches[min(i, len(r_branches) - 1)], r_res, wb, w_res,
                                     f"{path}/oneOf/{i}", depth + 1)
            return True
        if isinstance(r_sum, list):  # the writer must fit one reader branch
            if not any(self._fits(rb, r_res, w, w_res, depth) for rb in r_sum):
                self.report("COMBINED_TYPE_SUBSCHEMAS_CHANGED", path)
            return True
        r_all, w_all = r.get("allOf"), w.get("allOf")
        if isinstance(r_all, list):  # the writer must fit every reader branch
            if isinstance(w_all, list) and len(r_all) > len(w_all):
                self.report("PRODUCT_TYPE_EXTENDED", path)
                return True
            for i, rb in enumerate(r_all):
                target = w_all[i] if isinstance(w_all, list) and i < len(w_all) else w
                self.compare(rb, r_res, target, w_res, f"{path}/allOf/{i}", depth + 1)
            return True
        if isinstance(w_all, list):  # what the writer wrote fits all its branches: one read is enough
            if not any(self._fits(r, r_res, wb, w_res, depth) for wb in w_all):
                self.report("PRODUCT_TYPE_NARROWED", path)
            return True
        return False

    def _fits(self, r, r_res, w, w_res, depth) -> bool:
        probe = _Compare(self.reader, self.writer, [])
        probe.seen = set(self.seen)
        probe.compare(r, r_res, w, w_res, "", depth + 1)
        return not probe.out

    def _enum(self, r, w, path) -> None:
        if "enum" not in r:
            return
        r_enum, w_enum = r["enum"], w.get("enum")
        if w_enum is None:
            self.report("ENUM_ARRAY_NARROWED", path, "the reader adds an enum")
        elif any(v not in r_enum for v in w_enum):
            self.report("ENUM_ARRAY_NARROWED", path, "the reader's enum lacks values of the writer's")

    def _bound(self, r, w, key, kind, path, *, smaller_is_narrower: bool) -> None:
        rv, wv = r.get(key), w.get(key)
        if not _number(rv):
            return
        if not _number(wv):
            self.report(f"{kind}_ADDED", path)
        elif (rv < wv) if smaller_is_narrower else (rv > wv):
            self.report(f"{kind}_{'DECREASED' if smaller_is_narrower else 'INCREASED'}", path)

    def _array(self, r, r_res, w, w_res, path, depth) -> None:
        self._bound(r, w, "maxItems", "MAX_ITEMS", path, smaller_is_narrower=True)
        self._bound(r, w, "minItems", "MIN_ITEMS", path, smaller_is_narrower=False)
        if r.get("uniqueItems") is True and w.get("uniqueItems") is not True:
            self.report("UNIQUE_ITEMS_ADDED", path)
        ri, wi = r.get("items", {}), w.get("items", {})
        if isinstance(ri, list) != isinstance(wi, list):
            self.report("ITEMS_CHANGED", path, "an array and a tuple are different types")
        elif isinstance(ri, list):
            for i in range(max(len(ri), len(wi))):
                w_item = wi[i] if i < len(wi) else w.get("additionalItems", {})
                if i >= len(ri) and "additionalItems" not in r:
                    continue  # the reader's tuple is open past its items
                r_item = ri[i] if i < len(ri) else r["additionalItems"]
                if w_item is False:
                    continue
                self.compare(r_item, r_res, w_item, w_res, f"{path}/items/{i}", depth + 1)
        else:
            self.compare(ri, r_res, wi, w_res, f"{path}/items", depth + 1)

    def _object(self, r, r_res, w, w_res, path, depth) -> None:
        self._bound(r, w, "maxProperties", "MAX_PROPERTIES", path, smaller_is_narrower=True)
        self._bound(r, w, "minProperties", "MIN_PROPERTIES", path, smaller_is_narrower=False)
        r_props, w_props = r.get("properties") or {}, w.get("properties") or {}
        r_extra, w_extra = r.get("additionalProperties", True), w.get("additionalProperties", True)
        r_req, w_req = set(r.get("required") or ()), set(w.get("required") or ())
        for name in sorted(r_req - w_req):
            self.report("REQUIRED_ATTRIBUTE_ADDED", f"{path}/required", f"the reader requires {name!r}")
        for name, rs in r_props.items():
            where = f"{path}/properties/{name}"
            if name in w_props:
                self.compare(rs, r_res, w_props[name], w_res, where, depth + 1)
            elif (covering := _pattern_for(w, name)) is not None:  # the writer's patternProperties wrote it
                probe = _Compare(self.reader, self.writer, [])
                probe.compare(rs, r_res, covering, w_res, where, depth + 1)
                if probe.out:
                    self.report("PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", where)
            elif w_extra is not False:  # the writer's open model may have written the property, any value
                probe = _Compare(self.reader, self.writer, [])
                if isinstance(w_extra, dict) and not _empty(w_extra):
                    probe.compare(rs, r_res, w_extra, w_res, where, depth + 1)
                if not isinstance(w_extra, dict) or _empty(w_extra) or probe.out:
                    self.report("PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", where)
        for name, ws in w_props.items():
            if name in r_props:
                continue
            where = f"{path}/properties/{name}"
            if (covering := _pattern_for(r, name)) is not None:  # the reader's patternProperties read it
                probe = _Compare(self.reader, self.writer, [])
                probe.compare(covering, r_res, ws, w_res, where, depth + 1)
                if probe.out:
                    self.report("PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", where)
            elif r_extra is False:
                self.report("PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL", where)
            elif isinstance(r_extra, dict):
                probe = _Compare(self.reader, self.writer, [])
                probe.compare(r_extra, r_res, ws, w_res, where, depth + 1)
                if probe.out:
                    self.report("PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", where)
        if r_extra is False and w_extra is not False:
            self.report("ADDITIONAL_PROPERTIES_REMOVED", path)
        elif isinstance(r_extra, dict) and w_extra is not False:
            self.compare(r_extra, r_res, w_extra if isinstance(w_extra, dict) else {}, w_res,
                         f"{path}/additionalProperties", depth + 1)
        w_patterns = w.get("patternProperties") or {}
        for pattern, rs in (r.get("patternProperties") or {}).items():
            if not _empty(rs) and w_patterns.get(pattern) != rs:
                self.report("PATTERN_PROPERTIES_CHANGED", f"{path}/patternProperties")


def _pattern_for(node: dict, name: str):
    """The schema of the first of ``node``'s patternProperties matching ``name`` (RE2: linear time), or None."""
    import pyarrow as pa
    import pyarrow.compute as pc

    for pattern, sub in (node.get("patternProperties") or {}).items():
        try:
            if pc.match_substring_regex(pa.array([name]), pattern=pattern)[0].as_py():
                return sub
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            continue
    return None


def _types(node: dict) -> set[str]:
    t = node.get("type")
    if t is not None:
        return {t} if isinstance(t, str) else set(t)
    if any(k in node for k in ("properties", "additionalProperties", "required", "patternProperties")):
        return {"object"}
    if "items" in node:
        return {"array"}
    if isinstance(node.get("enum"), list):
        return {_json_type(v) for v in node["enum"]}
    return set(_TYPES)


_ANNOTATIONS = {"title", "description", "$schema", "$id", "id", "$comment", "default", "examples", "definitions",
                "$defs", "readOnly", "writeOnly", "deprecated"}


def _empty(node) -> bool:
    """The true schema, or one with annotations only."""
    return node is True or (isinstance(node, dict) and not set(node) - _ANNOTATIONS)


def _only_not(node) -> bool:
    return isinstance(node, dict) and "not" in node and not set(node) - _ANNOTATIONS - {"not"}


def _json_type(v) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    return {str: "string", list: "array", dict: "object"}.get(type(v), "string")


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _divides(reader: float, writer: float) -> bool:
    return reader != 0 and abs(writer / reader - round(writer / reader)) < 1e-9


def _snake(key: str) -> str:
    return "".join(f"_{c}" if c.isupper() else c.upper() for c in key)
