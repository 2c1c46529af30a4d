"""Protobuf schemas: parsing (``.proto`` text, or a base64 ``FileDescriptorProto`` as confluent-kafka's
serializer registers it), Confluent's compatibility rules, decoding, and typed columns
(:mod:`lakelog.schema.protobuf_columns`).

Text is compiled by ``protoc`` (grpcio-tools' bundled compiler) in a child process with a time limit, so a
hostile ``.proto`` costs at most that child; references are handed to it as a descriptor set under their
names (the import paths). Descriptors, decoding and message classes are ``protobuf``'s.

**Compatibility** is Confluent's (Robert Yokota, "Understanding Protobuf Compatibility"): a reader breaks
with a writer when a message the writer has is gone, a field (by number) changes kind, label or -- outside
the wire-compatible groups {int32, uint32, int64, uint64, bool, enum}, {sint32, sint64}, {fixed32, sfixed32},
{fixed64, sfixed64}, {string, bytes} -- scalar type, or its message or enum type, a field keeps its name under
another number, a field leaves a oneof, or several existing fields move into one new oneof. Adding and
removing fields, enum values and messages, and renaming fields are compatible.

**Typed columns** (Spark's ``from_protobuf`` mapping, Delta-safe): double, float, int32/sint32/sfixed32 (int),
int64/sint64/sfixed64 and uint32/fixed32 (long), uint64/fixed64 (decimal(20, 0)), bool, string, bytes
(binary), enum (its value's name), message (struct), repeated (list), map (map), ``google.protobuf.Timestamp``
(timestamp), the wrapper types (their value, nullable); a field with presence that is unset is null. A
recursive message cannot be typed.
"""

from __future__ import annotations

import base64
import binascii
import os
import subprocess
import sys
import tempfile
from typing import Mapping

from lakelog.schema.parsed_schema import PROTOBUF, ParsedSchema, SchemaReference
from lakelog.schema.schema_errors import InvalidSchema
from lakelog.schema.schema_limits import MAX_ENUM_SYMBOLS, MAX_FIELDS, MAX_NESTING, MAX_SCHEMA_BYTES

PROTOC_TIMEOUT_S = 30.0
MAIN_FILE = "schema.proto"
_WELL_KNOWN = "google/protobuf/"
_GROUPS = [{"int32", "uint32", "int64", "uint64", "bool", "enum"}, {"sint32", "sint64"}, {"fixed32", "sfixed32"},
           {"fixed64", "sfixed64"}, {"string", "bytes"}]


def _descriptor_pb2():
    from google.protobuf import descriptor_pb2

    return descriptor_pb2


class ProtobufSchema(ParsedSchema):
    """A Protobuf file schema; ``dependencies`` maps each import path to its parsed schema."""

    schema_type = PROTOBUF

    def __init__(self, raw: str, references: tuple[SchemaReference, ...] = (),
                 dependencies: Mapping[str, ParsedSchema] | None = None) -> None:
        if not isinstance(raw, str) or len(raw) > MAX_SCHEMA_BYTES:
            raise InvalidSchema(f"a Protobuf schema is a string of at most {MAX_SCHEMA_BYTES} characters")
        self.raw = raw
        self.references = tuple(references)
        self.dependencies: dict[str, ProtobufSchema] = {}
        for name, dep in (dependencies or {}).items():
            if not isinstance(dep, ProtobufSchema):
                raise InvalidSchema(f"a Protobuf schema can reference only Protobuf schemas, not {dep.schema_type}")
            self.dependencies[name] = dep
        deps = self._dependency_files()
        self.file = _from_base64(raw)
        if self.file is None:
            self.file = _compile(raw, deps)
        _check_bounds(self.file)
        self.pool = _pool(self.file, deps)
        try:
            self.descriptor = self.pool.FindFileByName(self.file.name)
        except KeyError as e:
            raise InvalidSchema(f"invalid Protobuf schema: {e}") from None
        if not self.descriptor.message_types_by_name:
            raise InvalidSchema("invalid Protobuf schema: it defines no message")
        self._canonical = raw.strip()

    def _dependency_files(self) -> list:
        """Every dependency's file (transitively), named by its import path, dependencies first."""
        out, seen = [], set()

        def add(name: str, schema: "ProtobufSchema") -> None:
            if name in seen:
                return
            seen.add(name)
            for sub_name, sub in schema.dependencies.items():
                add(sub_name, sub)
            f = _descriptor_pb2().FileDescriptorProto()
            f.CopyFrom(schema.file)
            f.name = name
            out.append(f)

        for name, dep in self.dependencies.items():
            add(name, dep)
        return out

    @property
    def canonical(self) -> str:
        return self._canonical

    def serialized(self) -> str:
        """The file as a base64 ``FileDescriptorProto`` (``?format=serialized``)."""
        return base64.standard_b64encode(self.file.SerializeToString()).decode()

    def record_names(self) -> list[str]:
        return [m.full_name for m in self.descriptor.message_types_by_name.values()]

    def message(self, indexes: list[int]):
        """The message descriptor at Confluent's message-index path (``[0]``: the file's first message)."""
        types = list(self.descriptor.message_types_by_name.values())
        desc = None
        for i in indexes:
            if not 0 <= i < len(types):
                return None
            desc = types[i]
            types = list(desc.nested_types)
        return desc

    def incompatibilities(self, writer: ParsedSchema) -> list[str]:
        if not isinstance(writer, ProtobufSchema):
            return [f"a {writer.schema_type} schema cannot be read as Protobuf"]
        out: list[str] = []
        readers = _messages(self.file)
        for name, w_msg in _messages(writer.file).items():
            r_msg = readers.get(name)
            if r_msg is None:
                out.append(_problem("MESSAGE_DROP", name, "the writer's message is gone"))
                continue
            _compare_message(r_msg, w_msg, name, self.file.package, writer.file.package, out)
        return out

    def _compile_columns(self):
        from lakelog.schema.protobuf_columns import ProtobufColumns

        return ProtobufColumns(self)


