"""Coercing user-supplied record keys, values and header values to bytes (no third-party imports).

Shared by the library's input normalisation and the HTTP client, so both accept
the same types and refuse the rest with the same ``INVALID_REQUEST``.
"""

from __future__ import annotations

from lakelog.errors import InvalidRequest


def as_bytes(value, what: str = "record key/value") -> bytes | None:
    """``value`` as bytes: bytes and None as they are, str as UTF-8, bytearray/memoryview copied."""
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    raise InvalidRequest(f"{what} must be bytes, str or None, got {type(value).__name__}")
