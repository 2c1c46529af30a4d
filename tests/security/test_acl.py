"""Kafka's authorizer decisions, filters and KIP-430 bitfields (lakelog.security.acl), table-driven."""

from __future__ import annotations

import pytest

from lakelog.errors import InvalidRequest
from lakelog.security.acl import (AclBinding, AclFilter, authorize, authorized_operations, binding_from_codes,
                                  filter_from_codes, operations_bitfield)


def acl(op, name="t", *, rtype="Topic", pattern="Literal", principal="User:alice", host="*", permission="Allow"):
    return AclBinding(rtype, name, pattern, principal, host, op, permission)


@pytest.mark.parametrize("acls,operation,name,host,allowed", [
    ([], "Read", "t", "1.2.3.4", False),  # allow.everyone.if.no.acl.found=false
    ([acl("Read")], "Read", "t", None, True),
    ([acl("Read")], "Write", "t", None, False),
    ([acl("Read")], "Describe", "t", None, True),  # Read implies Describe
    ([acl("Write")], "Describe", "t", None, True),
    ([acl("Alter")], "Describe", "t", None, True),
    ([acl("Delete")], "Describe", "t", None, True),
    ([acl("Create")], "Describe", "t", None, False),
    ([acl("AlterConfigs")], "DescribeConfigs", "t", None, True),  # AlterConfigs implies DescribeConfigs
    ([acl("Alter")], "AlterConfigs", "t", None, False),
    ([acl("All")], "IdempotentWrite", "t", None, True),
    ([acl("Read"), acl("Read", permission="Deny")], "Read", "t", None, False),  # deny wins
    ([acl("All"), acl("Read", permission="Deny")], "Describe", "t", None, True),  # a DENY Read denies only Read
    ([acl("Read"), acl("All", permission="Deny")], "Describe", "t", None, False),
    ([acl("Read", "*")], "Read", "anything", None, True),
    ([acl("Read", "or", pattern="Prefixed")], "Read", "orders", None, True),
    ([acl("Read", "or", pattern="Prefixed")], "Read", "o", None, False),
    ([acl("Read", "or")], "Read", "orders", None, False),  # a literal is no prefix
    ([acl("Read", principal="User:*")], "Read", "t", None, True),
    ([acl("Read", principal="User:bob")], "Read", "t", None, False),
    ([acl("Read", host="10.0.0.1")], "Read", "t", "10.0.0.1", True),
    ([acl("Read", host="10.0.0.1")], "Read", "t", "10.0.0.2", False),
    ([acl("Read", host="10.0.0.1")], "Read", "t", None, False),  # an unknown host meets only '*' ALLOWs ...
    ([acl("Read"), acl("Read", host="10.0.0.1", permission="Deny")], "Read", "t", None, False),  # ... and every DENY
    ([acl("Read", rtype="Group")], "Read", "t", None, False),
])
def test_decisions(acls, operation, name, host, allowed):
    assert authorize(acls, (), "User:alice", host, operation, "Topic", name) is allowed


def test_super_users_may_do_everything():
    assert authorize([acl("Read", permission="Deny")], {"User:alice"}, "User:alice", None, "Read", "Topic", "t")


def test_authorized_operations_bitfields():
    everything = authorized_operations(lambda *_: True, "Topic", "t")
    assert everything == operations_bitfield(["Read", "Write", "Create", "Describe", "Delete", "Alter",
                                              "DescribeConfigs", "AlterConfigs"]) == 0b110111111000
    cluster = authorized_operations(lambda *_: True, "Cluster", "kafka-cluster")
    assert bin(cluster).count("1") == 7
    reader = authorized_operations(lambda op, *_: authorize([acl("Read")], (), "User:alice", None, op, "Topic", "t"),
                                   "Topic", "t")
    assert reader == (1 << 3) | (1 << 8)  # Read and the Describe it implies


@pytest.mark.parametrize("f,matches", [
    (AclFilter(), True),
    (AclFilter(resource_type="Group"), False),
    (AclFilter(resource_name="orders"), False),  # Any pattern: the exact name
    (AclFilter(resource_name="or"), True),
    (AclFilter(resource_name="orders", pattern_type="Match"), True),  # Match: every ACL that applies to 'orders'
    (AclFilter(resource_name="o", pattern_type="Match"), False),
    (AclFilter(pattern_type="Literal"), False),
    (AclFilter(principal="User:alice", host="*", operation="Read", permission="Allow"), True),
    (AclFilter(operation="Write"), False),
    (AclFilter(permission="Deny"), False),
])
def test_filters(f, matches):
    assert f.matches(acl("Read", "or", pattern="Prefixed")) is matches


@pytest.mark.parametrize("codes,message", [
    ((0, "t", 3, "User:a", "*", 3, 3), "unknown resource type 0"),
    ((1, "t", 3, "User:a", "*", 3, 3), "Invalid resourceType Any"),
    ((2, "t", 2, "User:a", "*", 3, 3), "Invalid patternType Match"),
    ((2, "t", 3, "User:a", "*", 1, 3), "Invalid operation Any"),
    ((2, "t", 3, "User:a", "*", 3, 1), "Invalid permissionType Any"),
    ((2, "", 3, "User:a", "*", 3, 3), "Invalid empty resource name"),
    ((4, "other", 3, "User:a", "*", 3, 3), "The only valid name for the CLUSTER resource is kafka-cluster"),
    ((2, "t", 3, "alice", "*", 3, 3), "Could not parse principal from `alice`"),
    ((2, "t", 3, "User:a", "*", 99, 3), "unknown operation 99"),
])
def test_bindings_kafka_would_refuse(codes, message):
    with pytest.raises(InvalidRequest) as e:
        binding_from_codes(*codes)
    assert message in e.value.message


def test_filters_refuse_unknown_codes():
    with pytest.raises(InvalidRequest):
        filter_from_codes(2, None, 0, None, None, 1, 1)
    assert filter_from_codes(1, None, 1, None, None, 1, 1) == AclFilter()
