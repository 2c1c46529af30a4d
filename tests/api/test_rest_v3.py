"""Confluent REST Proxy v3 on a real front: golden requests and responses from Confluent's v3 API reference.

The request bodies below are the examples of Confluent's published v3 OpenAPI document
(``ProduceRequest`` examples ``binary_and_json`` and ``string``, ``CreateTopicRequest``
``uniform_replication``); the responses are checked field by field against the shapes and
values that document gives (``ProduceResponse`` ``produce_record_success``, ``Error``
bodies such as ``{"error_code": 40403, ...}``).  What was produced is read back through
``/v1`` fetch, and refused requests are checked to have written nothing.
"""

from __future__ import annotations

import base64
import hashlib
from http.client import HTTPConnection
import json
import time
import uuid

import pytest

from front_process import Front

GOLDEN_PRODUCE = {"partition_id": 1,
                  "headers": [{"name": "Header-1", "value": "SGVhZGVyLTE="}, {"name": "Header-2", "value": "SGVhZGVyLTI="}],
                  "key": {"type": "BINARY", "data": "Zm9vYmFy"}, "value": {"type": "JSON", "data": {"foo": "bar"}},
                  "timestamp": "2021-02-05T19:14:42Z"}
GOLDEN_STRING = {"value": {"type": "STRING", "data": "My message"}}
REPORT_KEYS = {"error_code", "cluster_id", "topic_name", "partition_id", "offset", "timestamp", "key", "value"}


@pytest.fixture(scope="module")
def v3_front(tmp_path_factory):
    work = tmp_path_factory.mktemp("v3-front")
    front = Front(str(work / "root"), work, env={"LAKELOG_MAX_REQUEST_BYTES": str(1 << 20)}).start()
    yield front
    front.stop()


@pytest.fixture(scope="module")
def http(v3_front):
    with v3_front.client() as c:
        yield c


@pytest.fixture(scope="module")
def cid(http) -> str:
    return http.get("/v3/clusters").json()["data"][0]["cluster_id"]


def new_topic(http, cid, partitions: int = 3, **extra) -> str:
    name = f"v3-{uuid.uuid4().hex[:8]}"
    r = http.post(f"/v3/clusters/{cid}/topics", json={"topic_name": name, "partitions_count": partitions, **extra})
    assert r.status_code == 201, r.text
    return name


def reports(text: str) -> list[dict]:
    """Concatenated JSON delivery reports (CRLF after each)."""
    decoder, out, pos = json.JSONDecoder(), [], 0
    text = text.strip()
    while pos < len(text):
        obj, end = decoder.raw_decode(text, pos)
        out.append(obj)
        pos = end
        while pos < len(text) and text[pos] in "\r\n \t":
            pos += 1
    return out


def fetch(http, topic: str, partition: int, offset: int = 0) -> list[dict]:
    r = http.get(f"/v1/topics/{topic}/partitions/{partition}/records", params={"offset": offset, "encoding": "base64"})
    assert r.status_code == 200, r.text
    return r.json()["records"]


def high_watermarks(http, topic: str) -> list[int]:
    return [p["high_watermark"] for p in http.get(f"/v1/topics/{topic}").json()["partitions"]]


def assert_error(r, status: int, code: int) -> dict:
    assert r.status_code == status, r.text
    body = r.json()
    assert set(body) == {"error_code", "message"} and body["error_code"] == code, body
    assert isinstance(body["message"], str) and body["message"]
    assert "Traceback" not in body["message"] and "/tmp" not in body["message"] and "/root" not in body["message"]
    return body


# -- clusters ---------------------------------------------------------------------------------------------------
def test_clusters(http, cid, v3_front):
    listing = http.get("/v3/clusters").json()
    assert listing["kind"] == "KafkaClusterList" and listing["metadata"]["self"] == f"{v3_front.url}/v3/clusters"
    assert len(listing["data"]) == 1 and len(cid) == 22
    one = http.get(f"/v3/clusters/{cid}").json()
    assert one == listing["data"][0]
    assert one["kind"] == "KafkaCluster" and one["metadata"]["resource_name"] == f"crn:///kafka={cid}"
    assert one["topics"] == {"related": f"{v3_front.url}/v3/clusters/{cid}/topics"}
    assert_error(http.get("/v3/clusters/my-cluster"), 404, 404)
    assert http.get("/v3/clusters/my-cluster").json()["message"] == "Cluster my-cluster cannot be found."
    assert_error(http.get(f"/v3/clusters/{cid}/nothing-here"), 404, 404)
    assert_error(http.delete("/v3/clusters"), 405, 405)


