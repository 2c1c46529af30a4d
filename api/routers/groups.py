"""Consumer groups' committed offsets (stored in ``__consumer_offsets``)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends

from api.auth import GROUP, TOPIC, Principal
from api.deps import AuthorizerDep, MetadataDep, OffsetStoreDep, PrincipalDep, group_acl
from api.routers.members import CoordinatorDep
from lakelog.group.assignors import TopicPartition
from api.schemas import GroupDeleted, GroupList, OffsetCommit, OffsetCommitOut, OffsetFetchOut, error_responses
from api.services.offsets import commit_offsets, fetch_offsets

router = APIRouter(prefix="/v1/groups", tags=["groups"])


@router.get("", response_model=GroupList, responses=error_responses(401))
def list_groups(store: OffsetStoreDep, coordinator: CoordinatorDep, principal: PrincipalDep,
                authorizer: AuthorizerDep) -> dict:
    """Groups with members or committed offsets that the caller may Describe."""
    names = set(store.list_groups()) | {g for g, _ in coordinator.list_groups()}
    return {"groups": [g for g in sorted(names) if authorizer.allowed(principal, "Describe", GROUP, g)]}


@router.post("/{group}/offsets", response_model=OffsetCommitOut, responses=error_responses(400, 401, 403, 404, 409))
def commit(group: str, body: OffsetCommit, store: OffsetStoreDep, metadata: MetadataDep, coordinator: CoordinatorDep,
           principal: Annotated[Principal, Depends(group_acl("Read"))], authorizer: AuthorizerDep) -> dict:
    """Kafka's OffsetCommit: Read on the group and on every topic; all or nothing.

    With ``member_id``/``generation_id`` the commit is checked against the group's current generation and the
    member's assignment (``UNKNOWN_MEMBER_ID``, ``ILLEGAL_GENERATION``); without them it is a simple commit,
    accepted only while the group has no active members.
    """
    for o in body.offsets:
        authorizer.authorize(principal, "Read", TOPIC, o.topic)
    coordinator.validate_commit(group, body.member_id, body.generation_id,
                                [TopicPartition(o.topic, o.partition) for o in body.offsets], body.group_instance_id)
    done = commit_offsets(store, metadata, group, [(o.topic, o.partition, o.offset, o.metadata) for o in body.offsets])
    return {"group": group, "offsets": [{"topic": e.topic, "partition": e.partition, "offset": e.offset,
                                         "metadata": e.metadata, "commit_timestamp": e.commit_timestamp}
                                        for e in done]}


@router.get("/{group}/offsets", response_model=OffsetFetchOut, responses=error_responses(400, 401, 403))
def fetch(group: str, store: OffsetStoreDep, metadata: MetadataDep,
          principal: Annotated[Principal, Depends(group_acl("Describe"))], authorizer: AuthorizerDep,
          topic: str | None = None) -> dict:
    """Kafka's OffsetFetch plus lag (high watermark - committed) per partition."""
    if topic is not None:
        authorizer.authorize(principal, "Describe", TOPIC, topic)
    offsets = fetch_offsets(store, metadata, group, topic,
                            lambda t: authorizer.allowed(principal, "Describe", TOPIC, t))
    return {"group": group, "offsets": offsets}


@router.delete("/{group}", response_model=GroupDeleted, responses=error_responses(400, 401, 403, 409))
def delete_group(group: str, store: OffsetStoreDep, coordinator: CoordinatorDep,
                 _: Annotated[Principal, Depends(group_acl("Delete"))]) -> dict:
    """Kafka's DeleteGroups: drop every committed offset of the group (``NON_EMPTY_GROUP`` while it has members)."""
    from lakelog.errors import GroupIdNotFound

    try:
        coordinator.delete_group(group)
    except GroupIdNotFound:
        pass  # a group known only by its offsets
    return {"group": group, "deleted_offsets": store.delete_group(group)}
