"""Kafka admin requests and Metadata whose store fails answer each entry with Kafka's retriable
KAFKA_STORAGE_ERROR (56) and a message naming no path or store URL -- not an empty response (CreateTopics,
DescribeConfigs and the like have no top-level error code to carry a failure) -- and the front answers normally
once the store does. The store is the real moto S3 server behind the fault-injecting proxy (bench/s3_proxy.py),
failing every request while armed; the front is a real ``lakelog serve --kafka-listener``."""

from __future__ import annotations

import uuid

from wire_client import WireClient
from bench.s3_proxy import S3FaultProxy
from s3_server import BUCKET

METADATA, CREATE_TOPICS, DELETE_TOPICS, DELETE_RECORDS = 3, 19, 20, 21
DESCRIBE_CONFIGS, CREATE_PARTITIONS, INCREMENTAL_ALTER_CONFIGS = 32, 37, 44
TOPIC_RESOURCE, OP_SET = 2, 0
KAFKA_STORAGE_ERROR = 56


def clean(message: str | None, prefix: str, proxy: S3FaultProxy) -> None:
    """A storage error's message: present, naming no store, key, URL, file path or trace."""
    assert message, message
    for leak in (prefix, BUCKET, proxy.url, "http://", "s3://", "_delta_log", "Traceback", "/tmp/"):
        assert leak not in message, message


def test_admin_requests_on_a_failing_store_get_a_storage_error_per_entry(failing_store):
    front, proxy, prefix = failing_store
    kept, new = f"kept-{uuid.uuid4().hex[:6]}", f"new-{uuid.uuid4().hex[:6]}"
    with front.client(timeout=120) as http:
        assert http.post("/v1/topics", json={"name": kept, "partitions": 1}).status_code == 201
    proxy.fail(lambda method, path: True, times=1_000_000, status=503)
    with WireClient(front.bootstrap, timeout=120) as wire:
        created = wire.request(CREATE_TOPICS, 7, {"topics": [{"name": new, "num_partitions": 1,
                                                              "replication_factor": 1}], "timeout": 10000})
        assert len(created.topics) == 1, created  # an entry per topic, not an empty response
        entry = created.topics[0]
        assert (entry.name, entry.error_code) == (new, KAFKA_STORAGE_ERROR), entry
        clean(entry.error_message, prefix, proxy)

        # a topic this front has not read yet: describing it must read the store
        described = wire.request(DESCRIBE_CONFIGS, 4, {"resources": [
            {"resource_type": TOPIC_RESOURCE, "resource_name": new, "configuration_keys": None}]})
        entry = described.results[0]
        assert (entry.resource_name, entry.error_code) == (new, KAFKA_STORAGE_ERROR), entry
        clean(entry.error_message, prefix, proxy)

        altered = wire.request(INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [
            {"resource_type": TOPIC_RESOURCE, "resource_name": kept,
             "configs": [{"name": "retention.ms", "config_operation": OP_SET, "value": "1000"}]}],
            "validate_only": False})
        entry = altered.responses[0]
        assert (entry.resource_name, entry.error_code) == (kept, KAFKA_STORAGE_ERROR), entry
        clean(entry.error_message, prefix, proxy)

        grown = wire.request(CREATE_PARTITIONS, 3, {"topics": [{"name": kept, "count": 2, "assignments": None}],
                                                    "timeout": 10000, "validate_only": False})
        entry = grown.results[0]
        assert (entry.name, entry.error_code) == (kept, KAFKA_STORAGE_ERROR), entry
        clean(entry.error_message, prefix, proxy)

        trimmed = wire.request(DELETE_RECORDS, 2, {"topics": [{"name": kept, "partitions": [
            {"partition_index": 0, "offset": -1}]}], "timeout": 10000})
        assert [(t.name, [p.error_code for p in t.partitions]) for t in trimmed.topics] == \
            [(kept, [KAFKA_STORAGE_ERROR])], trimmed

        deleted = wire.request(DELETE_TOPICS, 6, {"topics": [{"name": kept, "topic_id": uuid.UUID(int=0)}],
                                                  "timeout_ms": 10000})
        entry = deleted.responses[0]
        assert (entry.name, entry.error_code) == (kept, KAFKA_STORAGE_ERROR), entry
        clean(entry.error_message, prefix, proxy)

        # Metadata of a topic the front has no snapshot of: the brokers, and the topic's own error code
        meta = wire.request(METADATA, 12, {"topics": [{"name": new, "topic_id": uuid.UUID(int=0)}],
                                           "allow_auto_topic_creation": False,
                                           "include_topic_authorized_operations": False})
        assert [b.port for b in meta.brokers] == [int(front.bootstrap.rsplit(":", 1)[1])], meta
        assert [(t.name, t.error_code) for t in meta.topics] == [(new, KAFKA_STORAGE_ERROR)], meta

        server_log = front.log_tail(200_000)
        for api in ("CreateTopics", "DescribeConfigs", "IncrementalAlterConfigs", "CreatePartitions", "DeleteRecords",
                    "DeleteTopics", "Metadata"):
            assert f"storage failure on Kafka {api}" in server_log, api  # the detail is the operator's

        proxy.clear()  # the store is back: the same connection gets normal answers
        created = wire.request(CREATE_TOPICS, 7, {"topics": [{"name": new, "num_partitions": 1,
                                                              "replication_factor": 1}], "timeout": 10000})
        assert (created.topics[0].error_code, created.topics[0].num_partitions) == (0, 1), created
        described = wire.request(DESCRIBE_CONFIGS, 4, {"resources": [
            {"resource_type": TOPIC_RESOURCE, "resource_name": kept, "configuration_keys": ["retention.ms"]}]})
        assert described.results[0].error_code == 0, described
        meta = wire.request(METADATA, 12, {"topics": [{"name": new, "topic_id": uuid.UUID(int=0)}],
                                           "allow_auto_topic_creation": False,
                                           "include_topic_authorized_operations": False})
        assert [(t.name, t.error_code, len(t.partitions)) for t in meta.topics] == [(new, 0, 1)], meta
