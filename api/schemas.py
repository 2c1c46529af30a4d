"""Request and response bodies of the HTTP API (pydantic), grouped by resource.

Produce request bodies are the exception: they are decoded by msgspec
(:mod:`api.produce_body`), since they carry thousands of records each.
"""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import AfterValidator, BaseModel, ConfigDict, Field


def _valid_unicode(text: str) -> str:
    """JSON's ``"\\ud800"`` escapes decode to lone surrogates, which no UTF-8 store or answer can hold."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("not valid Unicode text (a lone surrogate)") from None
    return text


INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
Int32 = Annotated[int, Field(ge=0, le=INT32_MAX)]
Int64 = Annotated[int, Field(ge=0, le=INT64_MAX)]
Generation = Annotated[int, Field(ge=-1, le=INT32_MAX)]
TimeoutMs = Annotated[int, Field(ge=0, le=INT32_MAX)]  # Kafka's timeouts are int32 milliseconds
Text = Annotated[str, AfterValidator(_valid_unicode)]
Encoding = Literal["utf8", "base64"]
ConfigValue = Union[Text, int, float]
# Request bodies: unknown fields refused, and no coercion ("5" or true is no integer, 5 no string), as Kafka's
# typed protocol fields.
_FORBID = ConfigDict(extra="forbid", strict=True)


class ErrorBody(BaseModel):
    """Every error response."""

    error_code: int = Field(description="Kafka error code (org.apache.kafka.common.protocol.Errors)")
    error_name: str
    message: str


# -- produce (the request bodies are msgspec structs: api/produce_body.py) ---------------------
class PartitionResult(BaseModel):
    """Where one partition batch landed (one entry of Kafka's ProduceResponse)."""

    partition: int
    base_offset: int = Field(description="offset of the batch's first record; -1 on error")
    record_count: int
    log_append_time: int = Field(description="commit time (epoch ms) if the topic uses LogAppendTime, else -1")
    timestamp_type: Literal["CreateTime", "LogAppendTime"]
    error_code: int = Field(description="0 when the batch is committed")
    error_name: str | None = None
    message: str | None = None
    duplicate: bool = Field(description="an idempotent retry answered with the original batch's offsets")
    leader_id: int | None = Field(None, description="NOT_LEADER_OR_FOLLOWER: the node id of the partition's leader "
                                                    "(-1 if unknown)")
    leader_url: str | None = Field(None, description="NOT_LEADER_OR_FOLLOWER: the leader's HTTP URL, to send the "
                                                     "batch to (null if unknown)")


class ProduceResponse(BaseModel):
    topic: str
    results: list[PartitionResult]


class ProduceAccepted(BaseModel):
    """``acks=0``: the request was validated and queued, not yet committed."""

    topic: str
    accepted_records: int


# -- topics -------------------------------------------------------------------------------
class TopicCreate(BaseModel):
    model_config = _FORBID
    name: Text
    partitions: Annotated[int, Field(ge=-(2**31), le=INT32_MAX)] = 1
    configs: dict[Text, ConfigValue] = Field(default_factory=dict)


class TopicAlter(BaseModel):
    model_config = _FORBID
    configs: dict[Text, ConfigValue] | None = None
    partitions: Annotated[int, Field(ge=-(2**31), le=INT32_MAX)] | None = Field(
        default=None, description="new partition count (increase only)")


class PartitionOut(BaseModel):
    partition: int
    log_start_offset: int
    high_watermark: int
    segments: int
    bytes: int
    records: int


class TopicOut(BaseModel):
    name: str
    topic_id: str | None = Field(default=None, description="Kafka's topic id: new for every incarnation of the name")
    partitions: list[PartitionOut]
    configs: dict[str, str]
    overrides: dict[str, str]
    version: int


class TopicList(BaseModel):
    topics: list[str]


class DeleteRecords(BaseModel):
    model_config = _FORBID
    before_offset: Annotated[int, Field(ge=-1, le=INT64_MAX)] = Field(
        description="new log start offset; -1 = the high watermark")


class DeleteRecordsOut(BaseModel):
    topic: str
    partition: int
    log_start_offset: int


# -- producers ----------------------------------------------------------------------------
class ProducerInit(BaseModel):
    model_config = _FORBID
    transactional_id: Annotated[Text, Field(min_length=1, max_length=255)] | None = None


class ProducerOut(BaseModel):
    producer_id: int
    producer_epoch: int
    transactional_id: str | None = None


# -- fetch --------------------------------------------------------------------------------
class HeaderOut(BaseModel):
    key: str | None  # null only in records written before header keys were validated on the way in
    value: str | None


class RecordOut(BaseModel):
    offset: int
    timestamp: int = Field(description="epoch ms")
    timestamp_type: Literal["CreateTime", "LogAppendTime"]
    key: str | None
    value: str | None
    headers: list[HeaderOut] | None
    producer_id: int
    sequence: int


class FetchOut(BaseModel):
    topic: str
    partition: int
    high_watermark: int
    last_stable_offset: int = Field(description="always the high watermark: an open transaction's records are "
                                                "not in the topic until it commits")
    log_start_offset: int
    next_offset: int
    encoding: Encoding
    records: list[RecordOut]


# -- groups and offsets --------------------------------------------------------------------
class OffsetIn(BaseModel):
    model_config = _FORBID
    topic: Text
    partition: Int32
    offset: Int64
    metadata: Text | None = None


class OffsetCommit(BaseModel):
    model_config = _FORBID
    offsets: list[OffsetIn] = Field(min_length=1)
    member_id: Text | None = Field(default=None, description="the committing member (absent: a simple commit)")
    generation_id: Generation = Field(default=-1, description="the member's generation (-1 with no member)")
    group_instance_id: Text | None = Field(default=None, description="a static member's group.instance.id")


# -- transactions -------------------------------------------------------------------------
class TransactionInit(BaseModel):
    model_config = _FORBID
    # any int32: the coordinator judges the range (INVALID_TRANSACTION_TIMEOUT, as Kafka's InitProducerId)
    transaction_timeout_ms: Annotated[int, Field(ge=-(2**31), le=INT32_MAX)] = Field(
        default=60_000, description="transaction.timeout.ms, 1 to 900000: an open transaction older than this is "
                                    "aborted")


class TransactionProducer(BaseModel):
    model_config = _FORBID
    producer_id: Annotated[int, Field(ge=0, le=INT64_MAX)]
    producer_epoch: Annotated[int, Field(ge=0, le=32767)]


class TransactionOffsets(TransactionProducer):
    group_id: Annotated[Text, Field(min_length=1)]
    offsets: list[OffsetIn] = Field(min_length=1)


class TransactionPartition(BaseModel):
    topic: str
    partition: int


class TransactionOut(BaseModel):
    transactional_id: str
    producer_id: int
    producer_epoch: int
    state: Literal["Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort"]
    transaction_timeout_ms: int
    partitions: list[TransactionPartition]
    groups: list[str]


class CommittedOut(BaseModel):
    topic: str
    partition: int
    offset: int
    metadata: str
    commit_timestamp: int = Field(description="epoch ms")


class OffsetCommitOut(BaseModel):
    group: str
    offsets: list[CommittedOut]


class OffsetLagOut(CommittedOut):
    high_watermark: int | None = Field(description="null if the topic no longer exists")
    lag: int | None = Field(description="high watermark - committed offset")


class OffsetFetchOut(BaseModel):
    group: str
    offsets: list[OffsetLagOut]


class ListedGroupOut(BaseModel):
    group: str
    state: str  # Kafka's group states: Empty, PreparingRebalance, CompletingRebalance, Stable, Assigning, ...
    type: str  # "classic" or "consumer" (ListGroups v5's GroupType)
    protocol_type: str  # a classic group's protocol type ("consumer", "connect", ...); "" for an offsets-only group


class GroupList(BaseModel):
    groups: list[str]
    listed: list[ListedGroupOut]  # the same groups, with ListGroups' state, type and protocol type


class GroupDeleted(BaseModel):
    group: str
    deleted_offsets: int


class Health(BaseModel):
    status: Literal["ok"]
    root: str
    auth: bool
    version: str


class FrontOut(BaseModel):
    node_id: int
    http_url: str
    kafka: str | None = Field(description="HOST:PORT of its Kafka listener, if it has one")


class ClusterOut(BaseModel):
    node_id: int | None = Field(description="this front's node id; null: a single front (no --node-id)")
    fronts: list[FrontOut] = Field(description="the live fronts on this root (this one alone without --node-id)")


def error_responses(*statuses: int) -> dict[int | str, dict]:
    """OpenAPI ``responses`` entries for the error statuses a route can answer."""
    return {s: {"model": ErrorBody, "description": "Kafka error (see docs/http.md)"} for s in statuses}


# -- group membership (the coordinator) -------------------------------------------------------------
class TopicPartitionOut(BaseModel):
    topic: str
    partition: int


class TopicPartitionIn(BaseModel):
    model_config = _FORBID
    topic: Text
    partition: Annotated[int, Field(ge=0, le=INT32_MAX)]


class JoinGroupIn(BaseModel):
    """A member joins a consumer group on KIP-848's protocol (ConsumerGroupHeartbeat with member epoch 0)."""

    model_config = _FORBID
    topics: list[Text] = Field(min_length=1, description="subscribed topics (a pattern is resolved client-side)")
    server_assignor: Text | None = Field(default=None, description="group.remote.assignor: uniform or range "
                                                                   "(absent: the group's, else uniform)")
    member_id: Text | None = Field(default=None, description="absent: the coordinator picks one")
    group_instance_id: Text | None = Field(default=None, description="group.instance.id (static membership)")
    client_id: Text = "lakelog"
    session_timeout_ms: TimeoutMs | None = Field(
        default=None, description="absent: group.consumer.session.timeout.ms; within group.min/max.session.timeout.ms")
    rebalance_timeout_ms: TimeoutMs = Field(default=300_000, description="how long the member may take to revoke "
                                                                         "partitions (max.poll.interval.ms)")


class HeartbeatIn(BaseModel):
    """A member's heartbeat: its epoch and the partitions it still owns; topics only when they changed."""

    model_config = _FORBID
    member_epoch: Annotated[int, Field(ge=-2, le=INT32_MAX)]
    owned: list[TopicPartitionIn] = Field(default_factory=list, description="partitions the member still holds")
    topics: list[Text] | None = Field(default=None, description="a new subscription (absent: unchanged)")
    group_instance_id: Text | None = None


class HeartbeatOut(BaseModel):
    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: list[TopicPartitionOut] | None = Field(description="the partitions the member may own now "
                                                                    "(absent: unchanged)")


class MemberOut(BaseModel):
    member_id: str
    group_instance_id: str | None
    client_id: str
    topics: list[str]
    assignment: list[TopicPartitionOut]
    member_epoch: int
    protocol: str = Field(description="consumer (KIP-848, HTTP and Kafka 4 members) or classic (JoinGroup)")


class GroupOut(BaseModel):
    group: str
    state: str
    type: str = Field(description="classic or consumer (KIP-848)")
    protocol: str | None = Field(description="the classic protocol (assignor) name, or a consumer group's "
                                             "server assignor")
    generation: int = Field(description="the classic generation, or the consumer group's epoch")
    leader: str | None
    members: list[MemberOut]
    offsets: list[dict]
