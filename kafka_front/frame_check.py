"""A request frame checked against its schema before kio reads it: every declared length against the bytes left.

kio's native reader trusts the lengths a frame declares: an array count of 2**32-1 makes it reserve 32 GiB up
front, and the allocation failure aborts the whole process.  :func:`check_request` walks the frame first,
exactly as kio will read it, from kio's generated dataclasses for the (api_key, version) -- so every API and
version the listener serves is covered by the same code -- and raises :class:`FrameError` at the first length
that breaks Kafka's rules, before anything is allocated.  Kafka's generated readers
(``generator/.../MessageDataGenerator.java``) refuse the same frames:

* an array count larger than the bytes left ("Tried to allocate a collection of size N, but there are only M
  bytes remaining"); here tighter, the count times the smallest encoding of one element;
* a string longer than 0x7fff bytes ("string field X had invalid length"), or than the bytes left;
* a bytes (or records) length larger than the bytes left;
* null where the version's schema does not allow it ("non-nullable field X was serialized as null").  kio
  reads a null array of any field as None, so handlers would meet None where Kafka never passes it
  (DescribeGroups ``groups``, ListOffsets ``topics``): Kafka cannot parse such a frame and closes the
  connection, and so does lakelog;
* a tagged field whose value does not fill the size it declares.

Beyond Kafka's rules, a tagged field whose tag the version does not define is refused too: kio cannot read
one, where Kafka keeps it as an unknown tagged field (docs/kafka-clients.md, ``unknown-tagged-fields``).

On top of Kafka's rules a frame holds at most :data:`MAX_ELEMENTS` array elements in all: kio turns each into
a Python object (an int32 element of 4 bytes becomes about 36 bytes of memory), so the count bounds what one
request costs to parse and hold, whatever the frame limit.

A frame that passes is read by kio without surprises: every element it will create is present in the frame.
"""

from __future__ import annotations

import dataclasses
import functools
import struct
import types
import typing
from typing import Callable

from kio.index import load_request_schema
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2

MAX_STRING = 0x7FFF  # Kafka's generated readers: "string field X had invalid length"
# Elements of all arrays of one frame together.  A Kafka client's largest requests hold one element per
# partition it fetches, commits or lists (tens of thousands); the limit stays well above them and bounds the
# time one frame can make kio spend parsing it.
MAX_ELEMENTS = 1 << 20

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_FIXED = {"int8": 1, "uint8": 1, "bool": 1, "int16": 2, "uint16": 2, "error_code": 2, "int32": 4, "uint32": 4,
          "timedelta_i32": 4, "int64": 8, "uint64": 8, "float64": 8, "timedelta_i64": 8, "datetime_i64": 8,
          "uuid": 16}

# A walker reads one value at ``pos`` of ``buf`` and returns the position after it; ``count`` is a one-element
# list, the elements met so far in the frame.
Walker = Callable[[bytes, int, list], int]


class FrameError(ValueError):
    """The frame breaks a declared length, a nullability or one of Kafka's limits: close the connection."""


def check_request(api_key: int, version: int, frame: bytes, offset: int) -> int:
    """Check the request body of ``api_key`` at ``version`` that starts at ``offset``; returns where it ends
    (bytes after it are ignored, as Kafka's broker ignores them).  Raises :class:`FrameError`."""
    return _run(_request_walker(api_key, version), frame, offset)


def check_header(frame: bytes, flexible: bool) -> int:
    """Check the request header (v2 for flexible versions, else v1); returns where the body starts."""
    walk, _ = _entity(RequestHeaderV2 if flexible else RequestHeaderV1, False)
    return _run(walk, frame, 0)


@functools.cache
def _request_walker(api_key: int, version: int) -> Walker:
    return _entity(load_request_schema(api_key, version), False)[0]


def _run(walk: Walker, frame: bytes, offset: int) -> int:
    try:
        return walk(frame, offset, [0])
    except (IndexError, struct.error):
        raise FrameError("the frame ends inside a field") from None


def field_kind(hint: object) -> tuple[bool, bool, object]:
    """(is_array, nullable, element type) of a kio field from its type hint (``X``, ``X | None``,
    ``tuple[X, ...]``, ``tuple[X, ...] | None``)."""
    nullable = False
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        nullable = len(args) < len(typing.get_args(hint))
        hint = args[0]
    if typing.get_origin(hint) is tuple:
        return True, nullable, typing.get_args(hint)[0]
    return False, nullable, hint


