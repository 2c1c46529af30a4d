"""What of an error's message a client may see: the library names the storage root in some messages
("topic T does not exist under ROOT"), and an error body names no path."""

from __future__ import annotations

import re

_ROOT_IN_MESSAGE = re.compile(r" under (?:[a-z][a-z0-9+.-]*://|/)\S*")


def public_message(message: str) -> str:
    """``message`` without the storage root."""
    return _ROOT_IN_MESSAGE.sub("", message)
