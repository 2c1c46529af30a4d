"""Confluent v3 topics and topic configs, over the same topic service and ACLs as ``/v1/topics``."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Response

from lakelog.broker import topic_admin as service
from lakelog.broker.authorizer import CLUSTER, TOPIC, Principal
from lakelog.errors import (InvalidConfig, InvalidPartitions, InvalidRequest, TopicAlreadyExists,
                            UnknownTopicOrPartition)
from lakelog.storage.topic_config import TOPIC_CONFIGS, validate_configs
from lakelog.storage.topic_name import is_internal, validate_topic_name

from api.deps import AuthorizerDep, LogDep, MetadataDep, PrincipalDep
from api.v3 import resources as R
from api.v3.deps import LinksDep, topic_name_acl
from api.v3.errors import RestError
from api.v3.schemas import AlterConfigsIn, CreateTopicIn, UpdateConfigIn, UpdatePartitionCountIn

router = APIRouter(prefix="/v3/clusters/{cluster_id}/topics", tags=["Topic (v3)"])


def _topic(links: R.Links, metadata, name: str) -> dict:
    return R.topic(links, name, metadata.get(name).partition_count, is_internal(name))


@router.get("")
def list_topics(links: LinksDep, log: LogDep, metadata: MetadataDep, principal: PrincipalDep,
                authorizer: AuthorizerDep) -> dict:
    """Topics the caller may Describe, internal ones included (``is_internal``)."""
    out = []
    for name in log.list_topics(include_internal=True):
        if not authorizer.allowed(principal, "Describe", TOPIC, name):
            continue
        try:
            out.append(_topic(links, metadata, name))
        except UnknownTopicOrPartition:
            continue  # deleted meanwhile
    return R.collection("KafkaTopicList", f"{links.cluster}/topics", out)


@router.post("", status_code=201)
def create_topic(body: CreateTopicIn, response: Response, links: LinksDep, log: LogDep, metadata: MetadataDep,
                 principal: PrincipalDep, authorizer: AuthorizerDep) -> dict:
    """Create a topic (Create on the cluster or the topic); ``validate_only`` checks and answers 200."""
    if not authorizer.allowed(principal, "Create", CLUSTER):
        authorizer.authorize(principal, "Create", TOPIC, body.topic_name)
    if body.replicas_assignments:
        raise InvalidRequest("replicas_assignments is not supported: lakelog has no brokers to assign replicas to")
    partitions = 1 if body.partitions_count == -1 else body.partitions_count
    configs = {c.name: c.value for c in body.configs if c.value is not None}
    if body.validate_only:
        service.writable(body.topic_name)
        validate_configs(configs)
        if partitions < 1:
            raise InvalidPartitions(f"partition count must be at least 1, got {partitions}")
        if body.topic_name in log.list_topics(include_internal=True):
            raise TopicAlreadyExists(f"Topic '{body.topic_name}' already exists.")
        response.status_code = 200
        return R.topic(links, body.topic_name, partitions, False)
    desc = service.create_topic(log, metadata, body.topic_name, partitions, configs)
    return R.topic(links, desc.name, len(desc.partitions), False)


@router.get("/{topic_name}")
def get_topic(topic_name: str, links: LinksDep, metadata: MetadataDep,
              _: Annotated[Principal, topic_name_acl("Describe")]) -> dict:
    return _topic(links, metadata, topic_name)


@router.patch("/{topic_name}")
def update_partition_count(topic_name: str, body: UpdatePartitionCountIn, links: LinksDep, log: LogDep,
                           metadata: MetadataDep, _: Annotated[Principal, topic_name_acl("Alter")]) -> dict:
    """Increase the partition count (Alter on the topic)."""
    desc = service.alter_topic(log, metadata, topic_name, None, body.partitions_count)
    return R.topic(links, topic_name, len(desc.partitions), is_internal(topic_name))


@router.delete("/{topic_name}", status_code=204)
def delete_topic(topic_name: str, links: LinksDep, log: LogDep, metadata: MetadataDep,
                 _: Annotated[Principal, topic_name_acl("Delete")]) -> Response:
    service.delete_topic(log, metadata, topic_name)
    return Response(status_code=204)


def _configs(links: R.Links, log, topic_name: str) -> list[dict]:
    desc = log.describe_topic(topic_name)
    return [R.topic_config(links, topic_name, k, v, k in desc.overrides) for k, v in sorted(desc.configs.items())]


@router.get("/{topic_name}/configs")
def list_configs(topic_name: str, links: LinksDep, log: LogDep,
                 _: Annotated[Principal, topic_name_acl("Describe")]) -> dict:
    """Every config of the topic with its effective value (Describe on the topic)."""
    return R.collection("KafkaTopicConfigList", f"{links.cluster}/topics/{topic_name}/configs",
                        _configs(links, log, topic_name))


def _known(topic_name: str, name: str) -> str:
    if name not in TOPIC_CONFIGS:
        raise RestError(f"Config {name} cannot be found for topic {topic_name}.", status=404)
    return name


@router.get("/{topic_name}/configs/{name}")
def get_config(topic_name: str, name: str, links: LinksDep, log: LogDep,
               _: Annotated[Principal, topic_name_acl("Describe")]) -> dict:
    validate_topic_name(topic_name)
    _known(topic_name, name)
    return next(c for c in _configs(links, log, topic_name) if c["name"] == name)


@router.put("/{topic_name}/configs/{name}", status_code=204)
def update_config(topic_name: str, name: str, body: UpdateConfigIn, links: LinksDep, log: LogDep,
                  metadata: MetadataDep, _: Annotated[Principal, topic_name_acl("Alter")]) -> Response:
    """Set one config (Alter on the topic); validated as ``PATCH /v1/topics/{topic}``."""
    if body.value is None:
        raise InvalidConfig(f"a value is required for {name}: lakelog cannot reset a config to its default")
    service.alter_topic(log, metadata, topic_name, {name: body.value}, None)
    return Response(status_code=204)


@router.post("/{topic_name}/configs:alter", status_code=204)
def alter_configs(topic_name: str, body: AlterConfigsIn, links: LinksDep, log: LogDep, metadata: MetadataDep,
                  _: Annotated[Principal, topic_name_acl("Alter")]) -> Response:
    """Set several configs at once, all or nothing; ``DELETE`` (reset to default) is refused."""
    configs = {}
    for c in body.data:
        if c.operation == "DELETE" or c.value is None:
            raise InvalidConfig(f"cannot reset {c.name} to its default: lakelog only sets configs")
        configs[c.name] = c.value
    if body.validate_only:
        service.writable(topic_name)
        validate_configs(configs)
        metadata.get(topic_name)
        return Response(status_code=204)
    service.alter_topic(log, metadata, topic_name, configs, None)
    return Response(status_code=204)