# Walkers are generated as Python source, one function per struct with every field inlined: the check runs
# before kio parses each frame and must cost less than that parse, which a Python call per field would not.
# What the generated code may call:
def _uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    """An unsigned varint of at most 5 bytes (kio's and Kafka's limit) → (value, position after it)."""
    value = shift = 0
    for i in range(5):
        b = buf[pos + i]
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos + i + 1
        shift += 7
    raise FrameError("a varint longer than 5 bytes")


def _bad_length(kind: str, name: str, n: int) -> FrameError:
    if n == -1:
        return FrameError(f"non-nullable field {name} was serialized as null")
    return FrameError(f"{kind} field {name} had invalid length {n}")


def _too_long(kind: str, name: str, n: int, left: int) -> FrameError:
    if kind == "string" and n > MAX_STRING:
        return FrameError(f"string field {name} had invalid length {n}")
    if kind == "array":
        return FrameError(f"Tried to allocate a collection of size {n} for field {name}, but there are only {left} "
                          f"bytes remaining")
    return FrameError(f"{kind} field {name} of {n} bytes, but there are only {left} bytes remaining")


def _too_many() -> FrameError:
    return FrameError(f"more than {MAX_ELEMENTS} array elements in one request")


def _past_end() -> FrameError:
    return FrameError("the frame ends inside a field")


def _tagged(buf: bytes, pos: int, count: list, fields: dict, name: str) -> int:
    """The tagged fields of a flexible struct (at least one: a lone 0 byte is read inline)."""
    n, pos = _uvarint(buf, pos)
    if n * 2 > len(buf) - pos:
        raise FrameError(f"{n} tagged fields in {name}, but there are only {len(buf) - pos} bytes left")
    for _ in range(n):
        tag, pos = _uvarint(buf, pos)
        size, pos = _uvarint(buf, pos)
        if size > len(buf) - pos:
            raise FrameError(f"tagged field {tag} of {name} of {size} bytes, but there are only "
                             f"{len(buf) - pos} bytes left")
        walk = fields.get(tag)
        if walk is None:  # kio cannot read it
            raise FrameError(f"{name} has no tagged field {tag} in this version")
        end = pos + size
        if walk(buf, pos, count) != end:  # a value running past its size stops inside the frame: refused too
            raise FrameError(f"tagged field {tag} of {name} does not fill its {size} bytes")
        pos = end
    return pos


_HELPERS = {"_uv": _uvarint, "_i16": _I16.unpack_from, "_i32": _I32.unpack_from, "_bad_length": _bad_length,
            "_too_long": _too_long, "_too_many": _too_many, "_past_end": _past_end, "_tagged": _tagged,
            "MAX_ELEMENTS": MAX_ELEMENTS}


class _Source:
    """The body of one generated walker: ``def walk(buf, pos, count)``, ``L`` the frame's length."""

    def __init__(self) -> None:
        self.lines = ["L = len(buf)"]
        self.names: dict[str, object] = {}
        self.fixed = 0  # fixed-width bytes not yet skipped

    def add(self, *lines: str) -> None:
        self.flush()
        self.lines.extend(lines)

    def flush(self) -> None:
        if self.fixed:
            self.lines += [f"pos += {self.fixed}", "if pos > L: raise _past_end()"]
            self.fixed = 0

    def name(self, value: object) -> str:
        key = f"w{len(self.names)}"
        self.names[key] = value
        return key

    def length(self, flexible: bool, width: int) -> None:
        """Read a length into ``n``: a compact one (unsigned varint, minus 1) or an int16/int32."""
        if flexible:
            self.add("b = buf[pos]", "if b < 0x80:", "    n = b - 1", "    pos += 1", "else:",
                     "    n, pos = _uv(buf, pos)", "    n -= 1")
        else:
            self.add(f"n = _i{8 * width}(buf, pos)[0]", f"pos += {width}")

    def sized(self, kind: str, name: str, flexible: bool, nullable: bool) -> None:
        """A string or bytes value: its length checked, then skipped."""
        self.length(flexible, 2 if kind == "string" and not flexible else 4)
        cap = f" or n > {MAX_STRING}" if kind == "string" else ""
        self.add(f"if n < {-1 if nullable else 0}: raise _bad_length({kind!r}, {name!r}, n)",
                 "if n > 0:",
                 f"    if n > L - pos{cap}: raise _too_long({kind!r}, {name!r}, n, L - pos)",
                 "    pos += n")

    def compile(self, label: str) -> Walker:
        self.flush()
        body = "\n".join("    " + line for line in [*self.lines, "return pos"])
        namespace = {**_HELPERS, **self.names}
        exec(compile(f"def walk(buf, pos, count):\n{body}\n", f"<frame check {label}>", "exec"), namespace)
        return namespace["walk"]


