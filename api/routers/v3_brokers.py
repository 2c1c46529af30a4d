"""Confluent v3 brokers: one per live front (``api.v3.brokers``), the partitions each leads, and broker configs
-- listed empty here, although lakelog has broker configs: the Kafka listener's DescribeConfigs describes a
front's own settings and the dynamic broker configs kept in the root's cluster metadata
(``lakelog.cluster.broker_config``), which these routes do not read."""

from __future__ import annotations

from fastapi import APIRouter, Request

from lakelog.broker.authorizer import TOPIC
from lakelog.errors import UnknownTopicOrPartition

from api.deps import AuthorizerDep, LogDep, MetadataDep, PrincipalDep
from api.v3 import resources as R
from api.v3.brokers import Broker, brokers, leader
from api.v3.deps import LinksDep
from api.v3.errors import RestError

router = APIRouter(prefix="/v3/clusters/{cluster_id}", tags=["Broker (v3)"])


def _broker(request: Request, broker_id: int) -> Broker:
    for b in brokers(request.app.state):
        if b.node_id == broker_id:
            return b
    raise RestError(f"Broker {broker_id} could not be found.", status=404)


@router.get("/brokers")
def list_brokers(request: Request, links: LinksDep, _: PrincipalDep) -> dict:
    """The live fronts, by node id."""
    return R.collection("KafkaBrokerList", f"{links.cluster}/brokers",
                        [R.broker(links, b.node_id, b.host, b.port) for b in brokers(request.app.state)])


@router.get("/brokers/{broker_id}")
def get_broker(request: Request, broker_id: int, links: LinksDep, _: PrincipalDep) -> dict:
    b = _broker(request, broker_id)
    return R.broker(links, b.node_id, b.host, b.port)


@router.get("/brokers/{broker_id}/configs")
def list_broker_configs(request: Request, broker_id: int, links: LinksDep, _: PrincipalDep) -> dict:
    """A live broker's configs: an empty list (the Kafka listener's DescribeConfigs describes them)."""
    _broker(request, broker_id)
    return R.collection("KafkaBrokerConfigList", f"{links.cluster}/brokers/{broker_id}/configs", [])


@router.get("/broker-configs")
def list_cluster_configs(links: LinksDep, _: PrincipalDep) -> dict:
    """Cluster-wide dynamic broker configs: an empty list (the Kafka listener's DescribeConfigs describes them)."""
    return R.collection("KafkaClusterConfigList", f"{links.cluster}/broker-configs", [])


@router.get("/brokers/{broker_id}/partition-replicas")
def list_broker_replicas(request: Request, broker_id: int, links: LinksDep, log: LogDep, metadata: MetadataDep,
                         principal: PrincipalDep, authorizer: AuthorizerDep) -> dict:
    """The partitions the broker leads (its replicas), of the topics the caller may Describe."""
    _broker(request, broker_id)
    state = request.app.state
    live = {b.node_id for b in brokers(state)}
    out = []
    for name in log.list_topics(include_internal=True):
        if not authorizer.allowed(principal, "Describe", TOPIC, name):
            continue
        try:
            snap = metadata.get(name)
        except UnknownTopicOrPartition:
            continue  # deleted meanwhile
        out += [R.replica(links, name, p, broker_id) for p in range(snap.partition_count)
                if leader(state, snap, p, live) == broker_id]
    return R.collection("KafkaReplicaList", f"{links.cluster}/brokers/{broker_id}/partition-replicas", out)
