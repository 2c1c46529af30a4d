"""Request bodies of the v3 routes (pydantic, strict: unknown fields refused, no coercion), Confluent's names."""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import BaseModel, ConfigDict, Field

from api.schemas import INT32_MAX, Text

_STRICT = ConfigDict(extra="forbid", strict=True)


class ConfigIn(BaseModel):
    """One topic config: Kafka's key and its value (null: the default)."""

    model_config = _STRICT
    name: Text
    value: Union[Text, None] = None


class CreateTopicIn(BaseModel):
    """Confluent's ``CreateTopicRequestData``; ``replication_factor`` is accepted and not used (the object store
    keeps the data durable), ``replicas_assignments`` is refused (there are no brokers to assign)."""

    model_config = _STRICT
    topic_name: Text
    partitions_count: Annotated[int, Field(ge=-1, le=INT32_MAX)] = -1
    replication_factor: Annotated[int, Field(ge=-1, le=32767)] = -1
    replicas_assignments: Union[dict[Text, list[int]], None] = None
    configs: list[ConfigIn] = Field(default_factory=list)
    validate_only: bool = False


class UpdatePartitionCountIn(BaseModel):
    """Confluent's ``UpdatePartitionCountRequestData``: increase the partition count."""

    model_config = _STRICT
    partitions_count: Annotated[int, Field(ge=1, le=INT32_MAX)]


class UpdateConfigIn(BaseModel):
    """Confluent's ``UpdateConfigRequestData``: the config's new value."""

    model_config = _STRICT
    value: Union[Text, None] = None


class AlterConfigIn(BaseModel):
    """One entry of ``configs:alter``; only ``SET`` is supported (lakelog cannot reset a config to its default)."""

    model_config = _STRICT
    name: Text
    value: Union[Text, None] = None
    operation: Union[Literal["SET", "DELETE"], None] = None


class AlterConfigsIn(BaseModel):
    """Confluent's ``AlterConfigBatchRequestData``."""

    model_config = _STRICT
    data: list[AlterConfigIn]
    validate_only: bool = False
