"""Confluent v3 consumer groups, consumers, their assignments and lags, over the group coordinator and the
offsets service."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Request

from lakelog.broker.authorizer import GROUP, TOPIC, Principal
from lakelog.broker.offsets import fetch_offsets
from lakelog.errors import GroupIdNotFound, UnknownTopicOrPartition

from api.deps import AuthorizerDep, MetadataDep, OffsetStoreDep, PrincipalDep
from api.routers.members import CoordinatorDep
from api.v3 import resources as R
from api.v3.brokers import brokers, coordinator
from api.v3.deps import LinksDep, group_id_acl
from api.v3.errors import RestError

router = APIRouter(prefix="/v3/clusters/{cluster_id}/consumer-groups", tags=["Consumer Group (v3)"])
Describe = Annotated[Principal, group_id_acl("Describe")]


def _describe(coordinator_, store, group: str):
    """(state, protocol, leader, members) of a group known to the coordinator or only by its offsets."""
    try:
        d = coordinator_.describe(group)
        return d.state, d.protocol or None, d.leader, d.members
    except GroupIdNotFound:
        if group in store.list_groups():
            return "Empty", None, None, []
        raise GroupIdNotFound(f"Consumer group {group} could not be found.") from None


def _group(request: Request, links: R.Links, group: str, state: str, protocol: str | None) -> dict:
    app_state = request.app.state
    return R.consumer_group(links, group, state, protocol, coordinator(app_state, group, brokers(app_state)))


def _url(links: R.Links, group: str, path: str = "") -> str:
    return f"{links.cluster}/consumer-groups/{R.seg(group)}{path}"


@router.get("")
def list_groups(request: Request, links: LinksDep, store: OffsetStoreDep, coordinator_: CoordinatorDep,
                principal: PrincipalDep, authorizer: AuthorizerDep) -> dict:
    """Groups with members or committed offsets that the caller may Describe."""
    names = sorted(set(store.list_groups()) | {g.group_id for g in coordinator_.list_groups()})
    out = []
    for g in names:
        if authorizer.allowed(principal, "Describe", GROUP, g):
            state, protocol, _, _ = _describe(coordinator_, store, g)
            out.append(_group(request, links, g, state, protocol))
    return R.collection("KafkaConsumerGroupList", f"{links.cluster}/consumer-groups", out)


@router.get("/{consumer_group_id}")
def get_group(request: Request, consumer_group_id: str, links: LinksDep, store: OffsetStoreDep,
              coordinator_: CoordinatorDep, _: Describe) -> dict:
    state, protocol, _leader, _members = _describe(coordinator_, store, consumer_group_id)
    return _group(request, links, consumer_group_id, state, protocol)


@router.get("/{consumer_group_id}/consumers")
def list_consumers(consumer_group_id: str, links: LinksDep, store: OffsetStoreDep, coordinator_: CoordinatorDep,
                   _: Describe) -> dict:
    _, _, _, members = _describe(coordinator_, store, consumer_group_id)
    return R.collection("KafkaConsumerList", _url(links, consumer_group_id, "/consumers"),
                        [R.consumer(links, consumer_group_id, m.member_id, m.group_instance_id, m.client_id)
                         for m in members])


def _member(coordinator_, store, group: str, consumer_id: str):
    _, _, _, members = _describe(coordinator_, store, group)
    for m in members:
        if m.member_id == consumer_id:
            return m
    raise RestError(f"Consumer {consumer_id} could not be found in consumer group {group}.", status=404)


@router.get("/{consumer_group_id}/consumers/{consumer_id}")
def get_consumer(consumer_group_id: str, consumer_id: str, links: LinksDep, store: OffsetStoreDep,
                 coordinator_: CoordinatorDep, _: Describe) -> dict:
    m = _member(coordinator_, store, consumer_group_id, consumer_id)
    return R.consumer(links, consumer_group_id, m.member_id, m.group_instance_id, m.client_id)


def _assignments(links, group: str, consumer_id: str, store, metadata, coordinator_, principal,
                 authorizer) -> list[dict]:
    """The member's assigned partitions of topics the caller may Describe."""
    m = _member(coordinator_, store, group, consumer_id)
    committed = {(o.topic, o.partition) for o in store.fetch(group, None)}
    return [R.assignment(links, group, consumer_id, tp.topic, tp.partition, (tp.topic, tp.partition) in committed)
            for tp in m.partitions if authorizer.allowed(principal, "Describe", TOPIC, tp.topic)]


