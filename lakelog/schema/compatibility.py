"""Compatibility levels and what each checks, as Confluent's registry defines them.

BACKWARD: the new schema reads data written with the previous one; FORWARD: the previous schema reads data
written with the new one; FULL: both. The ``_TRANSITIVE`` variants check against every earlier (live) version,
the others against the latest only; NONE checks nothing. The per-format rules are each format's
:meth:`~lakelog.schema.parsed_schema.ParsedSchema.incompatibilities`.
"""

from __future__ import annotations

from lakelog.schema.parsed_schema import ParsedSchema

BACKWARD, FORWARD, FULL, NONE = "BACKWARD", "FORWARD", "FULL", "NONE"
LEVELS = (BACKWARD, f"{BACKWARD}_TRANSITIVE", FORWARD, f"{FORWARD}_TRANSITIVE", FULL, f"{FULL}_TRANSITIVE", NONE)
DEFAULT_LEVEL = BACKWARD


def is_transitive(level: str) -> bool:
    return level.endswith("_TRANSITIVE")


def against(level: str, previous: list) -> list:
    """The versions ``level`` checks a new schema against, from ``previous`` (oldest first)."""
    if level == NONE or not previous:
        return []
    return list(previous) if is_transitive(level) else [previous[-1]]


def incompatibilities(level: str, new: ParsedSchema, old: ParsedSchema) -> list[str]:
    """Why ``new`` breaks ``level`` against ``old`` (empty: compatible)."""
    if level == NONE:
        return []
    if new.schema_type != old.schema_type:
        return [f"{{errorType:'TYPE_MISMATCH', description:'the schema type changes from {old.schema_type} to "
                f"{new.schema_type}'}}"]
    base = level.removesuffix("_TRANSITIVE")
    out = []
    if base in (BACKWARD, FULL):
        out += new.incompatibilities(old)
    if base in (FORWARD, FULL):
        out += old.incompatibilities(new)
    return out
