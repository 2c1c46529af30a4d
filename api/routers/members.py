"""Consumer-group membership over HTTP, on KIP-848's consumer protocol (ConsumerGroupHeartbeat).

A member joins (epoch 0), then heartbeats every ``heartbeat_interval_ms`` with its epoch and the partitions it
still owns; every answer carries its epoch and, when it changed, the partitions it may own now. The coordinator
assigns (server-side ``uniform`` or ``range``) and reconciles each member on its own heartbeats: partitions
leave their old owner before they reach a new one. No call waits for other members. HTTP members share groups
with Kafka members: librdkafka and Java consumers with ``group.protocol=consumer`` directly, classic ones
as Kafka 4 serves them (docs/consumer-groups.md).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request

from lakelog.broker.authorizer import TOPIC, Principal
from lakelog.broker.offsets import fetch_offsets
from lakelog.errors import GroupIdNotFound
from lakelog.group.assignors import TopicPartition
from lakelog.group.consumer_group_coordinator import ConsumerHeartbeat
from lakelog.group.group_coordinator import GroupCoordinator

from api.deps import AuthorizerDep, MetadataDep, OffsetStoreDep, group_acl
from api.schemas import GroupOut, HeartbeatIn, HeartbeatOut, JoinGroupIn, error_responses

router = APIRouter(prefix="/v1/groups", tags=["groups"])
LEAVE_EPOCH, STATIC_LEAVE_EPOCH = -1, -2


def get_coordinator(request: Request) -> GroupCoordinator:
    return request.app.state.coordinator


CoordinatorDep = Annotated[GroupCoordinator, Depends(get_coordinator)]


def _tps(tps) -> list[dict]:
    return [{"topic": tp.topic, "partition": tp.partition} for tp in sorted(tps)]


def _answer(r: ConsumerHeartbeat) -> dict:
    return {"member_id": r.member_id, "member_epoch": r.member_epoch, "heartbeat_interval_ms": r.heartbeat_interval_ms,
            "assignment": None if r.assignment is None else _tps(r.assignment)}


@router.post("/{group}/members", response_model=HeartbeatOut, responses=error_responses(400, 401, 403, 409))
def join(group: str, body: JoinGroupIn, request: Request, coordinator: CoordinatorDep, authorizer: AuthorizerDep,
         principal: Annotated[Principal, Depends(group_acl("Read"))]) -> dict:
    """Join (ConsumerGroupHeartbeat with epoch 0): answers at once with the member id, its epoch and the
    partitions it may own now (more arrive on later heartbeats as other members release them).

    Needs Read on the group and Describe on every subscribed topic."""
    for t in body.topics:
        authorizer.authorize(principal, "Describe", TOPIC, t)
    return _answer(coordinator.consumer_heartbeat(
        group, member_id=body.member_id or "", member_epoch=0, instance_id=body.group_instance_id,
        rebalance_timeout_ms=body.rebalance_timeout_ms, subscribed_topics=body.topics,
        server_assignor=body.server_assignor, owned=(), client_id=body.client_id, client_host=_host(request),
        session_timeout_ms=body.session_timeout_ms))


@router.post("/{group}/members/{member_id}/heartbeat", response_model=HeartbeatOut,
             responses=error_responses(400, 401, 403, 404, 409))
def heartbeat(group: str, member_id: str, body: HeartbeatIn, request: Request, coordinator: CoordinatorDep,
              authorizer: AuthorizerDep, principal: Annotated[Principal, Depends(group_acl("Read"))]) -> dict:
    """Heartbeat and reconcile: report the partitions still owned; 409 ``FENCED_MEMBER_EPOCH`` (110) or
    ``UNKNOWN_MEMBER_ID`` (25) means give up every partition and join again."""
    for t in body.topics or ():
        authorizer.authorize(principal, "Describe", TOPIC, t)
    return _answer(coordinator.consumer_heartbeat(
        group, member_id=member_id, member_epoch=body.member_epoch, instance_id=body.group_instance_id,
        subscribed_topics=body.topics, owned=[TopicPartition(o.topic, o.partition) for o in body.owned],
        client_host=_host(request)))


@router.delete("/{group}/members/{member_id}", responses=error_responses(401, 403, 404, 409))
def leave(group: str, member_id: str, coordinator: CoordinatorDep,
          _: Annotated[Principal, Depends(group_acl("Read"))], group_instance_id: str | None = None) -> dict:
    """Leave: the member's partitions are reassigned at once. With ``group_instance_id`` a static member leaves
    only for now (epoch -2): it keeps its place and partitions until its session ends (KIP-345)."""
    epoch = LEAVE_EPOCH if group_instance_id is None else STATIC_LEAVE_EPOCH
    coordinator.consumer_heartbeat(group, member_id=member_id, member_epoch=epoch, instance_id=group_instance_id)
    return {"error_code": 0}


@router.get("/{group}", response_model=GroupOut, responses=error_responses(400, 401, 403, 404))
def describe(group: str, coordinator: CoordinatorDep, store: OffsetStoreDep, metadata: MetadataDep,
             principal: Annotated[Principal, Depends(group_acl("Describe"))], authorizer: AuthorizerDep) -> dict:
    """The group (either protocol) with committed offsets, high watermarks and lag (kafka-consumer-groups
    --describe)."""
    offsets = fetch_offsets(store, metadata, group, None, lambda t: authorizer.allowed(principal, "Describe", TOPIC, t))
    try:
        d = coordinator.describe(group)
    except GroupIdNotFound:
        if not offsets:
            raise
        return {"group": group, "state": "Empty", "type": "classic", "protocol": None, "generation": 0,
                "leader": None, "members": [], "offsets": offsets}
    return {"group": group, "state": d.state, "type": d.type, "protocol": d.protocol or None,
            "generation": d.generation, "leader": d.leader, "offsets": offsets,
            "members": [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                         "client_id": m.client_id, "topics": list(m.topics), "assignment": _tps(m.partitions),
                         "member_epoch": m.member_epoch, "protocol": "classic" if m.uses_classic else "consumer"}
                        for m in d.members]}


def _host(request: Request) -> str:
    return f"/{request.client.host}" if request.client else ""

