"""Configs, replica assignments, auto-creation and KIP-430 operations over the Kafka protocol, with clients nobody
here wrote (confluent-kafka's and kafka-python's admin clients, Debian's kcat); the wire client only where no
client exposes a field (DescribeConfigs' documentation and config types)."""

from __future__ import annotations

import subprocess
import uuid

import pytest
from confluent_kafka import KafkaException, Producer, TopicCollection
from confluent_kafka.admin import (AclOperation, AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,
                                   ConfigSource, NewPartitions, NewTopic)

from wire_client import WireClient

TOPIC, BROKER = ConfigResource.Type.TOPIC, ConfigResource.Type.BROKER


@pytest.fixture
def admin(bootstrap) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def _name() -> str:
    return f"cfg-{uuid.uuid4().hex[:10]}"


def _configs(admin, name: str) -> dict:
    res = ConfigResource(TOPIC, name)
    return admin.describe_configs([res])[res].result(30)


def _incremental(admin, name: str, *entries, kind=TOPIC):
    res = ConfigResource(kind, name, incremental_configs=list(entries))
    return admin.incremental_alter_configs([res])[res].result(30)


def _error(future) -> str:
    with pytest.raises(KafkaException) as e:
        future.result(30)
    return e.value.args[0].name()


def test_every_kafka_topic_config_is_accepted_and_described(admin):
    """librdkafka 0081's configs (flush.ms, max.compaction.lag.ms) and every other key Kafka 4.1 defines, set at
    creation and described back with their source."""
    configs = {"flush.ms": "12345678", "flush.messages": "1000", "index.interval.bytes": "8192",
               "message.timestamp.type": "LogAppendTime", "min.insync.replicas": "2",
               "unclean.leader.election.enable": "true", "remote.storage.enable": "true",
               "segment.jitter.ms": "100", "compression.type": "gzip", "compression.gzip.level": "6",
               "max.compaction.lag.ms": "3600000", "preallocate": "true", "local.retention.ms": "1000",
               "leader.replication.throttled.replicas": "*"}
    name = _name()
    admin.create_topics([NewTopic(name, 1, 1, config=configs)])[name].result(30)
    described = _configs(admin, name)
    for k, v in configs.items():
        assert described[k].value == v and described[k].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value, k
    assert described["segment.index.bytes"].value == "10485760"
    assert described["segment.index.bytes"].source == ConfigSource.DEFAULT_CONFIG.value
    assert {s for s in described["retention.bytes"].synonyms} == {"log.retention.bytes"}  # where a default comes from
    assert described["flush.ms"].synonyms["flush.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value


@pytest.mark.parametrize("key,value", [
    ("flush.ms", "-1"), ("segment.bytes", "1000"), ("preallocate", "maybe"), ("cleanup.policy", "compact,"),
    ("min.insync.replicas", "0"), ("compression.zstd.level", "99"), ("no.such.config", "1"),
])
def test_kafkas_rules_refuse_bad_values(admin, key, value):
    name = _name()
    assert _error(admin.create_topics([NewTopic(name, 1, 1, config={key: value})])[name]) == "INVALID_CONFIG"
    assert name not in admin.list_topics(timeout=30).topics


def test_incremental_append_subtract_delete(admin):
    """librdkafka 0011: APPEND cleanup.policy=compact to the default; SUBTRACT takes it away; DELETE restores
    the default (described as DEFAULT_CONFIG again)."""
    name = _name()
    admin.create_topics([NewTopic(name, 1, 1, config={"retention.ms": "1000"})])[name].result(30)
    _incremental(admin, name, ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND))
    assert _configs(admin, name)["cleanup.policy"].value == "delete,compact"
    _incremental(admin, name, ConfigEntry("cleanup.policy", "delete", incremental_operation=AlterConfigOpType.SUBTRACT))
    assert _configs(admin, name)["cleanup.policy"].value == "compact"
    _incremental(admin, name, ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE))
    after = _configs(admin, name)
    assert after["retention.ms"].value == "604800000" and after["retention.ms"].source == \
        ConfigSource.DEFAULT_CONFIG.value
    res = ConfigResource(TOPIC, name, incremental_configs=[
        ConfigEntry("retention.ms", "5", incremental_operation=AlterConfigOpType.APPEND)])
    assert _error(admin.incremental_alter_configs([res])[res]) == "INVALID_CONFIG"


