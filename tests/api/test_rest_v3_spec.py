"""Confluent's published REST v3 OpenAPI document drives a real front: schemathesis generates valid and
invalid requests for every v3 operation lakelog serves; no answer may be a 5xx, and every refusal carries
Confluent's error body (``{"error_code": int, "message": str}``) without a trace or a path.

``confluent_v3/openapi.yaml`` is ``api/v3/openapi.yaml`` of confluentinc/kafka-rest at commit
985d0e056f841a4136b4fb392cf617ae81878732, unchanged, under the Confluent Community License
(``confluent_v3/LICENSE-ConfluentCommunity``); it is test data, not shipped in the package.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis.generation import GenerationMode
from schemathesis.specs.openapi.checks import response_schema_conformance

from front_process import Front

SPEC = Path(__file__).parent / "confluent_v3" / "openapi.yaml"
SERVED = {  # the spec's paths (relative to /v3) and methods that lakelog implements (docs/rest-v3.md)
    ("GET", "/clusters"), ("GET", "/clusters/{cluster_id}"),
    ("GET", "/clusters/{cluster_id}/topics"), ("POST", "/clusters/{cluster_id}/topics"),
    ("GET", "/clusters/{cluster_id}/topics/{topic_name}"), ("PATCH", "/clusters/{cluster_id}/topics/{topic_name}"),
    ("DELETE", "/clusters/{cluster_id}/topics/{topic_name}"),
    ("GET", "/clusters/{cluster_id}/topics/{topic_name}/configs"),
    ("GET", "/clusters/{cluster_id}/topics/{topic_name}/configs/{name}"),
    ("PUT", "/clusters/{cluster_id}/topics/{topic_name}/configs/{name}"),
    ("POST", "/clusters/{cluster_id}/topics/{topic_name}/configs:alter"),
    ("POST", "/clusters/{cluster_id}/topics/{topic_name}/records"),
    ("GET", "/clusters/{cluster_id}/consumer-groups"), ("GET", "/clusters/{cluster_id}/consumer-groups/{consumer_group_id}"),
    ("GET", "/clusters/{cluster_id}/consumer-groups/{consumer_group_id}/consumers"),
    ("GET", "/clusters/{cluster_id}/consumer-groups/{consumer_group_id}/lags"),
    ("GET", "/clusters/{cluster_id}/consumer-groups/{consumer_group_id}/lag-summary"),
    ("GET", "/clusters/{cluster_id}/consumer-groups/{consumer_group_id}/lags/{topic_name}/partitions/{partition_id}"),
}
LINKED = {  # read-only routes reached by links (path and query parameters only): fewer examples each
    ("GET", "/clusters/{cluster_id}/consumer-groups/{consumer_group_id}/consumers/{consumer_id}"),
    ("GET", "/clusters/{cluster_id}/consumer-groups/{consumer_group_id}/consumers/{consumer_id}/assignments"),
    ("GET", "/clusters/{cluster_id}/consumer-groups/{consumer_group_id}/consumers/{consumer_id}/assignments/"
            "{topic_name}/partitions/{partition_id}"),
    ("GET", "/clusters/{cluster_id}/acls"),
    ("GET", "/clusters/{cluster_id}/brokers"), ("GET", "/clusters/{cluster_id}/brokers/{broker_id}"),
    ("GET", "/clusters/{cluster_id}/brokers/{broker_id}/configs"),
    ("GET", "/clusters/{cluster_id}/brokers/{broker_id}/partition-replicas"),
    ("GET", "/clusters/{cluster_id}/broker-configs"),
    ("GET", "/clusters/{cluster_id}/topics/{topic_name}/partitions"),
    ("GET", "/clusters/{cluster_id}/topics/{topic_name}/partitions/{partition_id}"),
    ("GET", "/clusters/{cluster_id}/topics/{topic_name}/partitions/{partition_id}/replicas"),
    ("GET", "/clusters/{cluster_id}/topics/{topic_name}/partitions/{partition_id}/replicas/{broker_id}"),
    ("GET", "/clusters/{cluster_id}/topics/-/partitions/-/reassignment"),
    ("GET", "/clusters/{cluster_id}/topics/{topic_name}/partitions/-/reassignment"),
    ("GET", "/clusters/{cluster_id}/topics/{topic_name}/partitions/{partition_id}/reassignment"),
}
MAX_EXAMPLES = {GenerationMode.POSITIVE: 25, GenerationMode.NEGATIVE: 10}
LINKED_EXAMPLES = {GenerationMode.POSITIVE: 8, GenerationMode.NEGATIVE: 4}
TOPIC = "spec-fuzz"  # exists, so generated produce and config requests reach past the 404
GROUP = "spec-group"  # has committed offsets on TOPIC, so the lag routes have something to report
BROKER = 1  # the one broker of a front without --node-id


@pytest.fixture(scope="module")
def spec_front(tmp_path_factory):
    work = tmp_path_factory.mktemp("v3-spec-front")
    front = Front(str(work / "root"), work, env={"LAKELOG_MAX_REQUEST_BYTES": str(1 << 20)}).start()
    with front.client() as http:
        assert http.post("/v1/topics", json={"name": TOPIC, "partitions": 3}).status_code == 201
        r = http.post(f"/v1/topics/{TOPIC}/records", json={"records": [{"value": str(i)} for i in range(30)]})
        assert r.status_code == 200, r.text
        r = http.post(f"/v1/groups/{GROUP}/offsets", json={"offsets": [{"topic": TOPIC, "partition": 0, "offset": 3}]})
        assert r.status_code in (200, 204), r.text
    yield front
    front.stop()


def confluent_error_body(response, case) -> None:
    """A refusal is Confluent's Error object and leaks nothing of the server."""
    if response.status_code < 400:
        return
    body = response.json()
    assert isinstance(body, dict) and isinstance(body.get("error_code"), int), body
    assert isinstance(body.get("message"), str) and body["message"], body
    assert "Traceback" not in response.text and "/tmp/" not in response.text, response.text[:500]