@router.get("/{consumer_group_id}/consumers/{consumer_id}/assignments")
def list_assignments(consumer_group_id: str, consumer_id: str, links: LinksDep, store: OffsetStoreDep,
                     metadata: MetadataDep, coordinator_: CoordinatorDep, principal: Describe,
                     authorizer: AuthorizerDep) -> dict:
    return R.collection("KafkaConsumerAssignmentList",
                        _url(links, consumer_group_id, f"/consumers/{R.seg(consumer_id)}/assignments"),
                        _assignments(links, consumer_group_id, consumer_id, store, metadata, coordinator_,
                                     principal, authorizer))


@router.get("/{consumer_group_id}/consumers/{consumer_id}/assignments/{topic_name}/partitions/{partition_id}")
def get_assignment(consumer_group_id: str, consumer_id: str, topic_name: str, partition_id: int, links: LinksDep,
                   store: OffsetStoreDep, metadata: MetadataDep, coordinator_: CoordinatorDep, principal: Describe,
                   authorizer: AuthorizerDep) -> dict:
    authorizer.authorize(principal, "Describe", TOPIC, topic_name)
    for a in _assignments(links, consumer_group_id, consumer_id, store, metadata, coordinator_, principal,
                          authorizer):
        if a["topic_name"] == topic_name and a["partition_id"] == partition_id:
            return a
    raise RestError(f"Consumer {consumer_id} of consumer group {consumer_group_id} is not assigned "
                    f"{topic_name}-{partition_id}.", status=404)


def _lags(links, group, store, metadata, coordinator_, principal, authorizer) -> list[dict]:
    _, _, _, members = _describe(coordinator_, store, group)
    owner = {}
    for m in members:
        for tp in m.partitions:
            owner[(tp.topic, tp.partition)] = (m.member_id, m.group_instance_id, m.client_id)
    entries = fetch_offsets(store, metadata, group, None, lambda t: authorizer.allowed(principal, "Describe", TOPIC, t))
    return [R.consumer_lag(links, group, e, owner.get((e["topic"], e["partition"]), ("", None, "")))
            for e in entries if e["lag"] is not None]


@router.get("/{consumer_group_id}/lags")
def list_lags(consumer_group_id: str, links: LinksDep, store: OffsetStoreDep, metadata: MetadataDep,
              coordinator_: CoordinatorDep, principal: Describe, authorizer: AuthorizerDep) -> dict:
    """Per partition with a committed offset: current offset, log end offset (high watermark) and lag; partitions
    of topics the caller may not Describe are left out."""
    return R.collection("KafkaConsumerLagList", _url(links, consumer_group_id, "/lags"),
                        _lags(links, consumer_group_id, store, metadata, coordinator_, principal, authorizer))


@router.get("/{consumer_group_id}/lag-summary")
def lag_summary(consumer_group_id: str, links: LinksDep, store: OffsetStoreDep, metadata: MetadataDep,
                coordinator_: CoordinatorDep, principal: Describe, authorizer: AuthorizerDep) -> dict:
    """Max and total lag of the group (both 0 while it has no committed offset)."""
    return R.lag_summary(links, consumer_group_id,
                         _lags(links, consumer_group_id, store, metadata, coordinator_, principal, authorizer))


@router.get("/{consumer_group_id}/lags/{topic_name}/partitions/{partition_id}")
def get_lag(consumer_group_id: str, topic_name: str, partition_id: int, links: LinksDep, store: OffsetStoreDep,
            metadata: MetadataDep, coordinator_: CoordinatorDep, principal: Describe,
            authorizer: AuthorizerDep) -> dict:
    authorizer.authorize(principal, "Describe", TOPIC, topic_name)
    for lag in _lags(links, consumer_group_id, store, metadata, coordinator_, principal, authorizer):
        if lag["topic_name"] == topic_name and lag["partition_id"] == partition_id:
            return lag
    raise UnknownTopicOrPartition(f"Consumer group {consumer_group_id} has no offset for {topic_name}-{partition_id}.")
