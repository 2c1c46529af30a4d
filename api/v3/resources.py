"""Confluent v3 resource bodies (``kind``, ``metadata.self``, relationships) built from lakelog's state.

Links are absolute, from the request's base URL, as Confluent's proxy writes them.  The
cluster id is derived from the storage root (:func:`cluster_id_for`): every front over one
root is one "cluster".  Pure; no I/O.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Iterable


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


def collection(kind: str, self_url: str, data: Iterable[dict]) -> dict:
    return {"kind": kind, "metadata": {"self": self_url, "next": None}, "data": list(data)}


def cluster(links: Links) -> dict:
    return {"kind": "KafkaCluster", "metadata": {"self": links.cluster, "resource_name": links.crn},
            "cluster_id": links.cluster_id,
            "acls": links.rel("/acls"), "brokers": links.rel("/brokers"), "broker_configs": links.rel("/broker-configs"),
            "consumer_groups": links.rel("/consumer-groups"), "topics": links.rel("/topics"),
            "partition_reassignments": links.rel("/topics/-/partitions/-/reassignment")}


def topic(links: Links, name: str, partitions: int, internal: bool) -> dict:
    t = f"/topics/{name}"
    return {"kind": "KafkaTopic", "metadata": links.meta(t, f"/topic={name}"), "cluster_id": links.cluster_id,
            "topic_name": name, "is_internal": internal, "replication_factor": 1, "partitions_count": partitions,
            "partitions": links.rel(f"{t}/partitions"), "configs": links.rel(f"{t}/configs"),
            "partition_reassignments": links.rel(f"{t}/partitions/-/reassignment")}


def topic_config(links: Links, topic_name: str, name: str, value: str, overridden: bool) -> dict:
    source = "DYNAMIC_TOPIC_CONFIG" if overridden else "DEFAULT_CONFIG"
    return {"kind": "KafkaTopicConfig",
            "metadata": links.meta(f"/topics/{topic_name}/configs/{name}", f"/topic={topic_name}/config={name}"),
            "cluster_id": links.cluster_id, "topic_name": topic_name, "name": name, "value": value,
            "is_default": not overridden, "is_read_only": False, "is_sensitive": False, "source": source,
            "synonyms": [{"name": name, "value": value, "source": source}]}


def consumer_group(links: Links, group: str, state: str, protocol: str | None, leader: str | None) -> dict:
    g = f"/consumer-groups/{group}"
    return {"kind": "KafkaConsumerGroup", "metadata": links.meta(g, f"/consumer-group={group}"),
            "cluster_id": links.cluster_id, "consumer_group_id": group, "is_simple": protocol is None,
            "partition_assignor": protocol or "", "state": state.upper().replace("PREPARINGREBALANCE",
                                                                               "PREPARING_REBALANCE")
            .replace("COMPLETINGREBALANCE", "COMPLETING_REBALANCE"),
            "type": "CLASSIC", "is_mixed_consumer_group": False,
            "coordinator": links.rel("/brokers/0"), "consumers": links.rel(f"{g}/consumers"),
            "lag_summary": links.rel(f"{g}/lag-summary")}


def consumer(links: Links, group: str, member_id: str, instance_id: str | None, client_id: str,
             assignment: list) -> dict:
    c = f"/consumer-groups/{group}/consumers/{member_id}"
    return {"kind": "KafkaConsumer", "metadata": links.meta(c, f"/consumer-group={group}/consumer={member_id}"),
            "cluster_id": links.cluster_id, "consumer_group_id": group, "consumer_id": member_id,
            "instance_id": instance_id, "client_id": client_id, "assignments": links.rel(f"{c}/assignments")}


def consumer_lag(links: Links, group: str, lag: dict, owner: tuple[str, str | None, str]) -> dict:
    """``lag`` is one entry of ``api.services.offsets.fetch_offsets``; ``owner`` (member, instance, client)."""
    t, p = lag["topic"], lag["partition"]
    return {"kind": "KafkaConsumerLag",
            "metadata": links.meta(f"/consumer-groups/{group}/lags/{t}/partitions/{p}",
                                   f"/consumer-group={group}/lag={t}/partition={p}"),
            "cluster_id": links.cluster_id, "consumer_group_id": group, "topic_name": t, "partition_id": p,
            "current_offset": lag["offset"], "log_end_offset": lag["high_watermark"], "lag": lag["lag"],
            "consumer_id": owner[0], "instance_id": owner[1], "client_id": owner[2]}


def lag_summary(links: Links, group: str, lags: list[dict]) -> dict:
    """Max and total lag over ``lags`` (:func:`consumer_lag` bodies); max on the first partition of the highest."""
    top = max(lags, key=lambda x: x["lag"]) if lags else None
    g = f"/consumer-groups/{group}"
    return {"kind": "KafkaConsumerGroupLagSummary", "metadata": links.meta(f"{g}/lag-summary",
                                                                          f"/consumer-group={group}/lag-summary"),
            "cluster_id": links.cluster_id, "consumer_group_id": group,
            "max_lag_consumer_id": top["consumer_id"] if top else "",
            "max_lag_instance_id": top["instance_id"] if top else None,
            "max_lag_client_id": top["client_id"] if top else "",
            "max_lag_topic_name": top["topic_name"] if top else "",
            "max_lag_partition_id": top["partition_id"] if top else 0,
            "max_lag": top["lag"] if top else 0, "total_lag": sum(x["lag"] for x in lags),
            "max_lag_consumer": links.rel(f"{g}/consumers/{top['consumer_id'] if top else ''}"),
            "max_lag_partition": links.rel(f"/topics/{top['topic_name'] if top else ''}/partitions/"
                                           f"{top['partition_id'] if top else 0}")}