# -- topics and configs -----------------------------------------------------------------------------------------
def test_topic_lifecycle_with_configs(http, cid, v3_front):
    name = f"v3-{uuid.uuid4().hex[:8]}"
    golden = {"topic_name": name, "partitions_count": 4, "replication_factor": 3,
              "configs": [{"name": "cleanup.policy", "value": "compact"}, {"name": "retention.ms", "value": "86400000"}]}
    dry = http.post(f"/v3/clusters/{cid}/topics", json={**golden, "validate_only": True})
    assert dry.status_code == 200 and dry.json()["topic_name"] == name
    assert http.get(f"/v3/clusters/{cid}/topics/{name}").status_code == 404  # validate_only created nothing
    r = http.post(f"/v3/clusters/{cid}/topics", json=golden)
    assert r.status_code == 201, r.text
    topic = r.json()
    assert topic["kind"] == "KafkaTopic" and topic["partitions_count"] == 4 and topic["is_internal"] is False
    assert topic["metadata"]["self"] == f"{v3_front.url}/v3/clusters/{cid}/topics/{name}"
    assert topic["configs"] == {"related": f"{v3_front.url}/v3/clusters/{cid}/topics/{name}/configs"}
    assert http.get(f"/v3/clusters/{cid}/topics/{name}").json() == topic
    assert name in [t["topic_name"] for t in http.get(f"/v3/clusters/{cid}/topics").json()["data"]]
    # the same topic through /v1: one implementation behind both
    assert http.get(f"/v1/topics/{name}").json()["overrides"] == {"cleanup.policy": "compact", "retention.ms": "86400000"}

    configs = {c["name"]: c for c in http.get(f"/v3/clusters/{cid}/topics/{name}/configs").json()["data"]}
    assert configs["cleanup.policy"]["value"] == "compact" and configs["cleanup.policy"]["is_default"] is False
    assert configs["cleanup.policy"]["source"] == "DYNAMIC_TOPIC_CONFIG"
    assert configs["segment.bytes"]["is_default"] is True and configs["segment.bytes"]["source"] == "DEFAULT_CONFIG"
    assert http.put(f"/v3/clusters/{cid}/topics/{name}/configs/retention.ms", json={"value": "1000"}).status_code == 204
    one = http.get(f"/v3/clusters/{cid}/topics/{name}/configs/retention.ms").json()
    assert one["kind"] == "KafkaTopicConfig" and one["value"] == "1000"
    r = http.post(f"/v3/clusters/{cid}/topics/{name}/configs:alter",
                  json={"data": [{"name": "retention.ms", "value": "2000"}, {"name": "max.message.bytes", "value": "2048"}]})
    assert r.status_code == 204, r.text
    assert http.get(f"/v1/topics/{name}").json()["overrides"]["max.message.bytes"] == "2048"
    # refused config changes: Kafka's INVALID_CONFIG, Confluent's 40002, nothing changed
    assert_error(http.put(f"/v3/clusters/{cid}/topics/{name}/configs/retention.ms", json={"value": "soon"}), 400, 40002)
    assert_error(http.post(f"/v3/clusters/{cid}/topics/{name}/configs:alter",
                           json={"data": [{"name": "retention.ms", "value": "5"}, {"name": "nope.ms", "value": "1"}]}),
                 400, 40002)
    assert http.get(f"/v1/topics/{name}").json()["overrides"]["retention.ms"] == "2000"
    assert_error(http.get(f"/v3/clusters/{cid}/topics/{name}/configs/nope.ms"), 404, 404)

    assert http.patch(f"/v3/clusters/{cid}/topics/{name}", json={"partitions_count": 6}).json()["partitions_count"] == 6
    assert_error(http.post(f"/v3/clusters/{cid}/topics", json=golden), 400, 40002)  # already exists
    assert http.delete(f"/v3/clusters/{cid}/topics/{name}").status_code == 204
    assert_error(http.get(f"/v3/clusters/{cid}/topics/{name}"), 404, 40403)
    assert_error(http.delete(f"/v3/clusters/{cid}/topics/{name}"), 404, 40403)


