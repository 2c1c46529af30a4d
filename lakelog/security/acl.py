"""Kafka's ACLs: bindings, filters and the authorizer's decision, as Kafka's ``StandardAuthorizer`` makes it.

A binding allows or denies one principal one operation on the resources a
pattern matches (``LITERAL``: the name, or every name for ``*``; ``PREFIXED``:
names starting with it), from one host or every host (``*``).  The decision
(:func:`authorize`): super users may do everything; otherwise any matching
DENY refuses, else any matching ALLOW grants, else the request is refused
(Kafka's ``allow.everyone.if.no.acl.found=false``).  An ALLOW of Read, Write,
Delete or Alter implies Describe, an ALLOW of AlterConfigs implies
DescribeConfigs; ``All`` matches every operation; principal ``User:*`` matches
everyone.  :func:`authorized_operations` is KIP-430's bitfield.

Names are Kafka's (``kafka-acls`` spells operations ``Read``,
``IdempotentWrite``, ``DescribeConfigs``); codes are the protocol's. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

from lakelog.errors import InvalidRequest

# Kafka's ResourceType, PatternType, AclOperation and AclPermissionType codes.
RESOURCE_TYPES = {"Unknown": 0, "Any": 1, "Topic": 2, "Group": 3, "Cluster": 4, "TransactionalId": 5,
                  "DelegationToken": 6, "User": 7}
PATTERN_TYPES = {"Unknown": 0, "Any": 1, "Match": 2, "Literal": 3, "Prefixed": 4}
OPERATIONS = {"Unknown": 0, "Any": 1, "All": 2, "Read": 3, "Write": 4, "Create": 5, "Delete": 6, "Alter": 7,
              "Describe": 8, "ClusterAction": 9, "DescribeConfigs": 10, "AlterConfigs": 11, "IdempotentWrite": 12,
              "CreateTokens": 13, "DescribeTokens": 14, "TwoPhaseCommit": 15}
PERMISSIONS = {"Unknown": 0, "Any": 1, "Deny": 2, "Allow": 3}
RESOURCE_NAMES = {v: k for k, v in RESOURCE_TYPES.items()}
PATTERN_NAMES = {v: k for k, v in PATTERN_TYPES.items()}
OPERATION_NAMES = {v: k for k, v in OPERATIONS.items()}
PERMISSION_NAMES = {v: k for k, v in PERMISSIONS.items()}

TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID = "Topic", "Group", "Cluster", "TransactionalId"
#: A Schema Registry subject (api/routers/schema_registry.py): a resource type of the auth file only, as Kafka's
#: protocol has no code for it; Kafka's ACL APIs neither create nor list such ACLs.
SUBJECT = "Subject"
CLUSTER_NAME = "kafka-cluster"
WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"

#: The operations each resource type supports (Kafka's ``AclEntry.supportedOperations``): what KIP-430's
#: authorized operations are computed over.
SUPPORTED_OPERATIONS = {
    TOPIC: ("Read", "Write", "Create", "Describe", "Delete", "Alter", "DescribeConfigs", "AlterConfigs"),
    GROUP: ("Read", "Describe", "Delete", "DescribeConfigs", "AlterConfigs"),
    CLUSTER: ("Create", "ClusterAction", "DescribeConfigs", "AlterConfigs", "IdempotentWrite", "Alter", "Describe"),
    TRANSACTIONAL_ID: ("Describe", "Write", "TwoPhaseCommit"),
    "DelegationToken": ("Describe",),
    "User": ("CreateTokens", "DescribeTokens"),
}
_IMPLIES_DESCRIBE = frozenset({"Describe", "Read", "Write", "Delete", "Alter"})
_IMPLIES_DESCRIBE_CONFIGS = frozenset({"DescribeConfigs", "AlterConfigs"})


@dataclass(frozen=True, order=True)
class AclBinding:
    """One ACL (Kafka's ``AclBinding``): a resource pattern and an access control entry."""

    resource_type: str
    resource_name: str
    pattern_type: str
    principal: str
    host: str
    operation: str
    permission: str

    def to_json(self) -> dict:
        return {"resource_type": self.resource_type, "resource_name": self.resource_name,
                "pattern_type": self.pattern_type, "principal": self.principal, "host": self.host,
                "operation": self.operation, "permission": self.permission}

    @classmethod
    def from_json(cls, d: dict) -> "AclBinding":
        return validate_binding(cls(**{k: d[k] for k in ("resource_type", "resource_name", "pattern_type",
                                                         "principal", "host", "operation", "permission")}))


@dataclass(frozen=True)
class AclFilter:
    """Kafka's ``AclBindingFilter``: None matches any name, principal or host; ``Any`` any type, pattern,
    operation or permission; pattern ``Match`` finds every binding that applies to the named resource."""

    resource_type: str = "Any"
    resource_name: str | None = None
    pattern_type: str = "Any"
    principal: str | None = None
    host: str | None = None
    operation: str = "Any"
    permission: str = "Any"

    def matches(self, b: AclBinding) -> bool:
        if b.resource_type not in RESOURCE_TYPES:  # Subject: not a resource type of Kafka's protocol
            return False
        if self.resource_type != "Any" and self.resource_type != b.resource_type:
            return False
        if self.pattern_type not in ("Any", "Match") and self.pattern_type != b.pattern_type:
            return False
        if self.resource_name is not None:
            if self.pattern_type in ("Any", b.pattern_type):
                if self.resource_name != b.resource_name:
                    return False
            elif b.pattern_type == "Literal":  # Match
                if b.resource_name not in (self.resource_name, WILDCARD):
                    return False
            elif not self.resource_name.startswith(b.resource_name):  # Match against a PREFIXED binding
                return False
        if self.principal is not None and self.principal != b.principal:
            return False
        if self.host is not None and self.host != b.host:
            return False
        if self.operation != "Any" and self.operation != b.operation:
            return False
        return self.permission == "Any" or self.permission == b.permission


def _name(table: dict[int, str], code: int, what: str) -> str:
    name = table.get(code)
    if name is None or name == "Unknown":
        raise InvalidRequest(f"unknown {what} {code}")
    return name


def binding_from_codes(resource_type: int, resource_name: str, pattern_type: int, principal: str, host: str,
                       operation: int, permission: int) -> AclBinding:
    """A binding from CreateAcls' codes, validated as Kafka's controller validates new ACLs."""
    return validate_binding(AclBinding(_name(RESOURCE_NAMES, resource_type, "resource type"), resource_name,
                                       _name(PATTERN_NAMES, pattern_type, "pattern type"), principal, host,
                                       _name(OPERATION_NAMES, operation, "operation"),
                                       _name(PERMISSION_NAMES, permission, "permission type")))


def filter_from_codes(resource_type: int, resource_name: str | None, pattern_type: int, principal: str | None,
                      host: str | None, operation: int, permission: int) -> AclFilter:
    """A filter from DescribeAcls' or DeleteAcls' codes; ``INVALID_REQUEST`` for UNKNOWN or out-of-range codes."""
    return AclFilter(_name(RESOURCE_NAMES, resource_type, "resource type"), resource_name,
                     _name(PATTERN_NAMES, pattern_type, "pattern type"), principal, host,
                     _name(OPERATION_NAMES, operation, "operation"), _name(PERMISSION_NAMES, permission,
                                                                           "permission type"))


def validate_binding(b: AclBinding) -> AclBinding:
    """``b`` if Kafka would store it (``AclControlManager.validateNewAcl`` and the broker's checks), else
    ``INVALID_REQUEST`` with Kafka's message."""
    if b.resource_type not in RESOURCE_TYPES or b.resource_type in ("Any", "Unknown"):
        raise InvalidRequest(f"Invalid resourceType {b.resource_type}")
    if b.pattern_type not in ("Literal", "Prefixed"):
        raise InvalidRequest(f"Invalid patternType {b.pattern_type}")
    if b.operation not in OPERATIONS or b.operation in ("Any", "Unknown"):
        raise InvalidRequest(f"Invalid operation {b.operation}")
    if b.permission not in ("Allow", "Deny"):
        raise InvalidRequest(f"Invalid permissionType {b.permission}")
    if not b.resource_name:
        raise InvalidRequest("Invalid empty resource name")
    if b.resource_type == CLUSTER and b.resource_name != CLUSTER_NAME:
        raise InvalidRequest(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
    if ":" not in b.principal:
        raise InvalidRequest(f"Could not parse principal from `{b.principal}` (no colon is present separating "
                             "the principal type from the principal name)")
    if not b.host:
        raise InvalidRequest("Invalid empty host")
    return b


def _applies(b: AclBinding, principal: str, host: str | None, operation: str) -> str | None:
    """'Allow' or 'Deny' if ``b`` decides ``operation`` for ``principal`` from ``host`` (resource already
    matched), else None. An unknown host (None) meets only ``*`` ALLOWs, but every DENY."""
    if b.principal not in (principal, WILDCARD_PRINCIPAL):
        return None
    if b.host != WILDCARD and b.host != host and not (host is None and b.permission == "Deny"):
        return None
    if b.operation != "All":
        if b.permission == "Allow":
            if operation == "Describe":
                if b.operation not in _IMPLIES_DESCRIBE:
                    return None
            elif operation == "DescribeConfigs":
                if b.operation not in _IMPLIES_DESCRIBE_CONFIGS:
                    return None
            elif operation != b.operation:
                return None
        elif operation != b.operation:
            return None
    return b.permission


def _resource_matches(b: AclBinding, resource_type: str, name: str) -> bool:
    if b.resource_type != resource_type:
        return False
    if b.pattern_type == "Prefixed":
        return name.startswith(b.resource_name)
    return b.resource_name in (WILDCARD, name)


def authorize(acls: Iterable[AclBinding], super_users: Iterable[str] | frozenset[str], principal: str,
              host: str | None, operation: str, resource_type: str, name: str) -> bool:
    """Whether ``principal`` connecting from ``host`` may do ``operation`` on the named resource."""
    if principal in super_users:
        return True
    allowed = False
    for b in acls:
        if not _resource_matches(b, resource_type, name):
            continue
        decision = _applies(b, principal, host, operation)
        if decision == "Deny":
            return False
        allowed = allowed or decision == "Allow"
    return allowed


def operations_bitfield(operations: Iterable[str]) -> int:
    """KIP-430's bitfield: bit ``code`` set for each operation (a signed 32-bit value)."""
    bits = 0
    for op in operations:
        bits |= 1 << OPERATIONS[op]
    return bits - (1 << 32) if bits >= 1 << 31 else bits


def authorized_operations(allowed, resource_type: str, name: str) -> int:
    """KIP-430's authorized operations of a resource: ``allowed(operation, resource_type, name)`` asked for each
    operation the type supports, as Kafka's ``AuthHelper.authorizedOperations``."""
    return operations_bitfield(op for op in SUPPORTED_OPERATIONS[resource_type] if allowed(op, resource_type, name))


def group_by_resource(bindings: Sequence[AclBinding]) -> list[tuple[tuple[str, str, str], list[AclBinding]]]:
    """Bindings grouped by (resource type, name, pattern type), as DescribeAcls answers them."""
    groups: dict[tuple[str, str, str], list[AclBinding]] = {}
    for b in sorted(bindings):
        groups.setdefault((b.resource_type, b.resource_name, b.pattern_type), []).append(b)
    return list(groups.items())
