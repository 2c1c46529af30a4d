"""SASL credentials of the Kafka listener (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512): placeholder, filled below."""

from __future__ import annotations


class Credentials:
    """Users and their secrets; empty when the listener has no SASL file."""

    def __init__(self, users: dict[str, str] | None = None) -> None:
        self.users = dict(users or {})

    @classmethod
    def from_file(cls, path: str) -> "Credentials":
        return cls()