def test_alter_configs_replaces_the_whole_set(admin):
    """Kafka's legacy AlterConfigs (kafkajs alterConfigs, librdkafka 0092): what is not given goes back to its
    default."""
    name = _name()
    admin.create_topics([NewTopic(name, 1, 1, config={"retention.ms": "1000", "flush.ms": "5"})])[name].result(30)
    res = ConfigResource(TOPIC, name, set_config={"segment.ms": "100000"})
    admin.alter_configs([res])[res].result(30)
    after = _configs(admin, name)
    assert after["segment.ms"].value == "100000"
    assert after["retention.ms"].value == "604800000" and after["flush.ms"].value == "9223372036854775807"
    bad = ConfigResource(TOPIC, name, set_config={"retention.ms": "x"})
    assert _error(admin.alter_configs([bad])[bad]) == "INVALID_CONFIG"
    assert _configs(admin, name)["segment.ms"].value == "100000"  # nothing of a refused request is written
    missing = ConfigResource(TOPIC, _name(), set_config={"retention.ms": "1"})
    assert _error(admin.alter_configs([missing])[missing]) == "UNKNOWN_TOPIC_OR_PART"  # librdkafka's name of 3


def test_kafka_python_admin_alters_resets_and_describes(bootstrap):
    """kafka-python's legacy AlterConfigs path keeps the other overrides by sending them again; its reset sends
    them without the key reset, which AlterConfigs then takes back to its default."""
    from kafka.admin import ConfigResource as KConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic as KTopic

    name = _name()
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30000)

    def described() -> dict:
        out = admin.describe_configs([KConfigResource(ConfigResourceType.TOPIC, name)], include_synonyms=True,
                                     config_filter="all")
        return next(iter(next(iter(out.values())).values()))

    try:
        admin.create_topics([KTopic(name, 1, 1, topic_configs={"flush.messages": "7"})])
        admin.alter_configs([KConfigResource(ConfigResourceType.TOPIC, name, configs={"retention.bytes": "4096"})],
                            incremental=False)
        entries = described()
        assert entries["retention.bytes"]["value"] == "4096" and entries["flush.messages"]["value"] == "7"
        assert entries["retention.bytes"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
        admin.reset_configs([KConfigResource(ConfigResourceType.TOPIC, name, configs=["flush.messages"])],
                            incremental=False)
        entries = described()
        assert entries["flush.messages"]["value"] == "9223372036854775807"
        assert entries["flush.messages"]["config_source"] == "DEFAULT_CONFIG"
        assert entries["retention.bytes"]["value"] == "4096"
    finally:
        admin.close()


def test_describe_configs_documentation_and_types(bootstrap, topic):
    with WireClient(bootstrap) as w:
        r = w.request(32, 4, {"resources": [{"resource_type": 2, "resource_name": topic,
                                             "configuration_keys": ["flush.messages", "cleanup.policy", "preallocate"]}],
                              "include_synonyms": True, "include_documentation": True})
    configs = {c.name: c for c in r.results[0].configs}
    assert set(configs) == {"flush.messages", "cleanup.policy", "preallocate"}
    assert (configs["flush.messages"].config_type, configs["cleanup.policy"].config_type,
            configs["preallocate"].config_type) == (5, 7, 1)  # LONG, LIST, BOOLEAN
    assert "durable Delta commit" in configs["flush.messages"].documentation
    assert [(s.name, s.source) for s in configs["flush.messages"].synonyms] == [("log.flush.interval.messages", 5)]


def test_broker_configs(admin):
    """A front's settings are read-only broker configs; others are stored and described, per broker and
    cluster-wide (librdkafka 0081's broker resources)."""
    broker = ConfigResource(BROKER, "1")
    configs = admin.describe_configs([broker])[broker].result(30)
    assert configs["auto.create.topics.enable"].value == "true" and configs["auto.create.topics.enable"].is_read_only
    assert configs["num.partitions"].value == "1"
    _incremental(admin, "1", ConfigEntry("log.cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND),
                 ConfigEntry("background.threads", "9", incremental_operation=AlterConfigOpType.SET), kind=BROKER)
    res = ConfigResource(BROKER, "1", set_config={"sasl.kerberos.min.time.before.relogin": "58000",
                                                  "log.cleanup.policy": "delete,compact", "my.plugin.key": "x"})
    admin.alter_configs([res])[res].result(30)
    configs = admin.describe_configs([broker])[broker].result(30)
    assert configs["log.cleanup.policy"].value == "delete,compact"
    assert configs["log.cleanup.policy"].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
    assert "background.threads" not in configs  # AlterConfigs replaced the broker's whole set
    assert configs["sasl.kerberos.min.time.before.relogin"].value == "58000"  # typed by Kafka's table: a LONG
    assert configs["my.plugin.key"].is_sensitive and configs["my.plugin.key"].value is None  # Kafka has no type
    with WireClient(admin.list_topics(timeout=30).orig_broker_name.split("/")[0]) as w:  # no client names '' here
        r = w.request(44, 1, {"resources": [{"resource_type": 4, "resource_name": "", "configs": [
            {"name": "log.retention.ms", "config_operation": 0, "value": "1000"}]}], "validate_only": False})
        assert r.responses[0].error_code == 0
        r = w.request(32, 4, {"resources": [{"resource_type": 4, "resource_name": "", "configuration_keys": None}],
                              "include_synonyms": True, "include_documentation": False})
        assert [(c.name, c.value, c.config_source) for c in r.results[0].configs] == [("log.retention.ms", "1000", 3)]
        r = w.request(33, 2, {"resources": [{"resource_type": 4, "resource_name": "7", "configs": [
            {"name": "background.threads", "value": "1"}]}], "validate_only": False})
        assert r.responses[0].error_code == 42  # INVALID_REQUEST: another broker's id
    for bad in (ConfigResource(BROKER, "1", set_config={"num.partitions": "3"}),
                ConfigResource(BROKER, "1", set_config={"log.retention.ms": "soon"})):
        assert _error(admin.alter_configs([bad])[bad]) == "INVALID_REQUEST"


@pytest.mark.parametrize("assignment,rf,error", [
    ({0: [1]}, None, None),
    ({0: [1], 1: [1]}, None, None),
    ({0: [2]}, None, "INVALID_REPLICA_ASSIGNMENT"),
    ({0: [1, 1]}, None, "INVALID_REPLICA_ASSIGNMENT"),
    ({1: [1]}, None, "INVALID_REPLICA_ASSIGNMENT"),
    (None, -1, None),
    (None, 1, None),
    (None, 3, "INVALID_REPLICATION_FACTOR"),
])
def test_replica_assignments_and_factors(admin, assignment, rf, error):
    name = _name()
    if assignment is not None:
        topic = NewTopic(name, len(assignment), -1, replica_assignment=[assignment[p] for p in sorted(assignment)]) \
            if sorted(assignment) == list(range(len(assignment))) else None
        if topic is None:  # a gap in the partition ids: only the wire protocol can say that
            return _wire_assignment(admin, name, assignment, error)
    else:
        topic = NewTopic(name, 1, rf)
    future = admin.create_topics([topic])[name]
    if error is None:
        future.result(30)
        assert name in admin.list_topics(timeout=30).topics
    else:
        assert _error(future) == error


def _wire_assignment(admin, name, assignment, error):
    bootstrap = admin.list_topics(timeout=30).orig_broker_name.split("/")[0]
    with WireClient(bootstrap) as w:
        r = w.request(19, 7, {"topics": [{"name": name, "num_partitions": -1, "replication_factor": -1,
                                          "assignments": [{"partition_index": p, "broker_ids": b}
                                                          for p, b in assignment.items()], "configs": []}],
                              "timeout_ms": 30000, "validate_only": False})
    assert r.topics[0].error_code == 39 and error == "INVALID_REPLICA_ASSIGNMENT"


def test_create_partitions_with_an_assignment_naming_the_broker(admin):
    name = _name()
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)
    admin.create_partitions([NewPartitions(name, 3, replica_assignment=[[1], [1]])])[name].result(30)
    assert len(admin.list_topics(timeout=30).topics[name].partitions) == 3
    assert _error(admin.create_partitions([NewPartitions(name, 4, replica_assignment=[[5]])])[name]) == \
        "INVALID_REPLICA_ASSIGNMENT"


def test_authorized_operations_on_an_open_front(admin, topic):
    """KIP-430 without an authorizer: every operation the resource type supports (7 for the cluster, 8 for a
    topic), as librdkafka's DescribeCluster and DescribeTopics tests expect."""
    cluster = admin.describe_cluster(include_authorized_operations=True).result(30)
    assert set(cluster.authorized_operations) == {
        AclOperation.CREATE, AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS,
        AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER, AclOperation.DESCRIBE}
    assert [n.id for n in cluster.nodes] == [1] and cluster.controller.id == 1
    described = admin.describe_topics(TopicCollection([topic]), include_authorized_operations=True)[topic].result(30)
    assert len(described.authorized_operations) == 8
    assert admin.describe_cluster().result(30).authorized_operations is None  # not asked for


def test_producers_auto_create_topics(bootstrap, admin):
    """auto.create.topics.enable (Kafka's default): a producer's Metadata request creates the topic with
    num.partitions partitions, and its records are delivered at once."""
    name = _name()
    p = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 20000})
    delivered = []
    p.produce(name, b"v", on_delivery=lambda err, msg: delivered.append(err))
    assert p.flush(30) == 0 and delivered == [None]
    assert len(admin.list_topics(timeout=30).topics[name].partitions) == 1


def test_kcat_produces_to_a_new_topic(bootstrap, admin):
    """Debian's kcat (librdkafka 2.0.2) used to wait 30 s for a topic nobody created."""
    name = _name()
    out = subprocess.run(["kcat", "-b", bootstrap, "-P", "-t", name, "-m", "20"], input=b"a\nb\n",
                         capture_output=True, timeout=60)
    assert out.returncode == 0, out.stderr
    consumed = subprocess.run(["kcat", "-b", bootstrap, "-C", "-t", name, "-e", "-m", "20"], capture_output=True,
                              timeout=60)
    assert consumed.stdout.split() == [b"a", b"b"]