@pytest.mark.parametrize("body, code", [
    ({"topic_name": "bad/name", "partitions_count": 1}, 40002),
    ({"topic_name": "x-configs", "configs": [{"name": "retention.ms", "value": "-7"}]}, 40002),
    ({"topic_name": "x-assign", "replicas_assignments": {"0": [1, 2]}}, 40002),
    ({"topic_name": "x-zero", "partitions_count": 0}, 40002),
    ({"topic_name": "x-extra", "surprise": 1}, 400),
    ({"topic_name": 5}, 400),
    ({"topic_name": "x-str", "partitions_count": "3"}, 400),
])
def test_create_topic_refusals(http, cid, body, code):
    assert_error(http.post(f"/v3/clusters/{cid}/topics", json=body), 400, code)
    name = body["topic_name"]
    if isinstance(name, str) and "/" not in name:
        assert http.get(f"/v1/topics/{name}").status_code == 404


# -- produce ----------------------------------------------------------------------------------------------------
def test_produce_golden_binary_and_json(http, cid):
    topic = new_topic(http, cid)
    r = http.post(f"/v3/clusters/{cid}/topics/{topic}/records", json=GOLDEN_PRODUCE)
    assert r.status_code == 200, r.text
    (report,) = reports(r.text)
    assert set(report) == REPORT_KEYS
    assert report == {"error_code": 200, "cluster_id": cid, "topic_name": topic, "partition_id": 1, "offset": 0,
                      "timestamp": "2021-02-05T19:14:42Z", "key": {"type": "BINARY", "size": 6},
                      "value": {"type": "JSON", "size": 13}}
    (rec,) = fetch(http, topic, 1)
    assert base64.b64decode(rec["key"]) == b"foobar" and json.loads(base64.b64decode(rec["value"])) == {"foo": "bar"}
    assert [(h["key"], base64.b64decode(h["value"])) for h in rec["headers"]] == [("Header-1", b"Header-1"),
                                                                              ("Header-2", b"Header-2")]
    assert rec["timestamp"] == 1612552482000


def test_produce_string_and_many_records_in_one_body(http, cid):
    topic = new_topic(http, cid, partitions=2)
    before = int(time.time() * 1000)
    body = b"".join(json.dumps({"key": {"type": "STRING", "data": f"k{i % 3}"},
                                "value": {"type": "STRING", "data": f"v{i}"}}).encode() + b"\n" for i in range(20))
    r = http.post(f"/v3/clusters/{cid}/topics/{topic}/records", content=body, headers={"Content-Type": "application/json"})
    assert r.status_code == 200, r.text
    got = reports(r.text)
    assert len(got) == 20 and all(g["error_code"] == 200 for g in got)
    assert r.text.count("\r\n") == 20
    by_partition: dict[int, list[int]] = {}
    for i, g in enumerate(got):
        assert g["key"] == {"type": "STRING", "size": 2} and g["value"]["type"] == "STRING"
        by_partition.setdefault(g["partition_id"], []).append(g["offset"])
    for p, offsets in by_partition.items():  # dense offsets per partition, in request order
        assert offsets == list(range(len(offsets)))
        values = [base64.b64decode(x["value"]).decode() for x in fetch(http, topic, p)]
        assert values == [f"v{i}" for i, g in enumerate(got) if g["partition_id"] == p]
        assert all(x["timestamp"] >= before for x in fetch(http, topic, p))
    # same key, same partition (murmur2, as every Kafka client)
    assert len({g["partition_id"] for i, g in enumerate(got) if i % 3 == 0}) == 1
    r = http.post(f"/v3/clusters/{cid}/topics/{topic}/records", json=GOLDEN_STRING)
    (one,) = reports(r.text)
    assert one["key"] is None and one["value"] == {"type": "STRING", "size": 10}


