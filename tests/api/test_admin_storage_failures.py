"""Admin routes whose store fails answer Kafka's retriable KAFKA_STORAGE_ERROR (503), not a 500, and the
front works again once the store does. The store is a moto S3 server behind a fault-injecting proxy that
fails every request while armed."""

from __future__ import annotations

import uuid

import pytest

from front_process import Front
from hostile_support import clean_error_body
from bench.s3_proxy import S3FaultProxy

BUCKET = "lakelog-test"


@pytest.fixture
def failing_store_front(s3_endpoint, tmp_path):
    proxy = S3FaultProxy(s3_endpoint).start()
    env = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1",
           "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL": proxy.url, "AWS_ALLOW_HTTP": "true",
           "AWS_MAX_ATTEMPTS": "1"}
    front = Front(f"s3://{BUCKET}/admin-faults-{uuid.uuid4().hex[:8]}", tmp_path, env=env).start()
    yield front, proxy
    front.kill()
    proxy.stop()


def test_admin_routes_on_a_failing_store_answer_503(failing_store_front):
    front, proxy = failing_store_front
    with front.client(timeout=120) as http:
        assert http.post("/v1/topics", json={"name": "kept", "partitions": 1}).status_code == 201
        first = http.post("/v1/producers", json={})  # from the block of ids claimed at start-up (or now)
        assert first.status_code == 200, first.text
        proxy.fail(lambda method, path: True, times=100_000, status=503)
        for request in (lambda: http.post("/v1/topics", json={"name": "new", "partitions": 1}),
                        lambda: http.patch("/v1/topics/kept", json={"configs": {"retention.ms": "1000"}}),
                        lambda: http.post("/v1/producers", json={"transactional_id": "tx-1"})):
            r = request()
            assert r.status_code == 503, r.text
            assert r.json()["error_name"] == "KAFKA_STORAGE_ERROR" and "Retry-After" in r.headers
            clean_error_body(r.json())
        # a plain producer id comes from the block in hand, as from Kafka's ProducerIdManager: no store needed
        r = http.post("/v1/producers", json={})
        assert r.status_code == 200 and r.json()["producer_id"] == first.json()["producer_id"] + 1, r.text
        proxy.clear()
        assert http.get("/v1/health").status_code == 200
        assert http.patch("/v1/topics/kept", json={"configs": {"retention.ms": "1000"}}).status_code == 200
