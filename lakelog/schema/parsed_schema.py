"""What every schema format offers the registry and the writer: identity, references, compatibility, typing.

A :class:`ParsedSchema` is immutable once built; one instance serves every thread.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from lakelog.schema.schema_errors import InvalidSchema
from lakelog.schema.schema_limits import MAX_NESTING, MAX_SCHEMA_BYTES

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

AVRO, JSON, PROTOBUF = "AVRO", "JSON", "PROTOBUF"
SCHEMA_TYPES = (AVRO, JSON, PROTOBUF)


@dataclass(frozen=True)
class SchemaReference:
    """A reference as Confluent's API gives it: the name the schema imports it by, and the subject version."""

    name: str
    subject: str
    version: int

    def to_dict(self) -> dict:
        return {"name": self.name, "subject": self.subject, "version": self.version}


class RecordDecodeError(Exception):
    """Record ``row`` of the batch is not a valid encoding of its schema."""

    def __init__(self, row: int, reason: str) -> None:
        super().__init__(f"record {row}: {reason}")
        self.row = row
        self.reason = reason


class Untypeable(Exception):
    """The schema has no Delta type (the message says why)."""


class RecordColumns(Protocol):
    """A schema compiled for a batch of its records: :attr:`type` is their Arrow type (None: they cannot be
    typed, :attr:`untyped` says why)."""

    type: "pa.DataType | None"
    untyped: str | None

    def decode(self, data: "np.ndarray", starts: "np.ndarray", ends: "np.ndarray", *,
               build: bool = True) -> "pa.Array | None":
        """Records ``data[starts[i]:ends[i]]`` (the payload after the wire format's header; ``data`` padded
        with 16 zero bytes) as one array of :attr:`type`, or only checked (``build=False``); raises
        :class:`RecordDecodeError` for the first that does not match."""


class ParsedSchema(ABC):
    """A registered or candidate schema: its text, type and references, parsed and checked."""

    schema_type: str
    raw: str
    references: tuple[SchemaReference, ...]

    @property
    @abstractmethod
    def canonical(self) -> str:
        """The text two registrations are compared by: the same canonical text, type and references get the same
        id (Confluent compares the schema as its parser prints it)."""

    def normalized(self) -> str:
        """The text registered with ``normalize=true`` (by default the canonical text)."""
        return self.canonical

    @abstractmethod
    def record_names(self) -> list[str]:
        """Fully qualified names of the record types this schema defines, its main one first (the
        RecordNameStrategy subjects)."""

    @abstractmethod
    def incompatibilities(self, writer: "ParsedSchema") -> list[str]:
        """Why this schema, as a reader, cannot read what ``writer`` wrote; empty when it can."""

    @abstractmethod
    def _compile_columns(self) -> RecordColumns:
        """This schema compiled for decoding its records."""

    def columns(self) -> RecordColumns:
        """:meth:`_compile_columns`, once per schema (thread-safe enough: a race compiles twice)."""
        compiled = self.__dict__.get("_columns")
        if compiled is None:
            compiled = self.__dict__["_columns"] = self._compile_columns()
        return compiled

    def identity(self) -> tuple:
        return (self.schema_type, self.canonical, self.references)


def load_json(text: str, what: str = "schema"):
    """``text`` as JSON, within :data:`MAX_SCHEMA_BYTES` and :data:`MAX_NESTING` (``42201`` otherwise)."""
    if not isinstance(text, str):
        raise InvalidSchema(f"the {what} must be a string")
    if len(text) > MAX_SCHEMA_BYTES:
        raise InvalidSchema(f"the {what} is {len(text)} characters, more than the {MAX_SCHEMA_BYTES} lakelog accepts")
    check_nesting_text(text, what)
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as e:
        raise InvalidSchema(f"the {what} is not valid JSON: {e}") from None


def check_nesting_text(text: str, what: str) -> None:
    """Refuse JSON text nested deeper than :data:`MAX_NESTING` before a recursive parser sees it (brackets
    inside strings are skipped)."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > MAX_NESTING:
                    raise InvalidSchema(f"the {what} nests deeper than {MAX_NESTING} levels")
        elif ch in "]}":
            depth -= 1