@functools.cache
def _entity(cls: type, nullable: bool) -> tuple[Walker, int]:
    """(walker, smallest encoding) of the kio dataclass ``cls``; a nullable struct starts with an int8 marker,
    -1 for null, as kio reads it."""
    flexible = bool(cls.__flexible__)
    hints = typing.get_type_hints(cls)
    src = _Source()
    tagged: dict[int, Walker] = {}
    smallest = 0
    if nullable:
        src.add("if buf[pos] == 0xFF:", "    return pos + 1", "pos += 1")
        smallest = 1
    for f in dataclasses.fields(cls):
        tag = f.metadata.get("tag")
        is_array, field_nullable, element = field_kind(hints[f.name])
        kafka_type = f.metadata.get("kafka_type")
        if cls.__name__ == "RequestHeader" and f.name == "client_id":  # kio: always a nullable int16 string
            flexible_field, field_nullable = False, True
        else:
            flexible_field = flexible
        if tag is not None:  # kio reads a tagged value as never null, whatever its hint says
            tagged[int(tag)] = _single(f.name, kafka_type, element, is_array, flexible, False)
            continue
        if is_array:
            smallest += 1 if flexible else 4
            _array(src, f.name, kafka_type, element, flexible, field_nullable)
        elif dataclasses.is_dataclass(element):
            walk, size = _entity(element, field_nullable)
            smallest += size
            src.add(f"pos = {src.name(walk)}(buf, pos, count)")
        elif kafka_type in _FIXED:
            smallest += _FIXED[kafka_type]
            src.fixed += _FIXED[kafka_type]
        else:
            smallest += 2 if kafka_type == "string" and not flexible_field else 4 if not flexible_field else 1
            src.sized(_sized_kind(f.name, kafka_type), f.name, flexible_field, field_nullable)
    if flexible:
        smallest += 1
        fields = src.name(tagged)
        src.add("if buf[pos] == 0:", "    pos += 1", "else:",
                f"    pos = _tagged(buf, pos, count, {fields}, {cls.__name__!r})")
    return src.compile(cls.__name__), smallest


def _sized_kind(name: str, kafka_type: str) -> str:
    if kafka_type == "string":
        return "string"
    if kafka_type in ("bytes", "records"):
        return "bytes"
    raise TypeError(f"kio field {name} has kafka_type {kafka_type!r}, which this check does not know")


def _array(src: _Source, name: str, kafka_type: str | None, element: object, flexible: bool, nullable: bool) -> None:
    """An array field: its count checked against the bytes left, then its elements walked (or skipped, when
    they have a fixed width).  kio reads the elements themselves as never null."""
    if dataclasses.is_dataclass(element):
        item, size = _entity(element, False)
        fixed = False
    elif kafka_type in _FIXED:
        item, size, fixed = None, _FIXED[kafka_type], True
    else:
        item = _single(name, kafka_type, element, False, flexible, False)
        size, fixed = (2 if kafka_type == "string" and not flexible else 1 if flexible else 4), False
    src.length(flexible, 4)
    src.add(f"if n < {-1 if nullable else 0}: raise _bad_length('array', {name!r}, n)",
            "if n > 0:",
            f"    if n * {max(size, 1)} > L - pos: raise _too_long('array', {name!r}, n, L - pos)",
            "    count[0] += n",
            "    if count[0] > MAX_ELEMENTS: raise _too_many()")
    if fixed:
        src.add(f"    pos += n * {size}")
    else:
        walk = src.name(item)
        src.add("    for _ in range(n):", f"        pos = {walk}(buf, pos, count)")


@functools.cache
def _single(name: str, kafka_type: str | None, element: object, is_array: bool, flexible: bool,
            nullable: bool) -> Walker:
    """A walker of one value that is not a struct's field list: an array element or a tagged field."""
    if dataclasses.is_dataclass(element) and not is_array:
        return _entity(element, nullable)[0]
    src = _Source()
    if is_array:
        _array(src, name, kafka_type, element, flexible, nullable)
    elif kafka_type in _FIXED:
        src.fixed += _FIXED[kafka_type]
    else:
        src.sized(_sized_kind(name, kafka_type), name, flexible, nullable)
    return src.compile(name)