def test_served_operations_of_the_published_spec_never_answer_5xx(spec_front):
    schema = schemathesis.openapi.from_path(str(SPEC))
    with spec_front.client() as http:
        cid = http.get("/v3/clusters").json()["data"][0]["cluster_id"]
    served = SERVED | LINKED
    operations = [op for op in (r.ok() for r in schema.get_all_operations()) if (op.method.upper(), op.path) in served]
    assert {(op.method.upper(), op.path) for op in operations} == served  # the spec still has every route we serve
    failures: list[str] = []
    statuses: dict[str, set[int]] = {}
    for op in operations:
        for mode, examples in (LINKED_EXAMPLES if (op.method.upper(), op.path) in LINKED else MAX_EXAMPLES).items():
            @given(case=op.as_strategy(generation_mode=mode))
            @settings(max_examples=examples, deadline=None, database=None, suppress_health_check=list(HealthCheck))
            def check(case):
                # A random cluster id, topic or group only ever meets a 404: pin them to real ones in valid
                # requests (never for DELETE, which would remove the topic the other operations need).
                params = case.path_parameters or {}
                if mode is GenerationMode.POSITIVE:
                    if "cluster_id" in params:
                        params["cluster_id"] = cid
                    if "topic_name" in params and op.method.upper() != "DELETE":
                        params["topic_name"] = TOPIC
                    if "consumer_group_id" in params:
                        params["consumer_group_id"] = GROUP
                    if "broker_id" in params:
                        params["broker_id"] = BROKER
                    if "partition_id" in params:
                        params["partition_id"] = params["partition_id"] % 3  # TOPIC has 3
                response = case.call(base_url=f"{spec_front.url}/v3", timeout=60)
                statuses.setdefault(op.label, set()).add(response.status_code)
                assert response.status_code < 500, f"{response.status_code}: {response.text[:500]}"
                confluent_error_body(response, case)
                if response.status_code < 300:  # a success body has the spec's shape for that operation
                    case.validate_response(response, checks=[response_schema_conformance])

            try:
                check()
            except Unsatisfiable:  # an operation without inputs has no invalid request to generate
                assert mode is GenerationMode.NEGATIVE, op.label
            except Exception as e:  # collect every operation's failure, then report them together
                failures.append(f"{op.label} [{mode}]: {str(e)[:1500]}")
    assert not failures, "\n\n".join(failures)
    # The pinned requests reached the implementation: produce and the topic reads succeeded at least once.
    assert any(s < 300 for s in statuses["POST /clusters/{cluster_id}/topics/{topic_name}/records"]), statuses
    assert any(s < 300 for s in statuses["GET /clusters/{cluster_id}/topics/{topic_name}/configs"]), statuses
    assert any(s < 300 for s in statuses["GET /clusters/{cluster_id}/consumer-groups/{consumer_group_id}/lag-summary"]), statuses
    for label in ("GET /clusters/{cluster_id}/brokers/{broker_id}/partition-replicas", "GET /clusters/{cluster_id}/acls",
                  "GET /clusters/{cluster_id}/topics/{topic_name}/partitions/{partition_id}/replicas/{broker_id}"):
        assert any(s < 300 for s in statuses[label]), (label, statuses[label])
