"""Typed errors carrying Kafka's error name, code and retriable flag.

Every failure lakelog reports to a user is a :class:`KafkaError` subclass, so
the HTTP front, the CLI and the Spark source can map it uniformly.  Codes and
names are Kafka's (``org.apache.kafka.common.protocol.Errors``).  Look one up
by code with :func:`error_for_code`.  A failing store becomes ``KAFKA_STORAGE_ERROR``
through :mod:`lakelog.storage.storage_failure`.
"""

from __future__ import annotations

import json


class KafkaError(Exception):
    """Base of lakelog's errors; ``code``/``name`` are Kafka's, ``retriable`` says whether a retry may succeed."""

    code: int = -1
    name: str = "UNKNOWN_SERVER_ERROR"
    retriable: bool = False

    def __init__(self, message: str = "") -> None:
        super().__init__(message or self.name)
        self.message = message or self.name

    def to_dict(self) -> dict:
        return {"error_code": self.code, "error_name": self.name, "message": self.message}

    def __str__(self) -> str:
        return f"{self.name} ({self.code}): {self.message}"


class UnknownServerError(KafkaError):
    """An unexpected failure on the server side."""

    code, name = -1, "UNKNOWN_SERVER_ERROR"


class OffsetOutOfRange(KafkaError):
    """The requested offset is below the log start offset or above the high watermark."""

    code, name = 1, "OFFSET_OUT_OF_RANGE"


class CorruptRecord(KafkaError):
    """A record or segment failed validation."""

    code, name = 2, "CORRUPT_MESSAGE"


class UnknownTopicOrPartition(KafkaError):
    """The topic or partition does not exist."""

    code, name = 3, "UNKNOWN_TOPIC_OR_PARTITION"


class InvalidFetchSize(KafkaError):
    """The requested fetch size is invalid."""

    code, name = 4, "INVALID_FETCH_SIZE"


class RequestTimedOut(KafkaError):
    """The storage did not answer in time; the request may be retried."""

    code, name, retriable = 7, "REQUEST_TIMED_OUT", True


class MessageTooLarge(KafkaError):
    """A record is larger than the topic's ``max.message.bytes``."""

    code, name = 10, "MESSAGE_TOO_LARGE"


class InvalidTopic(KafkaError):
    """The topic name is not legal."""

    code, name = 17, "INVALID_TOPIC_EXCEPTION"


class RecordListTooLarge(KafkaError):
    """The request's batch is larger than the configured limit."""

    code, name = 18, "RECORD_LIST_TOO_LARGE"


class IllegalGeneration(KafkaError):
    """The member's generation is not the group's current one."""

    code, name = 22, "ILLEGAL_GENERATION"


class InconsistentGroupProtocol(KafkaError):
    """The member's assignment strategies share none with the group's."""

    code, name = 23, "INCONSISTENT_GROUP_PROTOCOL"


class InvalidGroupId(KafkaError):
    """The group id is empty or not legal."""

    code, name = 24, "INVALID_GROUP_ID"


class UnknownMemberId(KafkaError):
    """The member id is not known to the group coordinator."""

    code, name = 25, "UNKNOWN_MEMBER_ID"


class InvalidSessionTimeout(KafkaError):
    """The session timeout is outside the allowed range."""

    code, name = 26, "INVALID_SESSION_TIMEOUT"


class RebalanceInProgress(KafkaError):
    """The group is rebalancing; rejoin."""

    code, name = 27, "REBALANCE_IN_PROGRESS"


class TopicAuthorizationFailed(KafkaError):
    """The principal may not perform this operation on the topic."""

    code, name = 29, "TOPIC_AUTHORIZATION_FAILED"


class GroupAuthorizationFailed(KafkaError):
    """The principal may not perform this operation on the group."""

    code, name = 30, "GROUP_AUTHORIZATION_FAILED"


class ClusterAuthorizationFailed(KafkaError):
    """The principal may not perform this cluster operation."""

    code, name = 31, "CLUSTER_AUTHORIZATION_FAILED"


class InvalidTimestamp(KafkaError):
    """A record's timestamp is out of the acceptable range."""

    code, name = 32, "INVALID_TIMESTAMP"


class InvalidPartitions(KafkaError):
    """The partition count is not legal (e.g. a decrease)."""

    code, name = 37, "INVALID_PARTITIONS"


class TopicAlreadyExists(KafkaError):
    """A topic with this name already exists."""

    code, name = 36, "TOPIC_ALREADY_EXISTS"


class InvalidConfig(KafkaError):
    """A configuration key or value is not legal."""

    code, name = 40, "INVALID_CONFIG"


class InvalidRequest(KafkaError):
    """The request is malformed."""

    code, name = 42, "INVALID_REQUEST"


class OutOfOrderSequenceNumber(KafkaError):
    """The batch's first sequence is not the producer's last sequence + 1."""

    code, name = 45, "OUT_OF_ORDER_SEQUENCE_NUMBER"


