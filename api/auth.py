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

Semantics are Kafka's ``AclAuthorizer``: resource types ``Topic``, ``Group``,
``Cluster`` (name ``kafka-cluster``); pattern ``Literal`` (default; the name
``*`` matches every resource) or ``Prefixed``; principal ``User:*`` matches
everyone; ``Deny`` wins over ``Allow``; ``All`` covers every operation; an
allowed Read, Write, Delete or Alter implies Describe.  Super users may do
everything.  Without an auth file the front is open: every request runs as
``User:ANONYMOUS`` with every permission.

Immutable after loading; thread-safe.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import dataclass
from pathlib import Path

from lakelog.errors import (ClusterAuthorizationFailed, GroupAuthorizationFailed, InvalidConfig, KafkaError,
                            SaslAuthenticationFailed, TopicAuthorizationFailed, TransactionalIdAuthorizationFailed)

TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID = "Topic", "Group", "Cluster", "TransactionalId"
CLUSTER_NAME = "kafka-cluster"
OPERATIONS = ("All", "Read", "Write", "Create", "Delete", "Alter", "Describe", "IdempotentWrite")
_IMPLY_DESCRIBE = ("Read", "Write", "Delete", "Alter")
ANONYMOUS = "User:ANONYMOUS"
_DENIED: dict[str, type[KafkaError]] = {TOPIC: TopicAuthorizationFailed, GROUP: GroupAuthorizationFailed,
                                        CLUSTER: ClusterAuthorizationFailed,
                                        TRANSACTIONAL_ID: TransactionalIdAuthorizationFailed}


@dataclass(frozen=True)
class Principal:
    """Who is calling (Kafka's ``KafkaPrincipal``, as ``User:<name>``)."""

    name: str


@dataclass(frozen=True)
class Acl:
    """One ACL binding: ``permission`` ``operation`` on resources matching (type, pattern, name)."""

    principal: str
    operation: str
    resource_type: str
    resource_name: str = "*"
    pattern_type: str = "Literal"
    permission: str = "Allow"

    def matches(self, principal: str, operation: str, resource_type: str, name: str) -> bool:
        if self.resource_type != resource_type or self.principal not in (principal, "User:*"):
            return False
        if self.operation not in ("All", operation):
            return False
        if self.pattern_type == "Prefixed":
            return name.startswith(self.resource_name)
        return self.resource_name in ("*", name)


def _canon(value: object, choices: tuple[str, ...], what: str) -> str:
    for c in choices:
        if isinstance(value, str) and value.lower() == c.lower():
            return c
    raise InvalidConfig(f"auth file: {what} must be one of {', '.join(choices)}, got {value!r}")


class Authorizer:
    """Resolves tokens to principals and answers ACL checks; ``enabled`` is False for an open front."""

    def __init__(self, tokens: dict[str, str] | None = None, acls: list[Acl] | None = None,
                 super_users: set[str] | None = None, *, enabled: bool = True) -> None:
        self.enabled = enabled
        self._tokens = dict(tokens or {})  # sha-256 hex of the token -> principal
        self._acls = list(acls or [])
        self._super_users = set(super_users or ())

    @classmethod
    def open(cls) -> "Authorizer":
        return cls(enabled=False)

    @classmethod
    def from_file(cls, path: str | Path) -> "Authorizer":
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
            if not isinstance(a, dict) or not isinstance(a.get("principal"), str):
                raise InvalidConfig(f"auth file: acls[{i}] needs a principal")
            ops = a.get("operations") or [a.get("operation")]
            rtype = _canon(a.get("resource_type"), (TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID),
                           f"acls[{i}].resource_type")
            name = a.get("resource_name", CLUSTER_NAME if rtype == CLUSTER else "*")
            if not isinstance(name, str) or not name:
                raise InvalidConfig(f"auth file: acls[{i}].resource_name must be a non-empty string")
            pattern = _canon(a.get("pattern_type", "Literal"), ("Literal", "Prefixed"), f"acls[{i}].pattern_type")
            permission = _canon(a.get("permission", "Allow"), ("Allow", "Deny"), f"acls[{i}].permission")
            for op in ops:
                acls.append(Acl(a["principal"], _canon(op, OPERATIONS, f"acls[{i}].operation"), rtype, name,
                                pattern, permission))
        supers = doc.get("super_users") or []
        if not isinstance(supers, list) or not all(isinstance(s, str) for s in supers):
            raise InvalidConfig("auth file: super_users must be a list of principals")
        return cls(tokens, acls, set(supers))

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

    def allowed(self, principal: Principal, operation: str, resource_type: str, name: str = CLUSTER_NAME) -> bool:
        if not self.enabled or principal.name in self._super_users:
            return True
        who = principal.name
        if any(a.permission == "Deny" and a.matches(who, operation, resource_type, name) for a in self._acls):
            return False
        ops = (operation, *_IMPLY_DESCRIBE) if operation == "Describe" else (operation,)
        return any(a.permission == "Allow" and a.matches(who, op, resource_type, name)
                   for op in ops for a in self._acls)

    def authorize(self, principal: Principal, operation: str, resource_type: str, name: str = CLUSTER_NAME) -> None:
        """Raise Kafka's ``*_AUTHORIZATION_FAILED`` (403) unless ``principal`` may do ``operation``."""
        if not self.allowed(principal, operation, resource_type, name):
            what = f"{resource_type} {name!r}" if resource_type != CLUSTER else "the cluster"
            raise _DENIED[resource_type](f"{principal.name} is not authorized to {operation} {what}")
