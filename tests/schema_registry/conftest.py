"""Fixtures of the Schema Registry tests: a real ``lakelog serve --kafka-listener`` on loopback.

* ``front`` -- one front per module (HTTP, the registry at ``/schema-registry``, and the Kafka listener) on a
  local root; tests use their own subjects and topics;
* ``sr`` -- an httpx client of the registry's routes (raw requests, to see Confluent's codes);
* ``client`` -- confluent-kafka's ``SchemaRegistryClient`` on the front.
"""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "api"))

from front_process import kafka_front_process  # noqa: E402

PREFIX = "/schema-registry"


@pytest.fixture(scope="module")
def front(tmp_path_factory):
    f = kafka_front_process(str(tmp_path_factory.mktemp("sr-root") / "root"), tmp_path_factory.mktemp("sr-logs"))
    f.start()
    yield f
    f.stop()


@pytest.fixture
def sr(front):
    with front.client() as c:
        c.base_url = front.url + PREFIX
        yield c


@pytest.fixture
def client(front):
    from confluent_kafka.schema_registry import SchemaRegistryClient

    return SchemaRegistryClient({"url": front.url + PREFIX})


@pytest.fixture
def subject() -> str:
    return f"s-{uuid.uuid4().hex[:10]}"
