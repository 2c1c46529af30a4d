"""Rendering command results: aligned text tables for people, JSON for machines.

Bytes (keys, values, header values) go into JSON as a string when they are
valid UTF-8 and as ``{"base64": "..."}`` otherwise, so nothing is lost.
"""

from __future__ import annotations

import base64
import json
import sys
from typing import Any, Sequence


def print_json(obj: Any, *, compact: bool = False) -> None:
    """One JSON document on stdout (``compact``: a single line, for JSON Lines streams)."""
    text = json.dumps(obj, separators=(",", ":")) if compact else json.dumps(obj, indent=2)
    sys.stdout.write(text + "\n")


def format_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Left-aligned columns separated by two spaces, with a header row."""
    cells = [[str(h) for h in headers]] + [["" if c is None else str(c) for c in r] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells)


def print_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    sys.stdout.write(format_table(headers, rows) + "\n")


def bytes_to_json(data: bytes | None) -> str | dict | None:
    """UTF-8 text as a string, other bytes as ``{"base64": ...}``, null as None."""
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(data).decode("ascii")}


def bytes_to_text(data: bytes) -> str:
    """Bytes for a human: UTF-8 with undecodable bytes shown as ``\\xNN``."""
    return data.decode("utf-8", errors="backslashreplace")


def headers_to_json(headers: list[dict] | None) -> list[dict]:
    return [{"key": h["key"], "value": bytes_to_json(h["value"])} for h in headers or ()]


def print_error(error: Exception, *, as_json: bool) -> None:
    """``error: NAME (code): message`` on stderr; with ``--json`` also the error dict on stdout."""
    sys.stderr.write(f"error: {error}\n")
    if as_json and hasattr(error, "to_dict"):
        print_json(error.to_dict())