def test_per_record_errors_and_whole_request_refusals(http, cid):
    topic = new_topic(http, cid, partitions=2)
    good = {"value": {"type": "STRING", "data": "ok"}, "partition_id": 0}
    bad = [{"value": {"type": "BINARY", "data": "not base64!"}, "partition_id": 0},
           {"value": {"type": "AVRO", "data": "x"}},
           {"value": {"type": "STRING", "data": "p"}, "partition_id": 9},
           {"value": {"type": "STRING", "data": "x"}, "surprise": True},
           {"value": {"type": "STRING", "data": "old"}, "timestamp": "0001-01-01T00:00:00Z"}]
    body = b"".join(json.dumps(x).encode() for x in [good, *bad, good])
    r = http.post(f"/v3/clusters/{cid}/topics/{topic}/records", content=body, headers={"Content-Type": "application/json"})
    assert r.status_code == 200
    got = reports(r.text)
    assert [g["error_code"] for g in got] == [200, 400, 400, 40403, 400, 40002, 200]
    assert [got[0]["offset"], got[6]["offset"]] == [0, 1]
    assert "schema registry" in got[2]["message"]
    assert high_watermarks(http, topic) == [2, 0]
    # a single-record request that fails answers with its error's status (no report list)
    url = f"/v3/clusters/{cid}/topics/{topic}/records"
    assert_error(http.post(url, json=bad[0]), 400, 400)
    assert_error(http.post(url, json=bad[2]), 404, 40403)
    assert_error(http.post(url, content=b"", headers={"Content-Type": "application/json"}), 422, 422)
    assert_error(http.post(url, content=b'{"value": {', headers={"Content-Type": "application/json"}), 400, 400)
    assert_error(http.post(url, content=b"\xff\xfe", headers={"Content-Type": "application/json"}), 400, 400)
    lone = b'{"value": {"type": "STRING", "data": "\\ud800"}}'  # a lone surrogate is no text
    assert_error(http.post(url, content=lone, headers={"Content-Type": "application/json"}), 400, 400)
    deep = b'{"value": {"type": "JSON", "data": ' + b"[" * 100_000 + b"]" * 100_000 + b"}}"
    assert_error(http.post(url, content=deep, headers={"Content-Type": "application/json"}), 400, 400)
    assert_error(http.post(url, content=b"value=1", headers={"Content-Type": "text/plain"}), 415, 415)
    assert_error(http.post(f"/v3/clusters/{cid}/topics/nope-{uuid.uuid4().hex[:6]}/records", json=good), 404, 40403)
    assert_error(http.post(f"/v3/clusters/other/topics/{topic}/records", json=good), 404, 404)
    assert_error(http.post(f"/v3/clusters/{cid}/topics/__consumer_offsets/records", json=good), 400, 40002)
    big = {"value": {"type": "STRING", "data": "x" * 2_000_000}}
    assert_error(http.post(url, json=big), 413, 413)  # over the front's body limit
    http.patch(f"/v1/topics/{topic}", json={"configs": {"max.message.bytes": "1024"}})
    time.sleep(1.1)  # the front's topic metadata cache
    assert_error(http.post(url, json={"value": {"type": "STRING", "data": "y" * 4096}}), 413, 413)
    assert high_watermarks(http, topic) == [2, 0]  # nothing refused was written


def chunked_post(front: Front, path: str, pieces: list[bytes], token: str | None = None) -> tuple[int, str]:
    """POST ``pieces`` as separate chunks of one chunked body (Confluent's streaming mode)."""
    conn = HTTPConnection("127.0.0.1", front.port, timeout=60)
    headers = {"Content-Type": "application/json", "Transfer-Encoding": "chunked"}
    if token:
        headers["Authorization"] = f"Bearer {token}"

    def body():
        for p in pieces:
            yield p
            time.sleep(0.01)

    conn.request("POST", path, body=body(), headers=headers, encode_chunked=True)
    resp = conn.getresponse()
    text = resp.read().decode()
    conn.close()
    return resp.status, text


