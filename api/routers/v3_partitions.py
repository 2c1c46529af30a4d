"""Confluent v3 partitions, their replicas and reassignments.  A partition has one replica, its leader (the
object store keeps the data durable); a reassignment is never in progress (there is nothing to move)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Request

from lakelog.broker.authorizer import Principal
from lakelog.errors import UnknownTopicOrPartition

from api.deps import MetadataDep, PrincipalDep
from api.v3 import resources as R
from api.v3.brokers import brokers, leader
from api.v3.deps import LinksDep, topic_name_acl
from api.v3.errors import RestError

router = APIRouter(prefix="/v3/clusters/{cluster_id}/topics", tags=["Partition (v3)"])
Describe = Annotated[Principal, topic_name_acl("Describe")]


def _leader(request: Request, snap, partition_id: int) -> int | None:
    state = request.app.state
    return leader(state, snap, partition_id, {b.node_id for b in brokers(state)})


def _snapshot(metadata, topic_name: str, partition_id: int | None = None):
    snap = metadata.get(topic_name)
    if partition_id is not None and not 0 <= partition_id < snap.partition_count:
        snap = metadata.get(topic_name, fresh=True)  # created since the cached snapshot?
        if not 0 <= partition_id < snap.partition_count:
            raise UnknownTopicOrPartition(f"This server does not host this topic-partition: "
                                          f"{topic_name}-{partition_id}.")
    return snap


@router.get("/-/partitions/-/reassignment")
def list_all_reassignments(links: LinksDep, _: PrincipalDep) -> dict:
    """Reassignments in progress in the cluster: none."""
    return R.collection("KafkaReassignmentList", f"{links.cluster}/topics/-/partitions/-/reassignment", [])


@router.get("/{topic_name}/partitions")
def list_partitions(request: Request, topic_name: str, links: LinksDep, metadata: MetadataDep,
                    _: Describe) -> dict:
    snap = _snapshot(metadata, topic_name)
    return R.collection("KafkaPartitionList", f"{links.cluster}/topics/{topic_name}/partitions",
                        [R.partition(links, topic_name, p, _leader(request, snap, p))
                         for p in range(snap.partition_count)])


@router.get("/{topic_name}/partitions/-/reassignment")
def list_topic_reassignments(topic_name: str, links: LinksDep, metadata: MetadataDep, _: Describe) -> dict:
    """Reassignments in progress of the topic's partitions: none."""
    _snapshot(metadata, topic_name)
    return R.collection("KafkaReassignmentList", f"{links.cluster}/topics/{topic_name}/partitions/-/reassignment",
                        [])


@router.get("/{topic_name}/partitions/{partition_id}")
def get_partition(request: Request, topic_name: str, partition_id: int, links: LinksDep, metadata: MetadataDep,
                  _: Describe) -> dict:
    snap = _snapshot(metadata, topic_name, partition_id)
    return R.partition(links, topic_name, partition_id, _leader(request, snap, partition_id))


@router.get("/{topic_name}/partitions/{partition_id}/reassignment")
def get_reassignment(topic_name: str, partition_id: int, links: LinksDep, metadata: MetadataDep,
                     _: Describe) -> dict:
    _snapshot(metadata, topic_name, partition_id)
    return R.reassignment(links, topic_name, partition_id)


@router.get("/{topic_name}/partitions/{partition_id}/replicas")
def list_replicas(request: Request, topic_name: str, partition_id: int, links: LinksDep, metadata: MetadataDep,
                  _: Describe) -> dict:
    """The partition's leader; none while no live front holds its lease."""
    leader_id = _leader(request, _snapshot(metadata, topic_name, partition_id), partition_id)
    return R.collection("KafkaReplicaList", f"{links.cluster}/topics/{topic_name}/partitions/{partition_id}/replicas",
                        [] if leader_id is None else [R.replica(links, topic_name, partition_id, leader_id)])


@router.get("/{topic_name}/partitions/{partition_id}/replicas/{broker_id}")
def get_replica(request: Request, topic_name: str, partition_id: int, broker_id: int, links: LinksDep,
                metadata: MetadataDep, _: Describe) -> dict:
    if _leader(request, _snapshot(metadata, topic_name, partition_id), partition_id) != broker_id:
        raise RestError(f"Replica {broker_id} of {topic_name}-{partition_id} could not be found.", status=404)
    return R.replica(links, topic_name, partition_id, broker_id)
