"""Confluent v3 resource bodies (``kind``, ``metadata.self``, relationships) built from lakelog's state.

Links are absolute, from the request's base URL, as Confluent's proxy writes them, and every
one of them names a route the front answers.  Names in a path (groups, members, configs) are
percent-encoded.  The cluster id is derived from the storage root (:func:`cluster_id_for`):
every front over one root is one "cluster".  Pure; no I/O.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Iterable
from urllib.parse import quote, urlencode


def cluster_id_for(root_uri: str) -> str:
    """A stable 22-character id for a storage root (the shape of Kafka's cluster ids)."""
    return base64.urlsafe_b64encode(hashlib.sha256(root_uri.encode()).digest()).decode()[:22]


class Links:
    """URL and ``crn`` builders for one cluster, under ``base`` (``http://host:port/``)."""

    def __init__(self, base: str, cluster_id: str) -> None:
        self.root = base.rstrip("/") + "/v3"
        self.cluster_id = cluster_id
        self.cluster = f"{self.root}/clusters/{cluster_id}"
        self.crn = f"crn:///kafka={cluster_id}"

    def rel(self, path: str) -> dict:
        return {"related": f"{self.cluster}{path}"}

    def meta(self, path: str, crn: str | None) -> dict:
        return {"self": f"{self.cluster}{path}", "resource_name": None if crn is None else f"{self.crn}{crn}"}


def seg(name: str) -> str:
    """``name`` as one path segment."""
    return quote(name, safe="")


def collection(kind: str, self_url: str, data: Iterable[dict]) -> dict:
    return {"kind": kind, "metadata": {"self": self_url, "next": None}, "data": list(data)}


def cluster(links: Links, controller: int) -> dict:
    return {"kind": "KafkaCluster", "metadata": {"self": links.cluster, "resource_name": links.crn},
            "cluster_id": links.cluster_id, "controller": links.rel(f"/brokers/{controller}"),
            "acls": links.rel("/acls"), "brokers": links.rel("/brokers"), "broker_configs": links.rel("/broker-configs"),
            "consumer_groups": links.rel("/consumer-groups"), "topics": links.rel("/topics"),
            "partition_reassignments": links.rel("/topics/-/partitions/-/reassignment")}


def broker(links: Links, node_id: int, host: str | None, port: int | None) -> dict:
    b = f"/brokers/{node_id}"
    return {"kind": "KafkaBroker", "metadata": links.meta(b, f"/broker={node_id}"), "cluster_id": links.cluster_id,
            "broker_id": node_id, "host": host, "port": port, "rack": None,
            "configs": links.rel(f"{b}/configs"), "partition_replicas": links.rel(f"{b}/partition-replicas")}


def acl(links: Links, resource_type: str, resource_name: str, pattern_type: str, principal: str, host: str,
        operation: str, permission: str) -> dict:
    """One ACL binding (Confluent's names: ``TOPIC``, ``LITERAL``, ``READ``, ``ALLOW``); its ``self`` is the
    search that finds exactly it, as Confluent's proxy writes it."""
    fields = {"resource_type": resource_type, "resource_name": resource_name, "pattern_type": pattern_type,
              "principal": principal, "host": host, "operation": operation, "permission": permission}
    return {"kind": "KafkaAcl", "metadata": {"self": f"{links.cluster}/acls?{urlencode(fields)}"},
            "cluster_id": links.cluster_id, **fields}


def partition(links: Links, topic_name: str, partition_id: int, leader: int | None) -> dict:
    p = f"/topics/{topic_name}/partitions/{partition_id}"
    out = {"kind": "KafkaPartition", "metadata": links.meta(p, f"/topic={topic_name}/partition={partition_id}"),
           "cluster_id": links.cluster_id, "topic_name": topic_name, "partition_id": partition_id,
           "replicas": links.rel(f"{p}/replicas"), "reassignment": links.rel(f"{p}/reassignment")}
    if leader is not None:
        out["leader"] = links.rel(f"{p}/replicas/{leader}")
    return out


def replica(links: Links, topic_name: str, partition_id: int, broker_id: int) -> dict:
    """The one replica of a partition: its leader, in sync by definition (the object store holds the data)."""
    r = f"/topics/{topic_name}/partitions/{partition_id}/replicas/{broker_id}"
    return {"kind": "KafkaReplica",
            "metadata": links.meta(r, f"/topic={topic_name}/partition={partition_id}/replica={broker_id}"),
            "cluster_id": links.cluster_id, "topic_name": topic_name, "partition_id": partition_id,
            "broker_id": broker_id, "is_leader": True, "is_in_sync": True, "broker": links.rel(f"/brokers/{broker_id}")}


def reassignment(links: Links, topic_name: str, partition_id: int) -> dict:
    """A partition's reassignment: always none in progress (there are no replicas to move)."""
    p = f"/topics/{topic_name}/partitions/{partition_id}"
    return {"kind": "KafkaReassignment",
            "metadata": links.meta(f"{p}/reassignment", f"/topic={topic_name}/partition={partition_id}/reassignment"),
            "cluster_id": links.cluster_id, "topic_name": topic_name, "partition_id": partition_id,
            "adding_replicas": [], "removing_replicas": [], "replicas": links.rel(f"{p}/replicas")}


def topic(links: Links, name: str, partitions: int, internal: bool) -> dict:
    t = f"/topics/{name}"
    return {"kind": "KafkaTopic", "metadata": links.meta(t, f"/topic={name}"), "cluster_id": links.cluster_id,
            "topic_name": name, "is_internal": internal, "replication_factor": 1, "partitions_count": partitions,
            "partitions": links.rel(f"{t}/partitions"), "configs": links.rel(f"{t}/configs"),
            "partition_reassignments": links.rel(f"{t}/partitions/-/reassignment")}


def topic_config(links: Links, topic_name: str, name: str, value: str, overridden: bool) -> dict:
    source = "DYNAMIC_TOPIC_CONFIG" if overridden else "DEFAULT_CONFIG"
    return {"kind": "KafkaTopicConfig",
            "metadata": links.meta(f"/topics/{topic_name}/configs/{seg(name)}", f"/topic={topic_name}/config={name}"),
            "cluster_id": links.cluster_id, "topic_name": topic_name, "name": name, "value": value,
            "is_default": not overridden, "is_read_only": False, "is_sensitive": False, "source": source,
            "synonyms": [{"name": name, "value": value, "source": source}]}


def consumer_group(links: Links, group: str, state: str, protocol: str | None, coordinator: int) -> dict:
    g = f"/consumer-groups/{seg(group)}"
    return {"kind": "KafkaConsumerGroup", "metadata": links.meta(g, f"/consumer-group={group}"),
            "cluster_id": links.cluster_id, "consumer_group_id": group, "is_simple": protocol is None,
            "partition_assignor": protocol or "", "state": state.upper().replace("PREPARINGREBALANCE",
                                                                               "PREPARING_REBALANCE")
            .replace("COMPLETINGREBALANCE", "COMPLETING_REBALANCE"),
            "type": "CLASSIC", "is_mixed_consumer_group": False,
            "coordinator": links.rel(f"/brokers/{coordinator}"), "consumers": links.rel(f"{g}/consumers"),
            "lag_summary": links.rel(f"{g}/lag-summary")}


def consumer(links: Links, group: str, member_id: str, instance_id: str | None, client_id: str) -> dict:
    c = f"/consumer-groups/{seg(group)}/consumers/{seg(member_id)}"
    return {"kind": "KafkaConsumer", "metadata": links.meta(c, f"/consumer-group={group}/consumer={member_id}"),
            "cluster_id": links.cluster_id, "consumer_group_id": group, "consumer_id": member_id,
            "instance_id": instance_id, "client_id": client_id, "assignments": links.rel(f"{c}/assignments")}


def assignment(links: Links, group: str, member_id: str, topic_name: str, partition_id: int,
               committed: bool) -> dict:
    """A partition assigned to a member; ``lag`` links to the partition's lag when the group has committed an
    offset for it, else to the group's lags (a partition without a committed offset has no lag to show)."""
    g = f"/consumer-groups/{seg(group)}"
    a = f"{g}/consumers/{seg(member_id)}/assignments/{topic_name}/partitions/{partition_id}"
    return {"kind": "KafkaConsumerAssignment",
            "metadata": links.meta(a, f"/consumer-group={group}/consumer={member_id}/assignment={topic_name}"
                                      f"/partition={partition_id}"),
            "cluster_id": links.cluster_id, "consumer_group_id": group, "consumer_id": member_id,
            "topic_name": topic_name, "partition_id": partition_id,
            "partition": links.rel(f"/topics/{topic_name}/partitions/{partition_id}"),
            "lag": links.rel(f"{g}/lags/{topic_name}/partitions/{partition_id}" if committed else f"{g}/lags")}


def consumer_lag(links: Links, group: str, lag: dict, owner: tuple[str, str | None, str]) -> dict:
    """``lag`` is one entry of ``lakelog.broker.offsets.fetch_offsets``; ``owner`` (member, instance, client)."""
    t, p = lag["topic"], lag["partition"]
    return {"kind": "KafkaConsumerLag",
            "metadata": links.meta(f"/consumer-groups/{seg(group)}/lags/{t}/partitions/{p}",
                                   f"/consumer-group={group}/lag={t}/partition={p}"),
            "cluster_id": links.cluster_id, "consumer_group_id": group, "topic_name": t, "partition_id": p,
            "current_offset": lag["offset"], "log_end_offset": lag["high_watermark"], "lag": lag["lag"],
            "consumer_id": owner[0], "instance_id": owner[1], "client_id": owner[2]}


def lag_summary(links: Links, group: str, lags: list[dict]) -> dict:
    """Max and total lag over ``lags`` (:func:`consumer_lag` bodies); max on the first partition of the highest.
    ``max_lag_consumer`` links to the member owning that partition, or to the group's members when no member
    does; without any lag (no committed offset) the maxima are 0 and empty, and ``max_lag_partition`` links
    to the group's (empty) lags, where Confluent's proxy answers 404 instead."""
    top = max(lags, key=lambda x: x["lag"]) if lags else \
        {"consumer_id": "", "instance_id": None, "client_id": "", "topic_name": "", "partition_id": 0, "lag": 0}
    g = f"/consumer-groups/{seg(group)}"
    owner = f"{g}/consumers/{seg(top['consumer_id'])}" if top["consumer_id"] else f"{g}/consumers"
    partition = f"/topics/{top['topic_name']}/partitions/{top['partition_id']}" if lags else f"{g}/lags"
    return {"kind": "KafkaConsumerGroupLagSummary", "metadata": links.meta(f"{g}/lag-summary",
                                                                          f"/consumer-group={group}/lag-summary"),
            "cluster_id": links.cluster_id, "consumer_group_id": group,
            "max_lag_consumer_id": top["consumer_id"], "max_lag_instance_id": top["instance_id"],
            "max_lag_client_id": top["client_id"], "max_lag_topic_name": top["topic_name"],
            "max_lag_partition_id": top["partition_id"], "max_lag": top["lag"],
            "total_lag": sum(x["lag"] for x in lags), "max_lag_consumer": links.rel(owner),
            "max_lag_partition": links.rel(partition)}