def _problem(kind: str, where: str, description: str) -> str:
    return f"{{errorType:'{kind}', description:'{description}', location:'{where}'}}"


def _from_base64(raw: str):
    """The FileDescriptorProto ``raw`` encodes in base64, or None when it is not one (then it is text)."""
    text = raw.strip()
    if not text or any(c.isspace() for c in text) or ";" in text or "{" in text:
        return None
    try:
        data = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None
    f = _descriptor_pb2().FileDescriptorProto()
    try:
        f.ParseFromString(data)
    except Exception:  # protobuf's DecodeError (the python and upb flavours differ)
        return None
    if not f.name or not f.message_type:
        return None
    return f


def _compile(text: str, deps: list) -> object:
    """``text`` compiled by protoc (a child process) to its FileDescriptorProto."""
    import grpc_tools

    pb2 = _descriptor_pb2()
    well_known = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    with tempfile.TemporaryDirectory(prefix="lakelog-protoc-") as tmp:
        names = {d.name for d in deps}
        main = MAIN_FILE if MAIN_FILE not in names else "lakelog_schema.proto"
        with open(os.path.join(tmp, main), "w", encoding="utf-8") as f:
            f.write(text)
        args = [sys.executable, "-m", "grpc_tools.protoc", f"-I{tmp}", f"-I{well_known}",
                f"--descriptor_set_out={os.path.join(tmp, 'out.pb')}"]
        if deps:
            dep_set = pb2.FileDescriptorSet(file=[d for d in deps if not d.name.startswith(_WELL_KNOWN)])
            with open(os.path.join(tmp, "deps.pb"), "wb") as f:
                f.write(dep_set.SerializeToString())
            args.append(f"--descriptor_set_in={os.path.join(tmp, 'deps.pb')}")
        args.append(main)
        try:
            run = subprocess.run(args, capture_output=True, text=True, timeout=PROTOC_TIMEOUT_S, cwd=tmp,
                                 env={**os.environ, "PYTHONWARNINGS": "ignore"})
        except subprocess.TimeoutExpired:
            raise InvalidSchema(f"invalid Protobuf schema: protoc did not finish in {PROTOC_TIMEOUT_S:.0f} s") from None
        if run.returncode != 0:
            message = " ".join(run.stderr.replace(tmp + os.sep, "").split())[:500]
            raise InvalidSchema(f"invalid Protobuf schema: {message or 'protoc failed'}")
        out = pb2.FileDescriptorSet()
        with open(os.path.join(tmp, "out.pb"), "rb") as f:
            out.ParseFromString(f.read())
    files = [f for f in out.file if f.name == main]
    if not files:
        raise InvalidSchema("invalid Protobuf schema: protoc produced no file")
    return files[0]


def _pool(file, deps):
    """A descriptor pool holding the well-known types, ``deps`` and ``file`` (``42201`` if they do not fit)."""
    from google.protobuf import descriptor_pool

    pb2 = _descriptor_pb2()
    pool = descriptor_pool.DescriptorPool()
    added: set[str] = set()

    def add_well_known(name: str) -> None:
        if name in added:
            return
        try:
            fd = descriptor_pool.Default().FindFileByName(name)
        except KeyError:
            _import_well_known(name)
            try:
                fd = descriptor_pool.Default().FindFileByName(name)
            except KeyError:
                raise InvalidSchema(f"invalid Protobuf schema: unknown import {name!r}") from None
        for dep in fd.dependencies:
            add_well_known(dep.name)
        proto = pb2.FileDescriptorProto()
        fd.CopyToProto(proto)
        pool.Add(proto)
        added.add(name)

    try:
        for f in [*deps, file]:
            for dep in f.dependency:
                if dep.startswith(_WELL_KNOWN):
                    add_well_known(dep)
            if f.name not in added:
                pool.Add(f)
                added.add(f.name)
    except (TypeError, ValueError, KeyError) as e:
        raise InvalidSchema(f"invalid Protobuf schema: {' '.join(str(e).split())[:300]}") from None
    except Exception as e:  # upb's own error types
        raise InvalidSchema(f"invalid Protobuf schema: {' '.join(str(e).split())[:300]}") from None
    return pool


