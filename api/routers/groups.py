"""Consumer groups' committed offsets (stored in ``__consumer_offsets``)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query

from lakelog.broker.authorizer import GROUP, TOPIC, Principal
from lakelog.broker.offsets import commit_offsets, fetch_offsets

from api.deps import AuthorizerDep, MetadataDep, OffsetStoreDep, PrincipalDep, group_acl
from api.routers.members import CoordinatorDep
from api.schemas import GroupDeleted, GroupList, OffsetCommit, OffsetCommitOut, OffsetFetchOut, error_responses

router = APIRouter(prefix="/v1/groups", tags=["groups"])


@router.get("", response_model=GroupList, responses=error_responses(401))
def list_groups(store: OffsetStoreDep, coordinator: CoordinatorDep, principal: PrincipalDep,
                authorizer: AuthorizerDep, state: Annotated[list[str], Query()] = [],  # noqa: B006
                type: Annotated[list[str], Query()] = []) -> dict:  # noqa: B006,A002
    """Kafka's ListGroups: groups with members or committed offsets that the caller may Describe. ``state`` and
    ``type`` filter as ListGroups' StatesFilter (v4) and TypesFilter (v5) do, case-insensitively; each may repeat or
    hold a comma-separated list (``?state=Stable,Empty&type=consumer``), as ``kafka-consumer-groups --state``."""
    listed = [g for g in coordinator.list_groups(known=store.list_groups(), states=_split(state), types=_split(type))
              if authorizer.allowed(principal, "Describe", GROUP, g.group_id)]
    return {"groups": [g.group_id for g in listed],
            "listed": [{"group": g.group_id, "state": g.state, "type": g.type, "protocol_type": g.protocol_type}
                       for g in listed]}


def _split(values: list[str]) -> list[str]:
    return [v for value in values for v in value.split(",") if v.strip()]


@router.post("/{group}/offsets", response_model=OffsetCommitOut, responses=error_responses(400, 401, 403, 404, 409))
def commit(group: str, body: OffsetCommit, store: OffsetStoreDep, metadata: MetadataDep, coordinator: CoordinatorDep,
           principal: Annotated[Principal, Depends(group_acl("Read"))], authorizer: AuthorizerDep) -> dict:
    """Kafka's OffsetCommit: Read on the group and on every topic; all or nothing.

    With ``member_id``/``generation_id`` (a consumer-protocol member's epoch) the commit is checked as Kafka checks
    it (``UNKNOWN_MEMBER_ID``, ``STALE_MEMBER_EPOCH``, ``ILLEGAL_GENERATION``, ``FENCED_INSTANCE_ID``); without
    them it is a simple commit, accepted only while the group has no active members.
    """
    for o in body.offsets:
        authorizer.authorize(principal, "Read", TOPIC, o.topic)
    coordinator.validate_commit(group, body.member_id, body.generation_id, body.group_instance_id)
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


@router.delete("/{group}", response_model=GroupDeleted, responses=error_responses(400, 401, 403, 404, 409))
def delete_group(group: str, store: OffsetStoreDep, coordinator: CoordinatorDep,
                 _: Annotated[Principal, Depends(group_acl("Delete"))]) -> dict:
    """Kafka's DeleteGroups: the group's state and every committed offset (``NON_EMPTY_GROUP`` while it has
    members, ``GROUP_ID_NOT_FOUND`` if there is no such group). Every front forgets it within a second."""
    deleted = len(store.fetch(group))
    error = coordinator.delete_groups([group], known=lambda g: bool(deleted))[group]
    if error is not None:
        raise error
    return {"group": group, "deleted_offsets": deleted}
