"""A Kafka client's error messages name no storage path: the library's messages name the root ("topic T does not
exist under ROOT") for its command line, and the Kafka front passes them on as HTTP bodies do, without it."""

from __future__ import annotations

import uuid

from wire_client import WireClient

PRODUCE, DESCRIBE_CONFIGS, CREATE_TOPICS = 0, 32, 19
TOPIC_RESOURCE = 2


def test_error_messages_name_no_storage_root(kafka_front, bootstrap, topic):
    missing = f"missing-{uuid.uuid4().hex[:8]}"
    root = kafka_front.root
    with WireClient(bootstrap) as wire:
        created = wire.request(CREATE_TOPICS, 7, {"topics": [{"name": topic, "num_partitions": 1,
                                                              "replication_factor": 1}], "timeout": 10000})
        described = wire.request(DESCRIBE_CONFIGS, 4, {"resources": [
            {"resource_type": TOPIC_RESOURCE, "resource_name": missing, "configuration_keys": None}]})
        produced = wire.request(PRODUCE, 9, {"acks": -1, "timeout": 10000, "topic_data": [
            {"name": missing, "partition_data": [{"index": 0, "records": None}]}]})
    messages = {
        "CreateTopics": (created.topics[0].error_code, created.topics[0].error_message),
        "DescribeConfigs": (described.results[0].error_code, described.results[0].error_message),
        "Produce": (produced.responses[0].partition_responses[0].error_code,
                    produced.responses[0].partition_responses[0].error_message),
    }
    assert messages["CreateTopics"][0] == 36  # TOPIC_ALREADY_EXISTS
    assert messages["DescribeConfigs"][0] == 3 and messages["Produce"][0] == 3  # UNKNOWN_TOPIC_OR_PARTITION
    for api, (_, message) in messages.items():
        assert message and (topic in message or missing in message), (api, message)
        assert root not in message and "under /" not in message, (api, message)
