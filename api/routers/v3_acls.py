"""Confluent v3 ACL search: ``GET /v3/clusters/{cluster_id}/acls`` lists the ACL bindings in force (the front's
auth file's and those created with Kafka's CreateAcls, kept in the root) that match the filter, with Kafka's
``AclBindingFilter`` semantics and Confluent's names.  They are not created or deleted here.  An open front (no
auth file) has none."""

from __future__ import annotations

from fastapi import APIRouter

from lakelog.broker.authorizer import CLUSTER, GROUP, SUBJECT, TOPIC, TRANSACTIONAL_ID, Acl

from api.deps import AuthorizerDep, PrincipalDep
from api.v3 import resources as R
from api.v3.deps import LinksDep
from api.v3.errors import BadRequest

router = APIRouter(prefix="/v3/clusters/{cluster_id}/acls", tags=["ACL (v3)"])

RESOURCE_TYPES = {TOPIC: "TOPIC", GROUP: "GROUP", CLUSTER: "CLUSTER", TRANSACTIONAL_ID: "TRANSACTIONAL_ID",
                  "DelegationToken": "DELEGATION_TOKEN", "User": "USER", SUBJECT: "SUBJECT"}
PATTERN_TYPES = {"Literal": "LITERAL", "Prefixed": "PREFIXED"}
OPERATIONS = {"All": "ALL", "Read": "READ", "Write": "WRITE", "Create": "CREATE", "Delete": "DELETE",
              "Alter": "ALTER", "Describe": "DESCRIBE", "IdempotentWrite": "IDEMPOTENT_WRITE",
              "ClusterAction": "CLUSTER_ACTION", "DescribeConfigs": "DESCRIBE_CONFIGS", "AlterConfigs": "ALTER_CONFIGS",
              "CreateTokens": "CREATE_TOKENS", "DescribeTokens": "DESCRIBE_TOKENS",
              "TwoPhaseCommit": "TWO_PHASE_COMMIT"}
PERMISSIONS = {"Allow": "ALLOW", "Deny": "DENY"}
# Filter values Kafka's AclBindingFilter knows besides these (they match nothing); UNKNOWN is refused.
_OTHER_TYPES: set[str] = set()
_OTHER_OPERATIONS: set[str] = set()


def _choice(name: str, value: str, known: set[str]) -> str:
    value = value.upper()
    if value not in known:
        raise BadRequest(f"{name} {value!r} is not one of {', '.join(sorted(known))}")
    return value


def matches(acl: Acl, resource_type: str, resource_name: str | None, pattern_type: str, principal: str | None,
            host: str | None, operation: str, permission: str) -> bool:
    """Whether the binding ``acl`` matches the filter (Confluent's upper-case names; ``ANY`` or None: any)."""
    if resource_type != "ANY" and RESOURCE_TYPES[acl.resource_type] != resource_type:
        return False
    if pattern_type == "MATCH":  # the bindings that apply to the named resource
        if resource_name is not None and not (
                acl.resource_name in (resource_name, "*") if acl.pattern_type == "Literal"
                else resource_name.startswith(acl.resource_name)):
            return False
    else:
        if pattern_type != "ANY" and PATTERN_TYPES[acl.pattern_type] != pattern_type:
            return False
        if resource_name is not None and acl.resource_name != resource_name:
            return False
    return ((principal is None or acl.principal == principal)
            and host in (None, acl.host) and operation in ("ANY", OPERATIONS[acl.operation])
            and permission in ("ANY", PERMISSIONS[acl.permission]))


@router.get("")
def search_acls(links: LinksDep, caller: PrincipalDep, authorizer: AuthorizerDep, resource_type: str = "ANY",
                resource_name: str | None = None, pattern_type: str = "ANY", principal: str | None = None,
                host: str | None = None, operation: str = "ANY", permission: str = "ANY") -> dict:
    """ACL bindings matching the filter (Describe on the cluster, as Kafka's DescribeAcls)."""
    authorizer.authorize(caller, "Describe", CLUSTER)
    resource_type = _choice("resource_type", resource_type, {"ANY", *RESOURCE_TYPES.values(), *_OTHER_TYPES})
    pattern_type = _choice("pattern_type", pattern_type, {"ANY", "MATCH", *PATTERN_TYPES.values()})
    operation = _choice("operation", operation, {"ANY", *OPERATIONS.values(), *_OTHER_OPERATIONS})
    permission = _choice("permission", permission, {"ANY", *PERMISSIONS.values()})
    found = [R.acl(links, RESOURCE_TYPES[a.resource_type], a.resource_name, PATTERN_TYPES[a.pattern_type],
                   a.principal, a.host, OPERATIONS[a.operation], PERMISSIONS[a.permission])
             for a in authorizer.acls
             if matches(a, resource_type, resource_name, pattern_type, principal, host, operation, permission)]
    return R.collection("KafkaAclList", f"{links.cluster}/acls", found)