def _import_well_known(name: str) -> None:
    import importlib

    module = "google.protobuf." + name[len(_WELL_KNOWN):].removesuffix(".proto").replace("/", ".") + "_pb2"
    try:
        importlib.import_module(module)
    except ImportError:
        pass


def _check_bounds(file) -> None:
    fields = 0
    stack = [(m, 1) for m in file.message_type]
    for e in file.enum_type:
        if len(e.value) > MAX_ENUM_SYMBOLS:
            raise InvalidSchema(f"enum {e.name} has {len(e.value)} values; lakelog accepts up to {MAX_ENUM_SYMBOLS}")
    while stack:
        m, depth = stack.pop()
        if depth > MAX_NESTING:
            raise InvalidSchema(f"messages nest deeper than {MAX_NESTING}")
        fields += len(m.field)
        if fields > MAX_FIELDS:
            raise InvalidSchema(f"the schema has more than {MAX_FIELDS} fields")
        for e in m.enum_type:
            if len(e.value) > MAX_ENUM_SYMBOLS:
                raise InvalidSchema(f"enum {e.name} has {len(e.value)} values; lakelog accepts up to "
                                    f"{MAX_ENUM_SYMBOLS}")
        stack.extend((n, depth + 1) for n in m.nested_type)


# -- compatibility ------------------------------------------------------------------------------------------
_TYPE_NAMES = {1: "double", 2: "float", 3: "int64", 4: "uint64", 5: "int32", 6: "fixed64", 7: "fixed32", 8: "bool",
               9: "string", 10: "group", 11: "message", 12: "bytes", 13: "uint32", 14: "enum", 15: "sfixed32",
               16: "sfixed64", 17: "sint32", 18: "sint64"}


def _messages(file) -> dict:
    """Every message of the file by its name within the package (nested ones as ``Outer.Inner``)."""
    out = {}
    stack = [(m, m.name) for m in file.message_type]
    while stack:
        m, name = stack.pop()
        if m.options.map_entry:
            continue
        out[name] = m
        stack.extend((n, f"{name}.{n.name}") for n in m.nested_type)
    return out


def _type_name(name: str, package: str) -> str:
    """A field's type name without its package (packages may change compatibly)."""
    name = name.lstrip(".")
    return name[len(package) + 1:] if package and name.startswith(package + ".") else name


def _compare_message(r, w, where: str, r_pkg: str, w_pkg: str, out: list[str]) -> None:
    r_by_number = {f.number: f for f in r.field}
    r_by_name = {f.name: f for f in r.field}
    for wf in w.field:
        at = f"{where}.{wf.name}"
        rf = r_by_number.get(wf.number)
        if rf is None:
            moved = r_by_name.get(wf.name)
            if moved is not None:
                out.append(_problem("FIELD_TAG_ALTER", at, f"field {wf.name} moves from number {wf.number} to "
                                                           f"{moved.number}"))
            continue  # a field removed: the reader skips it
        if (rf.label == 3) != (wf.label == 3) or (rf.label == 2) != (wf.label == 2):
            out.append(_problem("FIELD_LABEL_ALTER", at, "the field's label changes"))
        r_kind, w_kind = _TYPE_NAMES.get(rf.type, "?"), _TYPE_NAMES.get(wf.type, "?")
        if r_kind == "message" or w_kind == "message":
            if r_kind != w_kind:
                out.append(_problem("FIELD_KIND_ALTER", at, f"the field changes from {w_kind} to {r_kind}"))
            elif _type_name(rf.type_name, r_pkg) != _type_name(wf.type_name, w_pkg):
                out.append(_problem("FIELD_TYPE_ALTER", at, f"the field's type changes from {wf.type_name} to "
                                                            f"{rf.type_name}"))
        elif r_kind == w_kind == "enum":
            if _type_name(rf.type_name, r_pkg) != _type_name(wf.type_name, w_pkg):
                out.append(_problem("FIELD_TYPE_ALTER", at, f"the field's enum changes from {wf.type_name} to "
                                                            f"{rf.type_name}"))
        elif r_kind != w_kind and not any(r_kind in g and w_kind in g for g in _GROUPS):
            out.append(_problem("FIELD_KIND_ALTER", at, f"the field changes from {w_kind} to {r_kind}"))
    # oneofs: a writer's oneof field must stay in a oneof; several plain fields must not move into a new one
    w_oneof = {f.number: f.oneof_index for f in w.field if f.HasField("oneof_index") and not f.proto3_optional}
    r_oneof = {f.number: f.oneof_index for f in r.field if f.HasField("oneof_index") and not f.proto3_optional}
    for number in w_oneof:
        if number in r_by_number and number not in r_oneof:
            out.append(_problem("ONE_OF_FIELD_DROP", f"{where}.{r_by_number[number].name}",
                                "the field leaves its oneof"))
    w_numbers = {f.number for f in w.field}
    for index in set(r_oneof.values()):
        moved = [n for n, i in r_oneof.items() if i == index and n in w_numbers and n not in w_oneof]
        if len(moved) > 1:
            out.append(_problem("FEW_FIELDS_CONVERTED_TO_ONE_OF", where, "existing fields move into a new oneof"))
