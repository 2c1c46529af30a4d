"""Topic and broker administration against Apache Kafka 4.1.1 as the reference: the same requests to both (a KRaft
node, ``kafka_reference``) with confluent-kafka's AdminClient, answers compared; and Kafka's own tools
(kafka-configs, kafka-topics) run against lakelog (kafka-acls: tests/kafka/test_kafka_acls.py).

Deliberate differences, each with its reason (docs/kafka-clients.md):
* ``log.retention.check.interval.ms`` is a topic config in lakelog only (the maintenance scheduler's per-topic
  override), and so are the Schema Registry's keys (Confluent Server's schema validation, lakelog's typed
  columns);
* ``min.insync.replicas`` is described by Kafka 4.x as a cluster-level dynamic config, which its controller writes
  when the cluster is formatted (KIP-966); lakelog has no replicas and describes Kafka's default.
"""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewPartitions,
                                   NewTopic)

from lakelog.storage.topic_config import (KEY_SCHEMA_COLUMNS, KEY_SCHEMA_VALIDATION, KEY_SUBJECT_NAME_STRATEGY,
                                          VALUE_SCHEMA_COLUMNS, VALUE_SCHEMA_VALIDATION, VALUE_SUBJECT_NAME_STRATEGY)
from reference.kafka import TEST_BROKER_OVERRIDES, run_tool
from wire_client import WireClient

LAKELOG_ONLY = {"log.retention.check.interval.ms", KEY_SCHEMA_VALIDATION, VALUE_SCHEMA_VALIDATION,
                KEY_SUBJECT_NAME_STRATEGY, VALUE_SUBJECT_NAME_STRATEGY, KEY_SCHEMA_COLUMNS, VALUE_SCHEMA_COLUMNS}
KAFKA_CLUSTER_LEVEL = {"min.insync.replicas"}


def _name() -> str:
    return f"ref-{uuid.uuid4().hex[:10]}"


@pytest.fixture(scope="module")
def both(kafka_reference, kafka_front):
    return {"kafka": AdminClient({"bootstrap.servers": kafka_reference.bootstrap}),
            "lakelog": AdminClient({"bootstrap.servers": kafka_front.bootstrap})}


MARKER = "segment.jitter.ms"  # set last, then awaited: Kafka's broker applies its controller's changes a moment later


def _describe(admin: AdminClient, name: str, settle: bool = True) -> dict:
    """A topic's configs once every change made before is visible: a marker config is set after them and awaited
    (a broker describes from metadata that follows its controller's a moment later), then left out."""
    res = ConfigResource(ConfigResource.Type.TOPIC, name)
    marker = str(uuid.uuid4().int % 1_000_000)
    if settle:
        alter = ConfigResource(ConfigResource.Type.TOPIC, name, incremental_configs=[
            ConfigEntry(MARKER, marker, incremental_operation=AlterConfigOpType.SET)])
        admin.incremental_alter_configs([alter])[alter].result(60)
    deadline = time.monotonic() + 30
    while True:
        try:
            configs = admin.describe_configs([res])[res].result(60)
            if not settle or configs[MARKER].value == marker:
                break
        except KafkaException:
            pass
        assert time.monotonic() < deadline, f"{name}'s changes never became visible"
        time.sleep(0.2)
    return {k: (v.value, v.source, v.is_read_only, v.is_sensitive,
                sorted((s.name, s.value, s.source) for s in v.synonyms.values()))
            for k, v in configs.items() if k != MARKER or not settle}


def _outcome(future) -> str:
    try:
        future.result(60)
        return "ok"
    except KafkaException as e:
        return e.args[0].name()


def test_topic_configs_described_as_kafka_describes_them(both):
    configs = {"flush.ms": "1000", "cleanup.policy": "compact,delete", "retention.bytes": "4096",
               "unclean.leader.election.enable": "true", "message.timestamp.type": "LogAppendTime"}
    described = {}
    for side, admin in both.items():
        name = _name()
        admin.create_topics([NewTopic(name, 1, 1, config=configs)])[name].result(60)
        described[side] = _describe(admin, name)
    kafka, lakelog = described["kafka"], described["lakelog"]
    assert set(lakelog) - LAKELOG_ONLY == set(kafka)
    for key in set(kafka) - KAFKA_CLUSTER_LEVEL:
        assert lakelog[key] == kafka[key], key


@pytest.mark.parametrize("key,value", [
    ("flush.ms", "-1"), ("flush.ms", "x"), ("segment.bytes", "1000"), ("segment.bytes", "1048576"),
    ("preallocate", "maybe"), ("preallocate", "TRUE"), ("cleanup.policy", "compact,"), ("cleanup.policy", ""),
    ("cleanup.policy", "Compact"), ("min.insync.replicas", "0"), ("compression.zstd.level", "23"),
    ("compression.gzip.level", "0"), ("compression.type", "brotli"), ("message.timestamp.type", "createtime"),
    ("min.cleanable.dirty.ratio", "1.01"), ("retention.ms", "-2"), ("retention.bytes", "-7"),
    ("max.message.bytes", "2147483648"), ("leader.replication.throttled.replicas", "0:1,x"),
    ("remote.storage.enable", "false"), ("message.downconversion.enable", "true"), ("no.such.key", "1"),
])
def test_config_values_are_refused_as_kafka_refuses_them(both, key, value):
    outcomes = {side: _outcome(_create(admin, {key: value})) for side, admin in both.items()}
    assert outcomes["lakelog"] == outcomes["kafka"], outcomes