class InvalidProducerEpoch(KafkaError):
    """The producer's epoch is older than the one last seen for its id."""

    code, name = 47, "INVALID_PRODUCER_EPOCH"


class KafkaStorageError(KafkaError):
    """The object store failed; the request may be retried."""

    code, name, retriable = 56, "KAFKA_STORAGE_ERROR", True


class PolicyViolation(KafkaError):
    """The request is refused by the topic's configured policy (DeleteRecords on a topic without ``delete`` in its
    ``cleanup.policy``)."""

    code, name = 44, "POLICY_VIOLATION"


class UnknownProducerId(KafkaError):
    """The producer id was never allocated or its state has expired."""

    code, name = 59, "UNKNOWN_PRODUCER_ID"


class GroupIdNotFound(KafkaError):
    """The group does not exist."""

    code, name = 69, "GROUP_ID_NOT_FOUND"


class NonEmptyGroup(KafkaError):
    """The group still has members."""

    code, name = 68, "NON_EMPTY_GROUP"


class MemberIdRequired(KafkaError):
    """The member must rejoin with the member id it was given."""

    code, name = 79, "MEMBER_ID_REQUIRED"


class ThrottlingQuotaExceeded(KafkaError):
    """The append buffer (``buffer.memory``) is full; back off and retry."""

    code, name, retriable = 89, "THROTTLING_QUOTA_EXCEEDED", True


class ProducerFenced(KafkaError):
    """A newer instance with the same transactional id has fenced this producer."""

    code, name = 90, "PRODUCER_FENCED"


class FencedInstanceId(KafkaError):
    """Another member with the same group.instance.id has fenced this one."""

    code, name = 82, "FENCED_INSTANCE_ID"


class ConcurrentTransactions(KafkaError):
    """Another writer committed to the same partitions first, or the transaction is still completing; retry."""

    code, name, retriable = 51, "CONCURRENT_TRANSACTIONS", True


class LeaderNotAvailable(KafkaError):
    """No front holds the partition's lease right now (its holder is gone, or none took it yet); retry."""

    code, name, retriable = 5, "LEADER_NOT_AVAILABLE", True


class NotLeaderOrFollower(KafkaError):
    """This writer does not hold the partition's lease, or lost it (fenced); retry at ``leader_id``
    (the node id of the front holding it, -1 if unknown), over HTTP at ``leader_url`` (None if unknown)."""

    code, name, retriable = 6, "NOT_LEADER_OR_FOLLOWER", True

    def __init__(self, message: str = "", leader_id: int = -1, leader_url: str | None = None) -> None:
        super().__init__(message)
        self.leader_id, self.leader_url = leader_id, leader_url

    def to_dict(self) -> dict:
        return {**super().to_dict(), "leader_id": self.leader_id, "leader_url": self.leader_url}


class NetworkException(KafkaError):
    """The connection to the server failed before a response was received; the request may be retried."""

    code, name, retriable = 13, "NETWORK_EXCEPTION", True


class OffsetMetadataTooLarge(KafkaError):
    """The metadata string of an offset commit is longer than ``offset.metadata.max.bytes``."""

    code, name = 12, "OFFSET_METADATA_TOO_LARGE"


class SaslAuthenticationFailed(KafkaError):
    """The client presented no credentials, or credentials that are not known."""

    code, name = 58, "SASL_AUTHENTICATION_FAILED"


def _all_subclasses(cls: type) -> list[type]:
    out = []
    for sub in cls.__subclasses__():
        out.append(sub)
        out.extend(_all_subclasses(sub))
    return out


def error_for_code(code: int, message: str = "") -> KafkaError:
    """The typed error for a Kafka error code (``UnknownServerError`` if unknown)."""
    return _BY_CODE.get(code, UnknownServerError)(message)


def error_from_body(body: bytes, fallback: str) -> KafkaError:
    """The typed error an error body names (``{"error_code", "error_name", "message"}``, as every front answers);
    ``UnknownServerError(fallback)`` if the body names none."""
    try:
        parsed = json.loads(body)
        return error_for_code(int(parsed["error_code"]),
                              str(parsed.get("message") or parsed.get("error_name") or ""))
    except (ValueError, KeyError, TypeError):
        return UnknownServerError(fallback)


class UnknownTopicId(KafkaError):
    """The topic was deleted and recreated (a new topic id) since this writer or reader last saw it."""

    code, name, retriable = 100, "UNKNOWN_TOPIC_ID", True



class InvalidRecord(KafkaError):
    """A record is not acceptable to this topic (e.g. a null key on a compacted topic)."""

    code, name = 87, "INVALID_RECORD"



class UnsupportedSaslMechanism(KafkaError):
    """The client asked for a SASL mechanism this listener does not offer."""

    code, name = 33, "UNSUPPORTED_SASL_MECHANISM"


class IllegalSaslState(KafkaError):
    """A request arrived before the connection finished SASL authentication."""

    code, name = 34, "ILLEGAL_SASL_STATE"


