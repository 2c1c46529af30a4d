"""Where the console lives: its URL prefix, its assets and its session cookie's name."""

from __future__ import annotations

from pathlib import Path

STATIC = Path(__file__).with_name("static")
PREFIX = "/ui"
STATIC_PREFIX = f"{PREFIX}/static/"
SESSION_COOKIE = "lakelog_console_token"


def is_console(path: str) -> bool:
    return path == PREFIX or path.startswith(PREFIX + "/")
