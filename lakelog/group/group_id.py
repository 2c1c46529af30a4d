"""The rule for consumer-group ids, one for the coordinator and the offsets store alike.

Kafka requires a non-empty id. lakelog also stores ids as keys of ``__consumer_offsets`` and in saved group
state, so it refuses what would not round-trip there: more than :data:`MAX_GROUP_ID_LENGTH` characters, control
characters (NUL, newline, ...) and lone surrogates (text that is not valid Unicode). Pure.
"""

from __future__ import annotations

from lakelog.errors import InvalidGroupId

MAX_GROUP_ID_LENGTH = 255


def validate_group_id(group: object) -> str:
    """Return ``group`` if it is a usable group id, else raise ``INVALID_GROUP_ID``."""
    if not isinstance(group, str) or not group:
        raise InvalidGroupId(f"group id {group!r} is illegal: it must be a non-empty string")
    if len(group) > MAX_GROUP_ID_LENGTH:
        raise InvalidGroupId(f"group id is {len(group)} characters long, the limit is {MAX_GROUP_ID_LENGTH}")
    if any(ord(c) < 32 or ord(c) == 127 for c in group):
        raise InvalidGroupId(f"group id {group!r} is illegal: it contains a control character")
    if any(0xD800 <= ord(c) <= 0xDFFF for c in group):
        raise InvalidGroupId(f"group id {group!r} is illegal: it is not valid Unicode (a lone surrogate)")
    return group
