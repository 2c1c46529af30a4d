"""Fixtures of the Kafka protocol tests: a real ``lakelog serve --kafka-listener`` on loopback.

* ``kafka_front`` -- one front per session (HTTP and Kafka listener) on a local root; tests use their own topics;
* ``bootstrap`` -- its Kafka address (``127.0.0.1:PORT``); ``http`` -- an httpx client of its HTTP side;
* ``topic`` -- a fresh 2-partition topic;
* ``java_classes`` -- tests/kafka/java/*.java compiled once per session (javac against the reference jars);
* ``failing_store`` -- a front of its own on a moto root behind the fault proxy (no retries by the store's
  client), as ``(front, proxy, prefix)``, for storage failures.
"""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "api"))

from front_process import kafka_front_process, new_topic  # noqa: E402
from s3_server import BUCKET, CREDS  # noqa: E402

MAX_FRAME_BYTES = 2 << 20  # the shared front's request limit (and bound on what a batch decompresses to)


@pytest.fixture(scope="session")
def kafka_front(tmp_path_factory):
    f = kafka_front_process(str(tmp_path_factory.mktemp("kafka-root") / "root"),
                            tmp_path_factory.mktemp("kafka-logs"),
                            env={"LAKELOG_GROUP_MIN_SESSION_TIMEOUT_MS": "1000",
                                 # as Kafka's own test brokers: the suite's groups start at once (the delay's
                                 # behaviour is tests/group/test_group_coordinator.py's)
                                 "LAKELOG_GROUP_INITIAL_REBALANCE_DELAY_MS": "0",
                                 "LAKELOG_MAX_REQUEST_BYTES": str(MAX_FRAME_BYTES)})
    f.start()
    yield f
    f.stop()


@pytest.fixture
def bootstrap(kafka_front) -> str:
    return kafka_front.bootstrap


@pytest.fixture
def http(kafka_front):
    with kafka_front.client() as c:
        yield c


@pytest.fixture
def topic(http) -> str:
    return new_topic(http)


@pytest.fixture
def wire(bootstrap):
    """A raw Kafka-protocol client (``wire_client.WireClient``) on this module's front."""
    from wire_client import WireClient

    with WireClient(bootstrap) as w:
        yield w


@pytest.fixture(scope="session")
def java_classes(tmp_path_factory) -> Path:
    from java_programs import compiled

    return compiled(tmp_path_factory.mktemp("java-classes"))


@pytest.fixture
def failing_store(s3_endpoint, tmp_path):
    from bench.s3_proxy import S3FaultProxy

    proxy = S3FaultProxy(s3_endpoint).start()
    env = {**CREDS, "AWS_ENDPOINT_URL": proxy.url, "AWS_ALLOW_HTTP": "true", "AWS_MAX_ATTEMPTS": "1"}
    prefix = f"kafka-faults-{uuid.uuid4().hex[:8]}"
    front = kafka_front_process(f"s3://{BUCKET}/{prefix}", tmp_path, env=env).start()
    yield front, proxy, prefix
    front.kill()
    proxy.stop()