class UnsupportedVersion(KafkaError):
    """The API or its version is not supported by this listener."""

    code, name = 35, "UNSUPPORTED_VERSION"


class UnsupportedCompressionType(KafkaError):
    """The record batch uses a compression codec this server does not know."""

    code, name = 76, "UNSUPPORTED_COMPRESSION_TYPE"


class CoordinatorNotAvailable(KafkaError):
    """The coordinator of the key type asked for is not served here (e.g. transactions)."""

    code, name, retriable = 15, "COORDINATOR_NOT_AVAILABLE", True


class InvalidReplicationFactor(KafkaError):
    """A replication factor other than -1 or 1 (lakelog's storage does the replication)."""

    code, name = 38, "INVALID_REPLICATION_FACTOR"


class InvalidRequiredAcks(KafkaError):
    """A produce request's acks is not 0, 1 or -1."""

    code, name = 21, "INVALID_REQUIRED_ACKS"


class TransactionalIdAuthorizationFailed(KafkaError):
    """The principal may not use this transactional id."""

    code, name = 53, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"


class InvalidTxnState(KafkaError):
    """The request does not fit the transaction's state (e.g. EndTxn with no transaction open)."""

    code, name = 48, "INVALID_TXN_STATE"


class InvalidProducerIdMapping(KafkaError):
    """The producer id is not the one the transactional id was initialised with."""

    code, name = 49, "INVALID_PRODUCER_ID_MAPPING"


class InvalidTransactionTimeout(KafkaError):
    """transaction.timeout.ms is not positive or exceeds transaction.max.timeout.ms."""

    code, name = 50, "INVALID_TRANSACTION_TIMEOUT"


class TransactionalIdNotFound(KafkaError):
    """The transactional id was never initialised (InitProducerId)."""

    code, name = 105, "TRANSACTIONAL_ID_NOT_FOUND"


class NotCoordinator(KafkaError):
    """Another front coordinates this key now; find the coordinator again."""

    code, name, retriable = 16, "NOT_COORDINATOR", True


class GroupSubscribedToTopic(KafkaError):
    """OffsetDelete of a partition the group's members still consume."""

    code, name = 86, "GROUP_SUBSCRIBED_TO_TOPIC"


class GroupMaxSizeReached(KafkaError):
    """The group already has ``group.max.size`` (classic) or ``group.consumer.max.size`` members."""

    code, name = 81, "GROUP_MAX_SIZE_REACHED"


class FencedMemberEpoch(KafkaError):
    """A consumer-group member's epoch is not the coordinator's: it must give up its partitions and rejoin."""

    code, name = 110, "FENCED_MEMBER_EPOCH"


class UnreleasedInstanceId(KafkaError):
    """A static member's ``group.instance.id`` is still held by a member that did not leave."""

    code, name = 111, "UNRELEASED_INSTANCE_ID"


class InvalidRegularExpression(KafkaError):
    """A consumer-group member's ``SubscribedTopicRegex`` does not compile."""

    code, name = 128, "INVALID_REGULAR_EXPRESSION"


class UnsupportedAssignor(KafkaError):
    """The server-side assignor a consumer-group member asked for is not one of ``group.consumer.assignors``."""

    code, name = 112, "UNSUPPORTED_ASSIGNOR"


class StaleMemberEpoch(KafkaError):
    """An offset commit names an older epoch of a consumer-group member."""

    code, name = 113, "STALE_MEMBER_EPOCH"


class InvalidReplicaAssignment(KafkaError):
    """A manual replica assignment names a broker that does not exist, twice, or inconsistently."""

    code, name = 39, "INVALID_REPLICA_ASSIGNMENT"


class SecurityDisabled(KafkaError):
    """An ACL request to a front without an authorizer (no ``--auth-file``)."""

    code, name = 54, "SECURITY_DISABLED"


class ResourceNotFound(KafkaError):
    """The SCRAM credential (or other resource) named does not exist."""

    code, name = 91, "RESOURCE_NOT_FOUND"


class DuplicateResource(KafkaError):
    """The same resource appears twice in one request."""

    code, name = 92, "DUPLICATE_RESOURCE"


class UnacceptableCredential(KafkaError):
    """A SCRAM credential Kafka would not store (empty user name, too few or too many iterations)."""

    code, name = 93, "UNACCEPTABLE_CREDENTIAL"


class MismatchedEndpointType(KafkaError):
    """DescribeCluster asked a broker endpoint for controllers."""

    code, name = 114, "MISMATCHED_ENDPOINT_TYPE"


class UnsupportedEndpointType(KafkaError):
    """DescribeCluster named an endpoint type that does not exist."""

    code, name = 115, "UNSUPPORTED_ENDPOINT_TYPE"


# Every error class of this module by its code (one class per code), built once all are defined.
_BY_CODE: dict[int, type[KafkaError]] = {c.code: c for c in _all_subclasses(KafkaError)}
