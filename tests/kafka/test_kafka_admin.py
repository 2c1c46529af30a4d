"""Admin over the Kafka protocol with ``confluent_kafka.admin.AdminClient`` against a real listener; every change
is checked over HTTP too."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewPartitions,
                                   NewTopic)


@pytest.fixture
def admin(bootstrap) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def _name() -> str:
    return f"adm-{uuid.uuid4().hex[:10]}"


def test_create_describe_alter_grow_delete(admin, http):
    name = _name()
    admin.create_topics([NewTopic(name, num_partitions=3, replication_factor=1,
                                  config={"retention.ms": "3600000"})])[name].result(30)
    d = http.get(f"/v1/topics/{name}").json()
    assert len(d["partitions"]) == 3 and d["configs"]["retention.ms"] == "3600000"
    with pytest.raises(KafkaException) as e:
        admin.create_topics([NewTopic(name, num_partitions=1)])[name].result(30)
    assert e.value.args[0].name() == "TOPIC_ALREADY_EXISTS"

    res = ConfigResource(ConfigResource.Type.TOPIC, name)
    configs = admin.describe_configs([res])[res].result(30)
    assert configs["retention.ms"].value == "3600000"
    assert configs["cleanup.policy"].value == "delete"

    admin.incremental_alter_configs([ConfigResource(ConfigResource.Type.TOPIC, name, incremental_configs=[
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.SET)])])[res].result(30)
    assert http.get(f"/v1/topics/{name}").json()["configs"]["cleanup.policy"] == "compact"

    admin.create_partitions([NewPartitions(name, 5)])[name].result(30)
    assert len(http.get(f"/v1/topics/{name}").json()["partitions"]) == 5
    with pytest.raises(KafkaException) as e:
        admin.create_partitions([NewPartitions(name, 2)])[name].result(30)
    assert e.value.args[0].name() == "INVALID_PARTITIONS"

    assert name in admin.list_topics(timeout=30).topics
    admin.delete_topics([name])[name].result(30)
    assert http.get(f"/v1/topics/{name}").status_code == 404


def test_compression_type_over_the_kafka_protocol(admin, http):
    """Kafka's compression.type: its values set and described; one Kafka does not know refused with
    INVALID_CONFIG, the topic not created, an existing one's value left as it was."""
    name, bad = _name(), _name()
    admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=1,
                                  config={"compression.type": "lz4"})])[name].result(30)
    res = ConfigResource(ConfigResource.Type.TOPIC, name)
    assert admin.describe_configs([res])[res].result(30)["compression.type"].value == "lz4"
    with pytest.raises(KafkaException) as e:
        admin.create_topics([NewTopic(bad, num_partitions=1, replication_factor=1,
                                      config={"compression.type": "brotli"})])[bad].result(30)
    assert e.value.args[0].name() == "INVALID_CONFIG"
    assert http.get(f"/v1/topics/{bad}").status_code == 404
    with pytest.raises(KafkaException) as e:
        admin.incremental_alter_configs([ConfigResource(ConfigResource.Type.TOPIC, name, incremental_configs=[
            ConfigEntry("compression.type", "LZ4", incremental_operation=AlterConfigOpType.SET)])])[res].result(30)
    assert e.value.args[0].name() == "INVALID_CONFIG"
    assert http.get(f"/v1/topics/{name}").json()["configs"]["compression.type"] == "lz4"
    admin.incremental_alter_configs([ConfigResource(ConfigResource.Type.TOPIC, name, incremental_configs=[
        ConfigEntry("compression.type", "producer", incremental_operation=AlterConfigOpType.SET)])])[res].result(30)
    assert admin.describe_configs([res])[res].result(30)["compression.type"].value == "producer"


def test_delete_records(admin, bootstrap, http):
    name = _name()
    admin.create_topics([NewTopic(name, num_partitions=1)])[name].result(30)
    p = Producer({"bootstrap.servers": bootstrap})
    for i in range(10):
        p.produce(name, f"v{i}".encode())
    assert p.flush(30) == 0
    done = admin.delete_records([TopicPartition(name, 0, 4)])
    [(tp, f)] = done.items()
    assert f.result(30).low_watermark == 4
    assert http.get(f"/v1/topics/{name}").json()["partitions"][0]["log_start_offset"] == 4


def test_groups_listed_and_described(admin, bootstrap):
    from confluent_kafka import Consumer

    name = _name()
    admin.create_topics([NewTopic(name, num_partitions=2)])[name].result(30)
    group = f"g-{name}"
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "session.timeout.ms": 6000})
    c.subscribe([name])
    try:
        for _ in range(40):
            c.poll(0.25)
            if c.assignment():
                break
        assert sorted(tp.partition for tp in c.assignment()) == [0, 1]
        listed = admin.list_consumer_groups().result(30)
        assert group in {g.group_id for g in listed.valid}
        desc = admin.describe_consumer_groups([group])[group].result(30)
        assert len(desc.members) == 1
        assert sorted(tp.partition for tp in desc.members[0].assignment.topic_partitions) == [0, 1]
    finally:
        c.close()