def _create(admin: AdminClient, configs: dict):
    name = _name()
    return admin.create_topics([NewTopic(name, 1, 1, config=configs)])[name]


@pytest.mark.parametrize("ops", [
    [("cleanup.policy", "compact", AlterConfigOpType.APPEND)],
    [("cleanup.policy", "delete", AlterConfigOpType.SUBTRACT)],
    [("cleanup.policy", "compact,delete", AlterConfigOpType.APPEND)],
    [("leader.replication.throttled.replicas", "0:1", AlterConfigOpType.APPEND)],
    [("retention.ms", "1", AlterConfigOpType.APPEND)],
    [("retention.ms", None, AlterConfigOpType.DELETE), ("flush.ms", "7", AlterConfigOpType.SET)],
])
def test_incremental_operations_act_as_kafkas(both, ops):
    results = {}
    for side, admin in both.items():
        name = _name()
        admin.create_topics([NewTopic(name, 1, 1, config={"retention.ms": "5000"})])[name].result(60)
        res = ConfigResource(ConfigResource.Type.TOPIC, name, incremental_configs=[
            ConfigEntry(k, v, incremental_operation=op) for k, v, op in ops])
        outcome = _outcome(admin.incremental_alter_configs([res])[res])
        after = _describe(admin, name)
        results[side] = (outcome, {k: after[k][:2] for k in ("cleanup.policy", "retention.ms", "flush.ms",
                                                               "leader.replication.throttled.replicas")})
    assert results["lakelog"] == results["kafka"], results


def test_alter_configs_replaces_as_kafka_does(both):
    results = {}
    for side, admin in both.items():
        name = _name()
        admin.create_topics([NewTopic(name, 1, 1, config={"retention.ms": "5000", "flush.ms": "9"})])[name].result(60)
        res = ConfigResource(ConfigResource.Type.TOPIC, name, set_config={"segment.ms": "100000"})
        admin.alter_configs([res])[res].result(60)
        after = _describe(admin, name)
        results[side] = {k: after[k][:2] for k in ("segment.ms", "retention.ms", "flush.ms")}
    assert results["lakelog"] == results["kafka"], results


@pytest.mark.parametrize("partitions,rf,assignment", [
    (1, 1, None), (2, -1, None), (1, 3, None), (1, 0, None), (0, 1, None),
    (1, -1, [[1]]), (2, -1, [[1], [1]]), (1, -1, [[2]]), (1, -1, [[1, 1]]),
])
def test_partitions_and_replicas_checked_as_kafka_checks_them(both, partitions, rf, assignment):
    outcomes = {}
    for side, admin in both.items():
        name = _name()
        topic = (NewTopic(name, partitions, rf, replica_assignment=assignment) if assignment else
                 NewTopic(name, partitions, rf))
        try:
            outcomes[side] = _outcome(admin.create_topics([topic])[name])
        except (ValueError, KafkaException) as e:  # refused by the client before any request
            outcomes[side] = type(e).__name__
    assert outcomes["lakelog"] == outcomes["kafka"], outcomes


def test_create_partitions_with_assignments_as_kafka(both):
    outcomes = {}
    for side, admin in both.items():
        name = _name()
        admin.create_topics([NewTopic(name, 1, 1)])[name].result(60)
        outcomes[side] = (_outcome(admin.create_partitions([NewPartitions(name, 2, replica_assignment=[[1]])])[name]),
                          _outcome(admin.create_partitions([NewPartitions(name, 4, replica_assignment=[[7], [1]])])[name]),
                          _outcome(admin.create_partitions([NewPartitions(name, 2)])[name]))
    assert outcomes["lakelog"] == outcomes["kafka"], outcomes


def test_broker_configs_described_as_kafka(both):
    described = {}
    for side, admin in both.items():
        res = ConfigResource(ConfigResource.Type.BROKER, "1")
        described[side] = {k: (v.value, v.source, v.is_read_only)
                           for k, v in admin.describe_configs([res])[res].result(60).items()}
    kafka, lakelog = described["kafka"], described["lakelog"]
    assert lakelog["node.id"] == kafka["node.id"] == ("1", 4, True)
    for key, entry in lakelog.items():
        # source 4 (STATIC_BROKER_CONFIG): set on the command line of the test front or of the reference
        if key in kafka and key not in KAFKA_CLUSTER_LEVEL and entry[1] != 4 and kafka[key][1] != 4:
            assert entry == kafka[key], key


