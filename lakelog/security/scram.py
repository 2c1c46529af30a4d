"""SCRAM credentials (RFC 5802, KIP-84, KIP-554): what a server stores per user and mechanism, and Kafka's rules
for storing one.

A credential is (salt, iterations, StoredKey, ServerKey): enough to verify a
client's proof, never the password.  AlterUserScramCredentials sends the
*salted* password (PBKDF2 of the password, computed by the client), from which
:func:`from_salted_password` derives the keys as Kafka's controller does. Pure.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from dataclasses import dataclass

from lakelog.errors import UnacceptableCredential, UnsupportedSaslMechanism

SCRAM_256, SCRAM_512 = "SCRAM-SHA-256", "SCRAM-SHA-512"
#: Kafka's ScramMechanism type codes (DescribeUserScramCredentials / AlterUserScramCredentials).
MECHANISM_CODES = {SCRAM_256: 1, SCRAM_512: 2}
MECHANISM_NAMES = {v: k for k, v in MECHANISM_CODES.items()}
HASHES = {SCRAM_256: hashlib.sha256, SCRAM_512: hashlib.sha512}
MIN_ITERATIONS = 4096  # Kafka's ScramMechanism.minIterations, both mechanisms
MAX_ITERATIONS = 16384  # Kafka's ScramControlManager.MAX_ITERATIONS
DEFAULT_ITERATIONS = 4096


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes

    def to_json(self) -> dict:
        enc = lambda b: base64.b64encode(b).decode()  # noqa: E731
        return {"salt": enc(self.salt), "iterations": self.iterations, "stored_key": enc(self.stored_key),
                "server_key": enc(self.server_key)}

    @classmethod
    def from_json(cls, d: dict) -> "ScramCredential":
        dec = lambda s: base64.b64decode(s, validate=True)  # noqa: E731
        return cls(dec(d["salt"]), int(d["iterations"]), dec(d["stored_key"]), dec(d["server_key"]))


def from_salted_password(mechanism: str, salt: bytes, salted_password: bytes, iterations: int) -> ScramCredential:
    h = HASHES[mechanism]
    client_key = hmac.new(salted_password, b"Client Key", h).digest()
    return ScramCredential(salt, iterations, h(client_key).digest(),
                           hmac.new(salted_password, b"Server Key", h).digest())


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(HASHES[mechanism]().name, password.encode(), salt, iterations)


def derive(mechanism: str, password: str, salt: bytes, iterations: int = DEFAULT_ITERATIONS) -> ScramCredential:
    """The credential of ``password``."""
    return from_salted_password(mechanism, salt, salted_password(mechanism, password, salt, iterations), iterations)


def mechanism_name(code: int) -> str:
    """The mechanism of a protocol code; ``UNSUPPORTED_SASL_MECHANISM`` for any other (Kafka's message)."""
    name = MECHANISM_NAMES.get(code)
    if name is None:
        raise UnsupportedSaslMechanism("Unknown SCRAM mechanism")
    return name


def check_user(user: str) -> str:
    if not user:
        raise UnacceptableCredential("Username must not be empty")
    return user


def check_upsertion(user: str, mechanism_code: int, iterations: int, salt: bytes, salted: bytes) -> str:
    """The mechanism's name if Kafka's controller would store this upsertion, else its error and message."""
    check_user(user)
    mechanism = mechanism_name(mechanism_code)
    if iterations < MIN_ITERATIONS:
        raise UnacceptableCredential("Too few iterations")
    if iterations > MAX_ITERATIONS:
        raise UnacceptableCredential("Too many iterations")
    if not salt or not salted:
        raise UnacceptableCredential("A SCRAM credential needs a salt and a salted password")
    return mechanism