def test_streaming_mode_one_report_per_record(v3_front, http, cid):
    topic = new_topic(http, cid, partitions=1)
    records = [json.dumps({"value": {"type": "STRING", "data": f"s{i}"}}).encode() for i in range(30)]
    # records split across chunks at arbitrary bytes, with a bad record in the middle
    stream = b"\n".join(records[:10]) + b' {"value": {"type": "BINARY", "data": 7}} ' + b"\n".join(records[10:])
    pieces = [stream[i:i + 37] for i in range(0, len(stream), 37)]
    status, text = chunked_post(v3_front, f"/v3/clusters/{cid}/topics/{topic}/records", pieces)
    assert status == 200
    got = reports(text)
    assert len(got) == 31
    assert got[10]["error_code"] == 400
    ok = [g for i, g in enumerate(got) if i != 10]
    assert all(g["error_code"] == 200 for g in ok) and [g["offset"] for g in ok] == list(range(30))
    assert [base64.b64decode(x["value"]).decode() for x in fetch(http, topic, 0)] == [f"s{i}" for i in range(30)]
    # garbage after a record ends the stream with one error report; what came before is produced
    status, text = chunked_post(v3_front, f"/v3/clusters/{cid}/topics/{topic}/records", [records[0], b" nonsense"])
    assert status == 200 and [g["error_code"] for g in reports(text)] == [200, 400]
    # a stream that stops inside a record
    status, text = chunked_post(v3_front, f"/v3/clusters/{cid}/topics/{topic}/records", [records[0], b'{"value": {'])
    assert [g["error_code"] for g in reports(text)] == [200, 400]
    # one record larger than the front's max_request_bytes (1 MiB here), streamed in pieces: a 413 report
    huge = b'{"value": {"type": "STRING", "data": "' + b"z" * 1_500_000 + b'"}}'
    status, text = chunked_post(v3_front, f"/v3/clusters/{cid}/topics/{topic}/records",
                                [records[0]] + [huge[i:i + 65536] for i in range(0, len(huge), 65536)])
    assert [g["error_code"] for g in reports(text)] == [200, 413]
    assert high_watermarks(http, topic) == [33]
    assert http.get("/v1/health").status_code == 200


# -- consumer groups and lag ------------------------------------------------------------------------------------
def test_consumer_group_lags(http, cid, v3_front):
    topic = new_topic(http, cid, partitions=2)
    for p, n in ((0, 5), (1, 3)):
        body = b"".join(json.dumps({"partition_id": p, "value": {"type": "STRING", "data": "x"}}).encode()
                        for _ in range(n))
        assert http.post(f"/v3/clusters/{cid}/topics/{topic}/records", content=body,
                         headers={"Content-Type": "application/json"}).status_code == 200
    group = f"g-{uuid.uuid4().hex[:8]}"
    r = http.post(f"/v1/groups/{group}/offsets", json={"offsets": [{"topic": topic, "partition": 0, "offset": 1},
                                                                   {"topic": topic, "partition": 1, "offset": 3}]})
    assert r.status_code == 200, r.text
    g = http.get(f"/v3/clusters/{cid}/consumer-groups/{group}").json()
    assert g["kind"] == "KafkaConsumerGroup" and g["consumer_group_id"] == group and g["state"] == "EMPTY"
    assert group in [x["consumer_group_id"] for x in http.get(f"/v3/clusters/{cid}/consumer-groups").json()["data"]]
    lags = http.get(f"/v3/clusters/{cid}/consumer-groups/{group}/lags").json()
    assert lags["kind"] == "KafkaConsumerLagList"
    by_p = {x["partition_id"]: x for x in lags["data"]}
    assert (by_p[0]["current_offset"], by_p[0]["log_end_offset"], by_p[0]["lag"]) == (1, 5, 4)
    assert (by_p[1]["current_offset"], by_p[1]["log_end_offset"], by_p[1]["lag"]) == (3, 3, 0)
    assert by_p[0]["kind"] == "KafkaConsumerLag" and by_p[0]["topic_name"] == topic
    one = http.get(f"/v3/clusters/{cid}/consumer-groups/{group}/lags/{topic}/partitions/0").json()
    assert one == by_p[0]
    summary = http.get(f"/v3/clusters/{cid}/consumer-groups/{group}/lag-summary").json()
    assert summary["kind"] == "KafkaConsumerGroupLagSummary"
    assert (summary["max_lag"], summary["total_lag"], summary["max_lag_topic_name"], summary["max_lag_partition_id"]) \
        == (4, 4, topic, 0)
    assert_error(http.get(f"/v3/clusters/{cid}/consumer-groups/nobody-{uuid.uuid4().hex[:6]}/lag-summary"), 404, 404)
    assert_error(http.get(f"/v3/clusters/{cid}/consumer-groups/{group}/lags/{topic}/partitions/7"), 404, 40403)


