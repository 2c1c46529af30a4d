"""Confluent v3 consumer groups, consumers and lags, over the group coordinator and the offsets service."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends

from lakelog.errors import GroupIdNotFound, UnknownTopicOrPartition

from api.auth import GROUP, TOPIC, Principal
from api.deps import AuthorizerDep, MetadataDep, OffsetStoreDep, PrincipalDep, group_acl
from api.routers.members import CoordinatorDep
from api.services.offsets import fetch_offsets
from api.v3 import resources as R
from api.v3.deps import LinksDep

router = APIRouter(prefix="/v3/clusters/{cluster_id}/consumer-groups", tags=["Consumer Group (v3)"])


def _group_acl(operation: str):
    check = group_acl(operation)

    async def dep(consumer_group_id: str, principal: PrincipalDep, authorizer: AuthorizerDep) -> Principal:
        return await check(consumer_group_id, principal, authorizer)

    return Depends(dep)


def _describe(coordinator, store, group: str):
    """(state, protocol, leader, members) of a group known to the coordinator or only by its offsets."""
    try:
        d = coordinator.describe(group)
        return d.state, d.protocol, d.leader, d.members
    except GroupIdNotFound:
        if group in store.list_groups():
            return "Empty", None, None, []
        raise GroupIdNotFound(f"Consumer group {group} could not be found.") from None


@router.get("")
def list_groups(links: LinksDep, store: OffsetStoreDep, coordinator: CoordinatorDep, principal: PrincipalDep,
                authorizer: AuthorizerDep) -> dict:
    """Groups with members or committed offsets that the caller may Describe."""
    names = sorted(set(store.list_groups()) | {g for g, _ in coordinator.list_groups()})
    out = []
    for g in names:
        if authorizer.allowed(principal, "Describe", GROUP, g):
            state, protocol, leader, _ = _describe(coordinator, store, g)
            out.append(R.consumer_group(links, g, state, protocol, leader))
    return R.collection("KafkaConsumerGroupList", f"{links.cluster}/consumer-groups", out)


@router.get("/{consumer_group_id}")
def get_group(consumer_group_id: str, links: LinksDep, store: OffsetStoreDep, coordinator: CoordinatorDep,
              _: Annotated[Principal, _group_acl("Describe")]) -> dict:
    state, protocol, leader, _members = _describe(coordinator, store, consumer_group_id)
    return R.consumer_group(links, consumer_group_id, state, protocol, leader)


@router.get("/{consumer_group_id}/consumers")
def list_consumers(consumer_group_id: str, links: LinksDep, store: OffsetStoreDep, coordinator: CoordinatorDep,
                   _: Annotated[Principal, _group_acl("Describe")]) -> dict:
    _, _, _, members = _describe(coordinator, store, consumer_group_id)
    return R.collection("KafkaConsumerList", f"{links.cluster}/consumer-groups/{consumer_group_id}/consumers",
                        [R.consumer(links, consumer_group_id, m.member_id, m.group_instance_id, m.client_id,
                                    m.assignment) for m in members])


def _lags(links, group, store, metadata, coordinator, principal, authorizer) -> list[dict]:
    _, _, _, members = _describe(coordinator, store, group)
    owner = {}
    for m in members:
        for tp in m.assignment:
            owner[(tp.topic, tp.partition)] = (m.member_id, m.group_instance_id, m.client_id)
    entries = fetch_offsets(store, metadata, group, None, lambda t: authorizer.allowed(principal, "Describe", TOPIC, t))
    return [R.consumer_lag(links, group, e, owner.get((e["topic"], e["partition"]), ("", None, "")))
            for e in entries if e["lag"] is not None]


@router.get("/{consumer_group_id}/lags")
def list_lags(consumer_group_id: str, links: LinksDep, store: OffsetStoreDep, metadata: MetadataDep,
              coordinator: CoordinatorDep, principal: Annotated[Principal, _group_acl("Describe")],
              authorizer: AuthorizerDep) -> dict:
    """Per partition with a committed offset: current offset, log end offset (high watermark) and lag; partitions
    of topics the caller may not Describe are left out."""
    return R.collection("KafkaConsumerLagList", f"{links.cluster}/consumer-groups/{consumer_group_id}/lags",
                        _lags(links, consumer_group_id, store, metadata, coordinator, principal, authorizer))


@router.get("/{consumer_group_id}/lag-summary")
def lag_summary(consumer_group_id: str, links: LinksDep, store: OffsetStoreDep, metadata: MetadataDep,
                coordinator: CoordinatorDep, principal: Annotated[Principal, _group_acl("Describe")],
                authorizer: AuthorizerDep) -> dict:
    """Max and total lag of the group."""
    return R.lag_summary(links, consumer_group_id,
                         _lags(links, consumer_group_id, store, metadata, coordinator, principal, authorizer))


@router.get("/{consumer_group_id}/lags/{topic_name}/partitions/{partition_id}")
def get_lag(consumer_group_id: str, topic_name: str, partition_id: int, links: LinksDep, store: OffsetStoreDep,
            metadata: MetadataDep, coordinator: CoordinatorDep,
            principal: Annotated[Principal, _group_acl("Describe")], authorizer: AuthorizerDep) -> dict:
    authorizer.authorize(principal, "Describe", TOPIC, topic_name)
    for lag in _lags(links, consumer_group_id, store, metadata, coordinator, principal, authorizer):
        if lag["topic_name"] == topic_name and lag["partition_id"] == partition_id:
            return lag
    raise UnknownTopicOrPartition(f"Consumer group {consumer_group_id} has no offset for {topic_name}-{partition_id}.")
