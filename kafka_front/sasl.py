"""SASL for the Kafka listener: PLAIN and SCRAM-SHA-256/512 (RFC 5802, KIP-84), pure state machines.

Principals and ACLs are the HTTP front's (``--auth-file``): a user ``alice``
authenticates as ``User:alice``.  Credentials:

* PLAIN: the SASL file (``lakelog serve --sasl-file``, JSON
  ``{"users": [{"name": "alice", "password": "..."}]}``), or username ``alice``
  with a bearer token of ``User:alice`` from the auth file as the password (the
  token is checked by the HTTP front's :class:`~lakelog.broker.authorizer.Authorizer`, which
  keeps only its hash);
* SCRAM: the root's SCRAM credentials (Kafka's AlterUserScramCredentials,
  ``kafka-configs --entity-type users --add-config SCRAM-SHA-256=[...]``), which
  every front of the root uses.  A front started with a SASL file seeds them
  with its users (4096 iterations, a random salt) the first time it sees each
  user and mechanism; after that the root's credential is the one in force, so
  a password changed or deleted through the API stays so.  Without a root
  (a bare :class:`Credentials`) the file's users are used directly.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
from pathlib import Path
from typing import Callable, Mapping

from lakelog.errors import InvalidConfig, SaslAuthenticationFailed, UnsupportedSaslMechanism
from lakelog.security.scram import (DEFAULT_ITERATIONS, HASHES as _HASH, SCRAM_256, SCRAM_512, ScramCredential,
                                    derive)

PLAIN = "PLAIN"
MECHANISMS = (PLAIN, SCRAM_256, SCRAM_512)
SALT_BYTES = 16  # of the salts derived here: a bare Credentials' users' and an unknown user's


class Credentials:
    """PLAIN passwords of the SASL file (hashed), and the SCRAM credentials in force: ``scram_source()`` (the
    root's, ``(user, mechanism) -> credential``) when given, else keys derived from the file's passwords."""

    def __init__(self, passwords: dict[str, str] | None = None, *,
                 scram_source: Callable[[], Mapping[tuple[str, str], ScramCredential]] | None = None) -> None:
        self.passwords = dict(passwords or {})
        self._plain = {u: hashlib.sha256(p.encode()).digest() for u, p in self.passwords.items()}
        self._scram_source = scram_source
        self._scram = {} if scram_source is not None else {
            (u, m): derive(m, p, os.urandom(SALT_BYTES)) for u, p in self.passwords.items() for m in _HASH}
        self._unknown_salt_key = os.urandom(32)

    @staticmethod
    def read_file(path: str) -> dict[str, str]:
        """The SASL file's users: name -> password; ``INVALID_CONFIG`` naming the problem."""
        try:
            doc = json.loads(Path(path).read_text())
            users = {u["name"]: u["password"] for u in doc["users"]}
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise InvalidConfig(f"cannot read SASL file {path} (want {{\"users\": [{{\"name\", \"password\"}}]}}): "
                                f"{e}") from None
        if not all(isinstance(u, str) and u and isinstance(p, str) and p for u, p in users.items()):
            raise InvalidConfig(f"SASL file {path}: every user needs a non-empty name and password")
        return users

    def check_plain(self, user: str, password: str) -> bool:
        known = self._plain.get(user)
        return known is not None and hmac.compare_digest(known, hashlib.sha256(password.encode()).digest())

    def scram(self, mechanism: str, user: str) -> ScramCredential | None:
        if self._scram_source is not None:
            return self._scram_source().get((user, mechanism))
        return self._scram.get((user, mechanism))

    def unknown_user_challenge(self, mechanism: str, user: str) -> tuple[bytes, int]:
        """(salt, iterations) to challenge a user without a credential with, so that a client cannot tell unknown
        users from wrong passwords: like a known user's, the salt is the same on every attempt and differs from
        user to user. Keyed by a secret of this process, and one HMAC rather than a key derivation, so that
        unauthenticated clients cannot make the listener's event loop derive keys."""
        salt = hmac.new(self._unknown_salt_key, f"{mechanism}\0{user}".encode(), hashlib.sha256).digest()
        return salt[:SALT_BYTES], DEFAULT_ITERATIONS


def parse_plain(message: bytes) -> tuple[str, str]:
    """(username, password) of a PLAIN message ``authzid NUL authcid NUL passwd`` (RFC 4616)."""
    parts = message.split(b"\0")
    if len(parts) != 3 or not parts[1]:
        raise SaslAuthenticationFailed("malformed PLAIN message")
    authzid, user, password = (p.decode("utf-8", errors="strict") for p in parts)
    if authzid and authzid != user:
        raise SaslAuthenticationFailed("PLAIN authorization id must be empty or the username")
    return user, password


def _attrs(message: str) -> dict[str, str]:
    out = {}
    for part in message.split(","):
        k, sep, v = part.partition("=")
        if sep and len(k) == 1:
            out.setdefault(k, v)
    return out


class ScramServer:
    """One SCRAM exchange: :meth:`first` answers the client-first message, :meth:`final` the client-final one and
    returns (username, server-final message).  Raises ``SASL_AUTHENTICATION_FAILED`` on any mismatch."""

    def __init__(self, mechanism: str, credentials: Credentials) -> None:
        if mechanism not in _HASH:
            raise UnsupportedSaslMechanism(f"{mechanism}")
        self.mechanism = mechanism
        self.credentials = credentials
        self.user: str | None = None
        self.keys: ScramCredential | None = None

    def first(self, message: bytes) -> bytes:
        text = message.decode("utf-8", errors="strict")
        if not text.startswith(("n,", "y,")):
            raise SaslAuthenticationFailed("SCRAM channel binding is not supported")
        gs2_end = text.index(",", 2) + 1 if "," in text[2:] else -1
        if gs2_end < 0:
            raise SaslAuthenticationFailed("malformed SCRAM client-first message")
        self.gs2, self.client_first_bare = text[:gs2_end], text[gs2_end:]
        attrs = _attrs(self.client_first_bare)
        if "n" not in attrs or "r" not in attrs:
            raise SaslAuthenticationFailed("SCRAM client-first message lacks n= or r=")
        self.user = attrs["n"].replace("=2C", ",").replace("=3D", "=")
        self.keys = self.credentials.scram(self.mechanism, self.user)
        if self.keys is not None:
            salt, iterations = self.keys.salt, self.keys.iterations
        else:  # a fake challenge; :meth:`final` fails it whatever the proof
            salt, iterations = self.credentials.unknown_user_challenge(self.mechanism, self.user)
        self.nonce = attrs["r"] + base64.b64encode(os.urandom(18)).decode()
        self.server_first = f"r={self.nonce},s={base64.b64encode(salt).decode()},i={iterations}"
        return self.server_first.encode()

    def final(self, message: bytes) -> tuple[str, bytes]:
        text = message.decode("utf-8", errors="strict")
        without_proof, _, proof_part = text.rpartition(",p=")
        attrs = _attrs(without_proof)
        if not proof_part or attrs.get("r") != self.nonce:
            raise SaslAuthenticationFailed("SCRAM nonce mismatch or missing proof")
        if attrs.get("c") != base64.b64encode(self.gs2.encode()).decode():
            raise SaslAuthenticationFailed("SCRAM channel binding mismatch")
        if self.keys is None or self.user is None:
            raise SaslAuthenticationFailed("authentication failed")
        h = _HASH[self.mechanism]
        auth_message = f"{self.client_first_bare},{self.server_first},{without_proof}".encode()
        signature = hmac.new(self.keys.stored_key, auth_message, h).digest()
        try:
            proof = base64.b64decode(proof_part, validate=True)
        except ValueError:
            raise SaslAuthenticationFailed("SCRAM proof is not base64") from None
        if len(proof) != len(signature):
            raise SaslAuthenticationFailed("authentication failed")
        client_key = bytes(a ^ b for a, b in zip(proof, signature))
        if not hmac.compare_digest(h(client_key).digest(), self.keys.stored_key):
            raise SaslAuthenticationFailed("authentication failed")
        verifier = hmac.new(self.keys.server_key, auth_message, h).digest()
        return self.user, f"v={base64.b64encode(verifier).decode()}".encode()
