"""Topic configs: every key Kafka 4.1 defines, parsed and validated by Kafka's rules, with Kafka's messages;
IncrementalAlterConfigs' operations and AlterConfigs' replacement as pure functions."""

from __future__ import annotations

import pytest

from lakelog.errors import InvalidConfig
from lakelog.storage.topic_config import (OP_APPEND, OP_DELETE, OP_SET, OP_SUBTRACT, PUBLIC_TOPIC_CONFIGS,
                                          TOPIC_CONFIGS, ConfigOp, TopicConfig, apply_ops, check_value,
                                          replacement_ops, validate_configs)

# Kafka 4.1's LogConfig keys (TopicConfig plus the replication throttles), as `kafka-configs --describe --all`
# lists them for a topic; beside them lakelog's own keys and Confluent Server's schema-validation keys.
KAFKA_41_TOPIC_KEYS = {
    "cleanup.policy", "compression.gzip.level", "compression.lz4.level", "compression.type", "compression.zstd.level",
    "delete.retention.ms", "file.delete.delay.ms", "flush.messages", "flush.ms",
    "follower.replication.throttled.replicas", "index.interval.bytes", "leader.replication.throttled.replicas",
    "local.retention.bytes", "local.retention.ms", "max.compaction.lag.ms", "max.message.bytes",
    "message.timestamp.after.max.ms", "message.timestamp.before.max.ms", "message.timestamp.type",
    "min.cleanable.dirty.ratio", "min.compaction.lag.ms", "min.insync.replicas", "preallocate",
    "remote.log.copy.disable", "remote.log.delete.on.disable", "remote.storage.enable", "retention.bytes",
    "retention.ms", "segment.bytes", "segment.index.bytes", "segment.jitter.ms", "segment.ms",
    "unclean.leader.election.enable",
}
SCHEMA_KEYS = {"confluent.key.schema.validation", "confluent.value.schema.validation",
               "confluent.key.subject.name.strategy", "confluent.value.subject.name.strategy",
               "lakelog.key.schema.columns", "lakelog.value.schema.columns"}


def test_every_kafka_topic_config_is_known_with_a_valid_default():
    assert set(PUBLIC_TOPIC_CONFIGS) == KAFKA_41_TOPIC_KEYS | SCHEMA_KEYS | {"log.retention.check.interval.ms"}
    for key, c in PUBLIC_TOPIC_CONFIGS.items():
        assert check_value(key, c.default) == c.default, key
    assert validate_configs({k: c.default for k, c in PUBLIC_TOPIC_CONFIGS.items()}) is not None


@pytest.mark.parametrize("key,raw,canonical", [
    ("flush.ms", "12345678", "12345678"),
    ("flush.messages", " 10 ", "10"),
    ("preallocate", "TRUE", "true"),
    ("unclean.leader.election.enable", "False", "false"),
    ("min.cleanable.dirty.ratio", "1e-1", "0.1"),
    ("cleanup.policy", "compact, delete", "compact,delete"),
    ("cleanup.policy", "", ""),  # neither: Kafka 4.1's ValidList accepts the empty list
    ("compression.gzip.level", "-1", "-1"),
    ("compression.zstd.level", "-131072", "-131072"),
    ("compression.lz4.level", "17", "17"),
    ("segment.bytes", "1048576", "1048576"),
    ("retention.bytes", "-5", "-5"),  # Kafka defines no validator for it
    ("leader.replication.throttled.replicas", "0:1,1:2", "0:1,1:2"),
    ("follower.replication.throttled.replicas", "*", "*"),
    ("local.retention.ms", "-2", "-2"),
    ("message.timestamp.type", "LogAppendTime", "LogAppendTime"),
    ("confluent.value.schema.validation", "True", "true"),
    ("confluent.key.subject.name.strategy", "RecordNameStrategy",
     "io.confluent.kafka.serializers.subject.RecordNameStrategy"),
])
def test_kafka_values_are_accepted_in_canonical_form(key, raw, canonical):
    assert check_value(key, raw) == canonical


@pytest.mark.parametrize("key,raw,message", [
    ("retention.ms", "soon", "Invalid value soon for configuration retention.ms: Not a number of type LONG"),
    ("retention.ms", "1_000", "Not a number of type LONG"),
    ("retention.ms", "-2", "Value must be at least -1"),
    ("segment.bytes", "1048575", "Value must be at least 1048576"),
    ("segment.bytes", "2147483648", "Not a number of type INT"),
    ("max.message.bytes", "-1", "Value must be at least 0"),
    ("flush.messages", "0", "Value must be at least 1"),
    ("min.insync.replicas", "0", "Value must be at least 1"),
    ("preallocate", "yes", "Expected value to be either true or false"),
    ("min.cleanable.dirty.ratio", "1.5", "Value must be no more than 1"),
    ("min.cleanable.dirty.ratio", "NaN", "Not a number of type DOUBLE"),
    ("cleanup.policy", "compact,", "String must be one of: compact, delete"),
    ("cleanup.policy", "Compact", "String must be one of: compact, delete"),
    ("compression.type", "brotli", "String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer"),
    ("compression.gzip.level", "0", "Value must be between 1 and 9 or equal to -1"),
    ("compression.lz4.level", "18", "Value must be no more than 17"),
    ("compression.zstd.level", "23", "Value must be no more than 22"),
    ("message.timestamp.type", "createtime", "String must be one of: CreateTime, LogAppendTime"),
    ("leader.replication.throttled.replicas", "0-1", "must be the literal '*' or a list of replicas"),
    ("local.retention.bytes", "-3", "Value must be at least -2"),
    ("flush.ms", "", "Not a number of type LONG"),
    ("message.downconversion.enable", "true", "Unknown topic config name: message.downconversion.enable"),
    ("retention.mss", "1", "Unknown topic config name: retention.mss"),
    ("lakelog.value.schema.columns", "1", "Expected value to be either true or false"),
    ("confluent.value.subject.name.strategy", "SubjectStrategy", "String must be one of: io.confluent"),
])
def test_invalid_values_are_refused_with_kafkas_message(key, raw, message):
    with pytest.raises(InvalidConfig) as e:
        check_value(key, raw)
    assert message in e.value.message


