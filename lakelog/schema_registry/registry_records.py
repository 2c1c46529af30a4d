"""The records of the ``_schemas`` topic, in Confluent's own format (``SchemaRegistryKey`` and its values).

Keys and values are JSON, as Confluent's registry writes them to its ``kafkastore.topic``:

* ``{"keytype":"SCHEMA","subject":S,"version":V,"magic":1}`` ->
  ``{"subject":S,"version":V,"id":N,"schema":TEXT,"schemaType":T,"references":[...],"deleted":false}``
  (``schemaType`` absent for Avro, ``references`` absent when empty); a soft delete writes the value again
  with ``"deleted":true``, a permanent delete a tombstone (null value);
* ``{"keytype":"CONFIG","subject":S or null,"magic":0}`` -> ``{"compatibilityLevel":LEVEL}`` or a tombstone;
* ``{"keytype":"MODE","subject":S or null,"magic":0}`` -> ``{"mode":MODE}`` or a tombstone.

A null subject is the global setting. Decoding is lenient as Kafka's readers are: a record that is not one of
these is skipped, never an error.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from lakelog.schema.parsed_schema import AVRO, SCHEMA_TYPES, SchemaReference
from lakelog.schema.schema_errors import InvalidSubject, InvalidVersion

SCHEMA, CONFIG, MODE = "SCHEMA", "CONFIG", "MODE"
MAX_SUBJECT_CHARS = 1024
MAX_VERSION = 2**31 - 1


@dataclass(frozen=True)
class SchemaValue:
    """One version of a subject: its schema (id, type, text, references) and whether it is soft-deleted."""

    subject: str
    version: int
    id: int
    schema: str
    schema_type: str = AVRO
    references: tuple[SchemaReference, ...] = ()
    deleted: bool = False

    def to_json(self) -> bytes:
        out: dict = {"subject": self.subject, "version": self.version, "id": self.id, "schema": self.schema}
        if self.schema_type != AVRO:
            out["schemaType"] = self.schema_type
        if self.references:
            out["references"] = [r.to_dict() for r in self.references]
        out["deleted"] = self.deleted
        return _dump(out)


def _dump(obj) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


def schema_key(subject: str, version: int) -> bytes:
    return _dump({"keytype": SCHEMA, "subject": subject, "version": version, "magic": 1})


def config_key(subject: str | None) -> bytes:
    return _dump({"keytype": CONFIG, "subject": subject, "magic": 0})


def mode_key(subject: str | None) -> bytes:
    return _dump({"keytype": MODE, "subject": subject, "magic": 0})


def config_value(level: str) -> bytes:
    return _dump({"compatibilityLevel": level})


def mode_value(mode: str) -> bytes:
    return _dump({"mode": mode})


def decode_key(raw: bytes | None) -> tuple[str, str | None, int] | None:
    """``(keytype, subject, version)`` of a key (version 0 but for SCHEMA keys), or None if it is not one."""
    if raw is None:
        return None
    try:
        key = json.loads(raw)
        kind = key["keytype"]
        subject = key.get("subject")
        if kind not in (SCHEMA, CONFIG, MODE) or (subject is not None and not isinstance(subject, str)):
            return None
        version = int(key["version"]) if kind == SCHEMA else 0
        if kind == SCHEMA and (subject is None or version < 1):
            return None
        return kind, subject, version
    except (ValueError, TypeError, KeyError, AttributeError):
        return None


def decode_schema_value(raw: bytes) -> SchemaValue | None:
    try:
        v = json.loads(raw)
        kind = v.get("schemaType") or AVRO
        if kind not in SCHEMA_TYPES or not isinstance(v["schema"], str):
            return None
        refs = tuple(SchemaReference(str(r["name"]), str(r["subject"]), int(r["version"]))
                     for r in v.get("references") or ())
        return SchemaValue(str(v["subject"]), int(v["version"]), int(v["id"]), v["schema"], kind, refs,
                           bool(v.get("deleted", False)))
    except (ValueError, TypeError, KeyError, AttributeError):
        return None


def decode_setting(raw: bytes, field: str) -> str | None:
    """The ``compatibilityLevel`` or ``mode`` of a CONFIG or MODE value."""
    try:
        value = json.loads(raw).get(field)
        return value if isinstance(value, str) else None
    except (ValueError, TypeError, AttributeError):
        return None


def check_subject(subject: object) -> str:
    """A subject name: 1 to :data:`MAX_SUBJECT_CHARS` characters, none of them a control character."""
    if (not isinstance(subject, str) or not subject or len(subject) > MAX_SUBJECT_CHARS
            or any(ord(c) < 32 or ord(c) == 127 for c in subject)):
        raise InvalidSubject(f"Invalid subject: a subject is 1 to {MAX_SUBJECT_CHARS} characters, none of them "
                             f"control characters")
    return subject


def parse_version(version: str | int) -> int:
    """A version from the API: ``latest`` or -1 (the latest live version, -1 here), or 1 .. 2^31-1."""
    if isinstance(version, str):
        if version == "latest":
            return -1
        try:
            version = int(version)
        except ValueError:
            version = 0
    if isinstance(version, bool) or not isinstance(version, int) or not (version == -1 or 1 <= version <= MAX_VERSION):
        raise InvalidVersion(f"The specified version '{version}' is not a valid version id. Allowed values are "
                             f"between [1, 2^31-1] and the string \"latest\"")
    return version