# -- auth -------------------------------------------------------------------------------------------------------
TOKENS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
AUTH = {"tokens": [{"principal": "User:admin", "token": TOKENS["admin"]},
                   {"principal": "User:alice", "token_sha256": hashlib.sha256(b"alice-secret").hexdigest()},
                   {"principal": "User:bob", "token": TOKENS["bob"]}],
        "super_users": ["User:admin"],
        "acls": [{"principal": "User:alice", "resource_type": "Topic", "pattern_type": "Prefixed",
                  "resource_name": "ok-", "operations": ["Create", "Describe", "Write"]}]}


@pytest.fixture(scope="module")
def auth_front(tmp_path_factory):
    front = Front.with_auth(tmp_path_factory.mktemp("v3-auth-front"), AUTH).start()
    yield front
    front.stop()


def test_auth_same_acls_as_v1(auth_front):
    with auth_front.client(TOKENS["admin"]) as admin, auth_front.client(TOKENS["alice"]) as alice, \
            auth_front.client(TOKENS["bob"]) as bob, auth_front.client() as anon:
        assert_error(anon.get("/v3/clusters"), 401, 40101)
        cid = admin.get("/v3/clusters").json()["data"][0]["cluster_id"]
        secret = f"secret-{uuid.uuid4().hex[:6]}"
        assert admin.post(f"/v3/clusters/{cid}/topics", json={"topic_name": secret}).status_code == 201
        mine = f"ok-{uuid.uuid4().hex[:6]}"
        assert alice.post(f"/v3/clusters/{cid}/topics", json={"topic_name": mine}).status_code == 201
        assert_error(bob.post(f"/v3/clusters/{cid}/topics", json={"topic_name": "ok-bob"}), 403, 40301)
        assert [t["topic_name"] for t in alice.get(f"/v3/clusters/{cid}/topics").json()["data"]] == [mine]
        assert bob.get(f"/v3/clusters/{cid}/topics").json()["data"] == []
        assert_error(alice.get(f"/v3/clusters/{cid}/topics/{secret}"), 403, 40301)
        assert_error(alice.get(f"/v3/clusters/{cid}/topics/{secret}/configs"), 403, 40301)
        assert_error(alice.post(f"/v3/clusters/{cid}/topics/{secret}/records", json=GOLDEN_STRING), 403, 40301)
        assert_error(bob.post(f"/v3/clusters/{cid}/topics/{mine}/records", json=GOLDEN_STRING), 403, 40301)
        status, text = chunked_post(auth_front, f"/v3/clusters/{cid}/topics/{secret}/records",
                                    [json.dumps(GOLDEN_STRING).encode()], token=TOKENS["alice"])
        assert status == 403 and json.loads(text)["error_code"] == 40301
        r = alice.post(f"/v3/clusters/{cid}/topics/{mine}/records", json=GOLDEN_STRING)
        assert r.status_code == 200 and reports(r.text)[0]["error_code"] == 200
        assert [p["high_watermark"] for p in admin.get(f"/v1/topics/{secret}").json()["partitions"]] == [0]
        assert_error(anon.post(f"/v3/clusters/{cid}/topics/{mine}/records", json=GOLDEN_STRING), 401, 40101)