@pytest.mark.parametrize("configs,existing,message", [
    ({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"}, {},
     "conflict topic config setting min.compaction.lag.ms (10) > max.compaction.lag.ms (5)"),
    ({"remote.storage.enable": "true", "cleanup.policy": "compact"}, {},
     "Remote log storage only supports topics with cleanup.policy=delete"),
    ({"remote.storage.enable": "true", "retention.bytes": "100", "local.retention.bytes": "200"}, {},
     "Value must not be more than retention.bytes property value: 100"),
    ({"remote.storage.enable": "true", "retention.ms": "100", "local.retention.ms": "-1"}, {},
     "Value must not be -1 as retention.ms value is set as 100."),
    ({"remote.storage.enable": "false"}, {"remote.storage.enable": "true"},
     "It is invalid to disable remote storage without deleting remote data"),
    ({"remote.log.copy.disable": "true", "local.retention.ms": "5"}, {"remote.storage.enable": "true"},
     "When `remote.log.copy.disable` is set to true"),
])
def test_kafkas_cross_key_rules(configs, existing, message):
    with pytest.raises(InvalidConfig) as e:
        validate_configs(configs, existing)
    assert message in e.value.message


def test_cross_key_rules_pass_when_consistent():
    assert validate_configs({"remote.storage.enable": "false", "remote.log.delete.on.disable": "true"},
                            {"remote.storage.enable": "true"})
    assert validate_configs({"remote.storage.enable": "true", "retention.ms": "100", "local.retention.ms": "50"})


@pytest.mark.parametrize("overrides,ops,changes", [
    ({}, [ConfigOp(OP_APPEND, "cleanup.policy", "compact")], {"cleanup.policy": "delete,compact"}),  # librdkafka 0011
    ({"cleanup.policy": "compact"}, [ConfigOp(OP_APPEND, "cleanup.policy", "compact")], {}),
    ({"cleanup.policy": "delete,compact"}, [ConfigOp(OP_SUBTRACT, "cleanup.policy", "compact")],
     {"cleanup.policy": "delete"}),
    ({}, [ConfigOp(OP_SUBTRACT, "cleanup.policy", "delete")], {"cleanup.policy": ""}),
    ({}, [ConfigOp(OP_APPEND, "leader.replication.throttled.replicas", "0:1,1:1")],
     {"leader.replication.throttled.replicas": "0:1,1:1"}),
    ({"retention.ms": "5"}, [ConfigOp(OP_DELETE, "retention.ms")], {"retention.ms": None}),
    ({}, [ConfigOp(OP_DELETE, "not.a.key")], {}),  # Kafka deletes an absent key silently
    ({}, [ConfigOp(OP_SET, "flush.ms", "10")], {"flush.ms": "10"}),
])
def test_incremental_operations(overrides, ops, changes):
    assert {k: v for k, v in apply_ops(overrides, ops).items() if overrides.get(k) != v} == changes


def test_append_to_a_key_that_is_no_list_is_invalid_config():
    with pytest.raises(InvalidConfig) as e:
        apply_ops({}, [ConfigOp(OP_APPEND, "retention.ms", "1")])
    assert e.value.message == "Can't APPEND to key retention.ms because its type is not LIST."


def test_alter_configs_replaces_the_whole_set():
    overrides = {"retention.ms": "5", "flush.ms": "7"}
    changes = {k: v for k, v in apply_ops(overrides, replacement_ops({"segment.ms": "9"})).items()
               if v is not None or k in overrides}
    assert changes == {"retention.ms": None, "flush.ms": None, "segment.ms": "9"}


def test_internal_segment_bytes_overrides_the_merge_target_only_when_set():
    assert TopicConfig({}).segment_bytes == 1 << 30
    assert TopicConfig({"internal.segment.bytes": "1000"}).segment_bytes == 1000
    assert "internal.segment.bytes" not in TopicConfig({}).raw()
    assert TopicConfig({"internal.segment.bytes": "1000"}).raw()["internal.segment.bytes"] == "1000"
    assert all(c.server_default is None or "." in c.server_default for c in TOPIC_CONFIGS.values())
