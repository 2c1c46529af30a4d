"""Authentication (bearer tokens → principals) and Kafka-style ACL authorisation.

The auth file is JSON::

    {
      "tokens": [
        {"principal": "User:alice", "token": "alice-secret"},
        {"principal": "User:bob",   "token_sha256": "<hex sha-256 of bob's token>"}
      ],
      "super_users": ["User:admin"],
      "acls": [
        {"principal": "User:alice", "operation": "Write", "resource_type": "Topic",
         "pattern_type": "Prefixed", "resource_name": "orders."},
        {"principal": "User:bob", "operations": ["Read"], "resource_type": "Group",
         "resource_name": "*"},
        {"principal": "User:alice", "operation": "IdempotentWrite", "resource_type": "Cluster"},
        {"principal": "User:*", "permission": "Deny", "operation": "All", "resource_type": "Topic",
         "resource_name": "secret"}
      ]
    }

Semantics are Kafka's (:mod:`lakelog.security.acl`): resource types ``Topic``,
``Group``, ``Cluster`` (name ``kafka-cluster``), ``TransactionalId``,
``DelegationToken``, ``User``, and the Schema Registry's ``Subject`` (auth file
only: Kafka's protocol has no code for it); pattern ``Literal`` (default; the name ``*``
matches every resource) or ``Prefixed``; an optional ``host`` (default ``*``);
principal ``User:*`` matches everyone; ``Deny`` wins over ``Allow``; ``All``
covers every operation; an allowed Read, Write, Delete or Alter implies
Describe, an allowed AlterConfigs implies DescribeConfigs.  Super users may do
everything.  ACLs created with Kafka's CreateAcls (stored in the root) apply
next to the file's.  Without an auth file the front is open: every request runs
as ``User:ANONYMOUS`` with every permission.

Immutable after loading (the root's ACLs change under it); thread-safe.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, Sequence

from lakelog.errors import (ClusterAuthorizationFailed, GroupAuthorizationFailed, InvalidConfig, KafkaError,
                            SaslAuthenticationFailed, TopicAuthorizationFailed, TransactionalIdAuthorizationFailed)
from lakelog.security.acl import (CLUSTER, CLUSTER_NAME, GROUP, OPERATIONS, RESOURCE_TYPES, SUBJECT, TOPIC,
                                  TRANSACTIONAL_ID, AclBinding, authorize, authorized_operations)

ANONYMOUS = "User:ANONYMOUS"
Acl = AclBinding  # one ACL binding (lakelog.security.acl)
_DENIED: dict[str, type[KafkaError]] = {TOPIC: TopicAuthorizationFailed, GROUP: GroupAuthorizationFailed,
                                        CLUSTER: ClusterAuthorizationFailed,
                                        TRANSACTIONAL_ID: TransactionalIdAuthorizationFailed,
                                        SUBJECT: ClusterAuthorizationFailed}
__all__ = ["ANONYMOUS", "CLUSTER", "CLUSTER_NAME", "GROUP", "SUBJECT", "TOPIC", "TRANSACTIONAL_ID", "Acl",
           "AclSource", "Authorizer", "Principal"]


@dataclass(frozen=True)
class Principal:
    """Who is calling (Kafka's ``KafkaPrincipal``, as ``User:<name>``) and from which address (None when the
    front does not know it: such a caller meets only ACLs for every host ``*``, and every DENY)."""

    name: str
    host: str | None = None


class AclSource(Protocol):
    """Where the ACLs created with Kafka's CreateAcls live (the root's cluster metadata)."""

    def acls(self) -> Sequence[AclBinding]: ...


def _canon(value: object, choices, what: str) -> str:
    for c in choices:
        if isinstance(value, str) and value.lower() == c.lower() and c not in ("Any", "Unknown", "Match"):
            return c
    names = ", ".join(c for c in choices if c not in ("Any", "Unknown", "Match"))
    raise InvalidConfig(f"auth file: {what} must be one of {names}, got {value!r}")


class Authorizer:
    """Resolves tokens to principals and answers ACL checks; ``enabled`` is False for an open front.

    The ACLs in force are the auth file's and, when ``dynamic`` is given, those created over Kafka's protocol
    (stored in the root, so every front of it applies them)."""

    def __init__(self, tokens: dict[str, str] | None = None, acls: list[AclBinding] | None = None,
                 super_users: set[str] | None = None, *, enabled: bool = True,
                 dynamic: AclSource | None = None) -> None:
        self.enabled = enabled
        self._tokens = dict(tokens or {})  # sha-256 hex of the token -> principal
        self.file_acls: tuple[AclBinding, ...] = tuple(acls or ())
        self.super_users = frozenset(super_users or ())
        self.dynamic = dynamic

    @classmethod
    def open(cls) -> "Authorizer":
        return cls(enabled=False)

    @classmethod
    def from_file(cls, path: str | Path, *, dynamic: AclSource | None = None) -> "Authorizer":
        """Load an auth file; ``INVALID_CONFIG`` naming the first problem."""
        try:
            doc = json.loads(Path(path).read_text())
        except (OSError, ValueError) as e:
            raise InvalidConfig(f"cannot read auth file {path}: {e}") from None
        if not isinstance(doc, dict):
            raise InvalidConfig(f"auth file {path} must hold a JSON object")
        tokens: dict[str, str] = {}
        for i, t in enumerate(doc.get("tokens") or []):
            principal = t.get("principal") if isinstance(t, dict) else None
            if not isinstance(principal, str) or ":" not in principal:
                raise InvalidConfig(f"auth file: tokens[{i}].principal must look like 'User:name'")
            if isinstance(t.get("token"), str) and t["token"]:
                digest = hashlib.sha256(t["token"].encode()).hexdigest()
            elif isinstance(t.get("token_sha256"), str) and len(t["token_sha256"]) == 64:
                digest = t["token_sha256"].lower()
            else:
                raise InvalidConfig(f"auth file: tokens[{i}] needs a non-empty 'token' or a 64-hex 'token_sha256'")
            tokens[digest] = principal
        acls = []
        for i, a in enumerate(doc.get("acls") or []):
            if not isinstance(a, dict) or not isinstance(a.get("principal"), str) or ":" not in a["principal"]:
                raise InvalidConfig(f"auth file: acls[{i}] needs a principal like 'User:name'")
            ops = a.get("operations") or [a.get("operation")]
            rtype = _canon(a.get("resource_type"), (*RESOURCE_TYPES, SUBJECT), f"acls[{i}].resource_type")
            name = a.get("resource_name", CLUSTER_NAME if rtype == CLUSTER else "*")
            if not isinstance(name, str) or not name:
                raise InvalidConfig(f"auth file: acls[{i}].resource_name must be a non-empty string")
            pattern = _canon(a.get("pattern_type", "Literal"), ("Literal", "Prefixed"), f"acls[{i}].pattern_type")
            permission = _canon(a.get("permission", "Allow"), ("Allow", "Deny"), f"acls[{i}].permission")
            host = a.get("host", "*")
            if not isinstance(host, str) or not host:
                raise InvalidConfig(f"auth file: acls[{i}].host must be '*' or an address")
            if not isinstance(ops, list):
                raise InvalidConfig(f"auth file: acls[{i}].operations must be a list")
            for op in ops:
                acls.append(AclBinding(rtype, name, pattern, a["principal"], host,
                                       _canon(op, OPERATIONS, f"acls[{i}].operation"), permission))
        supers = doc.get("super_users") or []
        if not isinstance(supers, list) or not all(isinstance(s, str) for s in supers):
            raise InvalidConfig("auth file: super_users must be a list of principals")
        return cls(tokens, acls, set(supers), dynamic=dynamic)

    def authenticate(self, authorization: str | None) -> Principal:
        """The principal for an ``Authorization`` header; ``SASL_AUTHENTICATION_FAILED`` (401) if unknown."""
        if not self.enabled:
            return Principal(ANONYMOUS)
        if not authorization:
            raise SaslAuthenticationFailed("this front requires a bearer token (Authorization: Bearer <token>)")
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise SaslAuthenticationFailed("the Authorization header must be 'Bearer <token>'")
        digest = hashlib.sha256(token.strip().encode()).hexdigest()
        for known, principal in self._tokens.items():
            if hmac.compare_digest(known, digest):
                return Principal(principal)
        raise SaslAuthenticationFailed("the bearer token is not known to this front")

    @property
    def acls(self) -> tuple[AclBinding, ...]:
        """Every ACL in force: the auth file's, then those created over Kafka's protocol."""
        return self.file_acls + tuple(self.dynamic.acls() if self.dynamic is not None else ())

    def allowed(self, principal: Principal, operation: str, resource_type: str, name: str = CLUSTER_NAME) -> bool:
        if not self.enabled:
            return True
        return authorize(self.acls, self.super_users, principal.name, principal.host, operation, resource_type,
                         name)

    def authorize(self, principal: Principal, operation: str, resource_type: str, name: str = CLUSTER_NAME) -> None:
        """Raise Kafka's ``*_AUTHORIZATION_FAILED`` (403) unless ``principal`` may do ``operation``."""
        if not self.allowed(principal, operation, resource_type, name):
            what = f"{resource_type} {name!r}" if resource_type != CLUSTER else "the cluster"
            raise _DENIED[resource_type](f"{principal.name} is not authorized to {operation} {what}")

    def authorized_operations(self, principal: Principal, resource_type: str, name: str = CLUSTER_NAME) -> int:
        """KIP-430's bitfield of what ``principal`` may do on the resource (every supported operation on an open
        front, as a broker without an authorizer answers)."""
        acls = self.acls if self.enabled else ()
        if not self.enabled:
            return authorized_operations(lambda *_: True, resource_type, name)
        return authorized_operations(
            lambda op, rt, n: authorize(acls, self.super_users, principal.name, principal.host, op, rt, n),
            resource_type, name)
