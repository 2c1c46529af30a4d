"""Topics: create, list, describe, alter, delete, delete-records."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Response

from lakelog.broker import topic_admin as service
from lakelog.broker.authorizer import CLUSTER, TOPIC, Principal

from api.deps import AuthorizerDep, LogDep, MetadataDep, PrincipalDep, topic_acl
from api.schemas import (INT32_MAX, DeleteRecords, DeleteRecordsOut, TopicAlter, TopicCreate, TopicList, TopicOut,
                         error_responses)

router = APIRouter(prefix="/v1/topics", tags=["topics"])
PartitionPath = Annotated[int, Path(ge=0, le=INT32_MAX)]


@router.post("", status_code=201, response_model=TopicOut, responses=error_responses(400, 401, 403, 409))
def create_topic(body: TopicCreate, log: LogDep, metadata: MetadataDep, principal: PrincipalDep,
                 authorizer: AuthorizerDep) -> dict:
    """Kafka's CreateTopics: needs Create on the cluster or on the topic."""
    if not authorizer.allowed(principal, "Create", CLUSTER):
        authorizer.authorize(principal, "Create", TOPIC, body.name)
    return service.create_topic(log, metadata, body.name, body.partitions, body.configs).to_dict()


@router.get("", response_model=TopicList, responses=error_responses(401))
def list_topics(log: LogDep, principal: PrincipalDep, authorizer: AuthorizerDep, internal: bool = False) -> dict:
    """Topics the caller may Describe (internal ones with ``internal=true``)."""
    names = log.list_topics(include_internal=internal)
    return {"topics": [n for n in names if authorizer.allowed(principal, "Describe", TOPIC, n)]}


@router.get("/{topic}", response_model=TopicOut, responses=error_responses(400, 401, 403, 404))
def describe_topic(topic: str, log: LogDep, _: Annotated[Principal, Depends(topic_acl("Describe"))]) -> dict:
    """Partitions (log start offset, high watermark, segments) and effective configs."""
    return log.describe_topic(topic).to_dict()


@router.patch("/{topic}", response_model=TopicOut, responses=error_responses(400, 401, 403, 404))
def alter_topic(topic: str, body: TopicAlter, log: LogDep, metadata: MetadataDep,
                _: Annotated[Principal, Depends(topic_acl("Alter"))]) -> dict:
    """Set configs and/or increase the partition count."""
    return service.alter_topic(log, metadata, topic, body.configs, body.partitions).to_dict()


@router.delete("/{topic}", status_code=204, responses=error_responses(400, 401, 403, 404))
def delete_topic(topic: str, log: LogDep, metadata: MetadataDep,
                 _: Annotated[Principal, Depends(topic_acl("Delete"))]) -> Response:
    service.delete_topic(log, metadata, topic)
    return Response(status_code=204)


@router.post("/{topic}/partitions/{partition}/delete-records", response_model=DeleteRecordsOut,
             responses=error_responses(400, 401, 403, 404, 416))
def delete_records(topic: str, partition: PartitionPath, body: DeleteRecords, log: LogDep, metadata: MetadataDep,
                   _: Annotated[Principal, Depends(topic_acl("Delete"))]) -> dict:
    """Kafka's DeleteRecords: move the partition's log start offset up to ``before_offset``."""
    start = service.delete_records(log, metadata, topic, partition, body.before_offset)
    return {"topic": topic, "partition": partition, "log_start_offset": start}