def test_kafkas_broker_config_types_are_lakelogs(kafka_reference):
    """lakelog types and refuses broker configs by a table taken from Kafka 4.1.1: the reference broker agrees."""
    from lakelog.cluster.kafka_broker_configs import KAFKA_BROKER_CONFIG_TYPES, KAFKA_DYNAMIC_BROKER_CONFIGS
    from lakelog.storage.topic_config import CONFIG_TYPE_CODES

    with WireClient(kafka_reference.bootstrap) as w:
        r = w.request(32, 4, {"resources": [{"resource_type": 4, "resource_name": "1", "configuration_keys": None}],
                              "include_synonyms": False, "include_documentation": False})
    # Kafka describes an internal config (log.initial.task.delay.ms) only when it is set, as the reference's are
    kafka = {c.name: (c.config_type, c.read_only) for c in r.results[0].configs
             if c.name not in TEST_BROKER_OVERRIDES or c.name in KAFKA_BROKER_CONFIG_TYPES}
    assert kafka == {k: (CONFIG_TYPE_CODES[t], k not in KAFKA_DYNAMIC_BROKER_CONFIGS)
                     for k, t in KAFKA_BROKER_CONFIG_TYPES.items()}


def _tool(*args: str, bootstrap: str) -> str:
    return run_tool(args[0], "--bootstrap-server", bootstrap, *args[1:]).stdout


def test_kafka_configs_tool_against_lakelog(kafka_front, http):
    """kafka-configs for topics, brokers (cluster-wide default), users (SCRAM credentials and quotas) and clients
    (the <default> entity); each change is read back through another path (HTTP, the protocol) so that one JVM
    start covers one entity kind (a tool run costs seconds)."""
    b = kafka_front.bootstrap
    name = _name()
    admin = AdminClient({"bootstrap.servers": b})
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(60)
    _tool("kafka-configs", "--entity-type", "topics", "--entity-name", name, "--alter", "--add-config",
          "flush.ms=1000,cleanup.policy=[compact,delete]", bootstrap=b)
    assert http.get(f"/v1/topics/{name}").json()["configs"]["cleanup.policy"] == "compact,delete"
    out = _tool("kafka-configs", "--entity-type", "topics", "--entity-name", name, "--describe", bootstrap=b)
    assert "flush.ms=1000" in out and "cleanup.policy=compact,delete" in out

    out = _tool("kafka-configs", "--entity-type", "brokers", "--entity-name", "1", "--describe", "--all", bootstrap=b)
    assert "auto.create.topics.enable=true" in out and "num.partitions=1" in out
    _tool("kafka-configs", "--entity-type", "brokers", "--entity-default", "--alter", "--add-config",
          "log.cleaner.threads=2", bootstrap=b)
    with WireClient(b) as w:  # described over the protocol (confluent-kafka refuses the default's empty name),
        r = w.request(32, 4, {"resources": [{"resource_type": 4, "resource_name": "", "configuration_keys": None}],
                              "include_synonyms": False, "include_documentation": False})
        assert ("log.cleaner.threads", "2") in [(c.name, c.value) for c in r.results[0].configs]
        r = w.request(44, 1, {"resources": [{"resource_type": 4, "resource_name": "", "configs": [  # then removed:
            {"name": "log.cleaner.threads", "config_operation": 1, "value": None}]}], "validate_only": False})
        assert r.responses[0].error_code == 0  # the session's front is shared (test_broker_configs)

    user = f"u-{uuid.uuid4().hex[:6]}"
    for config in ("SCRAM-SHA-256=[iterations=8192,password=secret]", "producer_byte_rate=1048576"):  # one kind a run
        _tool("kafka-configs", "--entity-type", "users", "--entity-name", user, "--alter", "--add-config", config,
              bootstrap=b)
    out = _tool("kafka-configs", "--entity-type", "users", "--entity-name", user, "--describe", bootstrap=b)
    assert "SCRAM-SHA-256=iterations=8192" in out and "producer_byte_rate=1048576" in out
    _tool("kafka-configs", "--entity-type", "clients", "--entity-default", "--alter", "--add-config",
          "request_percentage=200", bootstrap=b)
    with WireClient(b) as w:  # the quotas are the root's: described the same over the protocol
        r = w.request(48, 1, {"components": [{"entity_type": "client-id", "match_type": 1, "match": None}],
                              "strict": True})
        assert [(v.key, v.value) for v in r.entries[0].values] == [("request_percentage", 200.0)]
        w.request(49, 1, {"entries": [{"entity": [{"entity_type": "client-id", "entity_name": None}],
                                       "ops": [{"key": "request_percentage", "value": 0.0, "remove": True}]}],
                          "validate_only": False})


def test_kafka_topics_tool_with_a_replica_assignment(kafka_front, http):
    name = _name()
    _tool("kafka-topics", "--create", "--topic", name, "--replica-assignment", "1,1,1", bootstrap=kafka_front.bootstrap)
    assert len(http.get(f"/v1/topics/{name}").json()["partitions"]) == 3
    described = AdminClient({"bootstrap.servers": kafka_front.bootstrap}).list_topics(name, timeout=60).topics[name]
    assert sorted((p.id, p.replicas, p.isrs) for p in described.partitions.values()) == \
        [(0, [1], [1]), (1, [1], [1]), (2, [1], [1])]
