"""Consumer-group membership: join, heartbeat, leave, describe (the group coordinator).

Routes are sync ``def``: a join blocks (in the threadpool) until the group's
rebalance completes, like Kafka's JoinGroup.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request

from api.auth import TOPIC, Principal
from api.deps import AuthorizerDep, MetadataDep, OffsetStoreDep, group_acl
from api.schemas import GroupOut, HeartbeatIn, JoinGroupIn, JoinGroupOut, error_responses
from api.services.offsets import fetch_offsets
from lakelog.group.group_coordinator import GroupCoordinator

router = APIRouter(prefix="/v1/groups", tags=["groups"])


def get_coordinator(request: Request) -> GroupCoordinator:
    return request.app.state.coordinator


CoordinatorDep = Annotated[GroupCoordinator, Depends(get_coordinator)]


def _tps(tps) -> list[dict]:
    return [{"topic": tp.topic, "partition": tp.partition} for tp in tps]


@router.post("/{group}/members", response_model=JoinGroupOut, responses=error_responses(400, 401, 403, 409))
def join(group: str, body: JoinGroupIn, coordinator: CoordinatorDep, authorizer: AuthorizerDep,
         principal: Annotated[Principal, Depends(group_acl("Read"))]) -> dict:
    """JoinGroup: (re)join and wait for the rebalance; answers this member's assignment.

    Needs Read on the group and Describe on every subscribed topic.
    """
    for t in body.topics:
        authorizer.authorize(principal, "Describe", TOPIC, t)
    r = coordinator.join(group, topics=body.topics, protocols=body.protocols, member_id=body.member_id,
                         group_instance_id=body.group_instance_id, client_id=body.client_id,
                         session_timeout_ms=body.session_timeout_ms, rebalance_timeout_ms=body.rebalance_timeout_ms,
                         timeout_s=body.rebalance_timeout_ms / 1000 + 5)
    return {"member_id": r.member_id, "generation": r.generation, "protocol": r.protocol, "leader": r.leader,
            "members": r.members, "assignment": _tps(r.assignment)}


@router.post("/{group}/members/{member_id}/heartbeat", responses=error_responses(400, 401, 403, 404, 409))
def heartbeat(group: str, member_id: str, body: HeartbeatIn, coordinator: CoordinatorDep,
              _: Annotated[Principal, Depends(group_acl("Read"))]) -> dict:
    """Heartbeat: 409 ``REBALANCE_IN_PROGRESS`` means rejoin now."""
    coordinator.heartbeat(group, member_id, body.generation, body.group_instance_id)
    return {"error_code": 0}


@router.delete("/{group}/members/{member_id}", responses=error_responses(401, 403, 404, 409))
def leave(group: str, member_id: str, coordinator: CoordinatorDep,
          _: Annotated[Principal, Depends(group_acl("Read"))]) -> dict:
    """LeaveGroup: the member's partitions are reassigned at once."""
    coordinator.leave(group, member_id)
    return {"error_code": 0}


@router.get("/{group}", response_model=GroupOut, responses=error_responses(400, 401, 403, 404))
def describe(group: str, coordinator: CoordinatorDep, store: OffsetStoreDep, metadata: MetadataDep,
             principal: Annotated[Principal, Depends(group_acl("Describe"))], authorizer: AuthorizerDep) -> dict:
    """DescribeGroups plus committed offsets, high watermarks and lag (kafka-consumer-groups --describe)."""
    from lakelog.errors import GroupIdNotFound

    offsets = fetch_offsets(store, metadata, group, None, lambda t: authorizer.allowed(principal, "Describe", TOPIC, t))
    try:
        d = coordinator.describe(group)
    except GroupIdNotFound:
        if not offsets:
            raise
        return {"group": group, "state": "Empty", "protocol": None, "generation": 0, "leader": None,
                "members": [], "offsets": offsets}
    return {"group": group, "state": d.state, "protocol": d.protocol, "generation": d.generation,
            "leader": d.leader, "offsets": offsets,
            "members": [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                         "client_id": m.client_id, "topics": m.topics, "assignment": _tps(m.assignment)}
                        for m in d.members]}
