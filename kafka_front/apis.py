"""The APIs this listener serves, with their version ranges: the answer to ApiVersions and the dispatch table.

Ranges start where kio's schemas start and stop before versions needing what
lakelog does not have (Produce and Fetch by topic id, KIP-516's v13).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Awaitable, Callable

from lakelog.broker.public_message import public_message
from lakelog.errors import KafkaError

from kafka_front.handlers import admin, cluster, fetch, groups, produce, quotas, sasl, security, transactions
from kafka_front.request import NO_RESPONSE

API_VERSIONS = 18
SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
SASL_APIS = (SASL_HANDSHAKE, SASL_AUTHENTICATE)
__all__ = ["APIS", "API_VERSIONS", "NO_RESPONSE", "SASL_APIS", "error_values", "supported_versions"]


@dataclass(frozen=True)
class Api:
    """``ordered``: the handler keeps the connection's request order itself (``Request.in_order``)."""

    name: str
    min_version: int
    max_version: int
    handler: Callable[..., Awaitable[object]]
    ordered: bool = False


async def api_versions(ctx, conn, rq) -> dict:
    return {"error_code": 0, "api_keys": supported_versions()}


APIS: dict[int, Api] = {
    0: Api("Produce", 3, 9, produce.produce, ordered=True),
    1: Api("Fetch", 4, 12, fetch.fetch),
    2: Api("ListOffsets", 1, 7, fetch.list_offsets),
    3: Api("Metadata", 0, 12, cluster.metadata),
    8: Api("OffsetCommit", 2, 9, groups.offset_commit),
    9: Api("OffsetFetch", 1, 9, groups.offset_fetch),
    10: Api("FindCoordinator", 0, 4, groups.find_coordinator),
    11: Api("JoinGroup", 0, 9, groups.join_group),
    12: Api("Heartbeat", 0, 4, groups.heartbeat),
    13: Api("LeaveGroup", 0, 4, groups.leave_group),
    14: Api("SyncGroup", 0, 5, groups.sync_group),
    15: Api("DescribeGroups", 0, 6, groups.describe_groups),
    16: Api("ListGroups", 0, 5, groups.list_groups),
    SASL_HANDSHAKE: Api("SaslHandshake", 0, 1, sasl.handshake),
    API_VERSIONS: Api("ApiVersions", 0, 3, api_versions),
    19: Api("CreateTopics", 2, 7, admin.create_topics),
    20: Api("DeleteTopics", 1, 6, admin.delete_topics),
    21: Api("DeleteRecords", 0, 2, admin.delete_records),
    22: Api("InitProducerId", 0, 4, produce.init_producer_id),
    24: Api("AddPartitionsToTxn", 0, 3, transactions.add_partitions_to_txn),
    25: Api("AddOffsetsToTxn", 0, 3, transactions.add_offsets_to_txn),
    26: Api("EndTxn", 0, 3, transactions.end_txn),
    28: Api("TxnOffsetCommit", 0, 3, transactions.txn_offset_commit),
    29: Api("DescribeAcls", 1, 3, security.describe_acls),
    30: Api("CreateAcls", 1, 3, security.create_acls),
    31: Api("DeleteAcls", 1, 3, security.delete_acls),
    32: Api("DescribeConfigs", 1, 4, admin.describe_configs),
    33: Api("AlterConfigs", 0, 2, admin.alter_configs),
    SASL_AUTHENTICATE: Api("SaslAuthenticate", 0, 2, sasl.authenticate),
    37: Api("CreatePartitions", 0, 3, admin.create_partitions),
    42: Api("DeleteGroups", 0, 2, groups.delete_groups),
    44: Api("IncrementalAlterConfigs", 0, 1, admin.incremental_alter_configs),
    47: Api("OffsetDelete", 0, 0, groups.offset_delete),
    48: Api("DescribeClientQuotas", 0, 1, quotas.describe_client_quotas),
    49: Api("AlterClientQuotas", 0, 1, quotas.alter_client_quotas),
    50: Api("DescribeUserScramCredentials", 0, 0, security.describe_user_scram_credentials),
    51: Api("AlterUserScramCredentials", 0, 0, security.alter_user_scram_credentials),
    60: Api("DescribeCluster", 0, 2, cluster.describe_cluster),
    68: Api("ConsumerGroupHeartbeat", 0, 1, groups.consumer_group_heartbeat),
    69: Api("ConsumerGroupDescribe", 0, 1, groups.consumer_group_describe),
}


def supported_versions() -> list[dict]:
    return [{"api_key": k, "min_version": a.min_version, "max_version": a.max_version}
            for k, a in sorted(APIS.items())]


def error_values(api_key: int, version: int, error: KafkaError) -> dict:
    """A response carrying ``error`` in its top-level error code (fields the version lacks are dropped)."""
    return {"error_code": error.code, "error_message": public_message(error.message)}
