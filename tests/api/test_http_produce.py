"""Produce, fetch, topic admin and metrics over HTTP, against a real front (local and moto S3 roots)."""

from __future__ import annotations

import json
import base64
import io
import time

import pyarrow as pa
from prometheus_client.parser import text_string_to_metric_families

from front_process import new_topic
from lakelog.writer.partitioner import partition_for_key


def fetch_all(http, topic: str, partition: int, **params) -> list[dict]:
    r = http.get(f"/v1/topics/{topic}/partitions/{partition}/records",
                 params={"offset": 0, "max_records": 10000, **params})
    assert r.status_code == 200, r.text
    return r.json()["records"]


def arrow_body(table: pa.Table, metadata: dict | None = None) -> bytes:
    if metadata:
        table = table.replace_schema_metadata(metadata)
    sink = io.BytesIO()
    with pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    return sink.getvalue()


def test_topic_lifecycle(http):
    name = new_topic(http, 2, {"retention.ms": 60000})
    d = http.get(f"/v1/topics/{name}").json()
    assert [p["partition"] for p in d["partitions"]] == [0, 1]
    assert d["configs"]["retention.ms"] == "60000" and d["overrides"] == {"retention.ms": "60000"}
    assert name in http.get("/v1/topics").json()["topics"]
    assert "__consumer_offsets" not in http.get("/v1/topics").json()["topics"]
    assert "__consumer_offsets" in http.get("/v1/topics", params={"internal": "true"}).json()["topics"]
    r = http.patch(f"/v1/topics/{name}", json={"configs": {"cleanup.policy": "compact"}, "partitions": 4})
    assert r.status_code == 200, r.text
    assert len(r.json()["partitions"]) == 4 and r.json()["configs"]["cleanup.policy"] == "compact"
    # the front's metadata cache follows the alter: the new partition accepts records at once
    r = http.post(f"/v1/topics/{name}/records", json={"records": [{"key": "k", "value": "v", "partition": 3}]})
    assert r.status_code == 200 and r.json()["results"][0]["partition"] == 3, r.text
    assert http.delete(f"/v1/topics/{name}").status_code == 204
    assert http.get(f"/v1/topics/{name}").status_code == 404
    assert name not in http.get("/v1/topics").json()["topics"]


def test_simple_form_partitions_like_kafka(http):
    topic = new_topic(http, 3)
    keys = [f"user-{i}" for i in range(12)]
    records = [{"key": k, "value": f"v-{k}"} for k in keys] + [{"value": "explicit", "partition": 2}] + \
        [{"value": f"sticky-{i}"} for i in range(5)]
    r = http.post(f"/v1/topics/{topic}/records", json={"records": records})
    assert r.status_code == 200, r.text
    results = r.json()["results"]
    assert [x["partition"] for x in results] == sorted(x["partition"] for x in results)
    assert all(x["error_code"] == 0 and x["duplicate"] is False for x in results)
    assert sum(x["record_count"] for x in results) == len(records)
    stored = {p: fetch_all(http, topic, p) for p in range(3)}
    for k in keys:  # murmur2(key) places each key where the Java client would
        p = partition_for_key(k.encode(), 3)
        assert f"v-{k}" in [x["value"] for x in stored[p]]
    assert "explicit" in [x["value"] for x in stored[2]]
    sticky_partitions = {p for p, recs in stored.items() for x in recs if x["value"].startswith("sticky-")}
    assert len(sticky_partitions) == 1  # null keys of one request stick to one partition
    # within a partition, records keep request order
    p = next(iter(sticky_partitions))
    assert [x["value"] for x in stored[p] if x["value"].startswith("sticky-")] == [f"sticky-{i}" for i in range(5)]


def test_base64_headers_timestamps_round_trip(http, topic):
    raw = bytes(range(256))
    ts = int(time.time() * 1000) - 5000
    record = {"key": base64.b64encode(b"\x00key").decode(), "value": base64.b64encode(raw).decode(),
              "headers": [{"key": "trace", "value": base64.b64encode(b"\xff\x01").decode()}, {"key": "empty"}],
              "timestamp": ts, "partition": 1}
    r = http.post(f"/v1/topics/{topic}/records", json={"encoding": "base64", "records": [record, {"partition": 1}]})
    assert r.status_code == 200, r.text
    assert r.json()["results"][0]["timestamp_type"] == "CreateTime"
    recs = fetch_all(http, topic, 1, encoding="base64")
    assert base64.b64decode(recs[0]["value"]) == raw and base64.b64decode(recs[0]["key"]) == b"\x00key"
    assert recs[0]["headers"] == [{"key": "trace", "value": base64.b64encode(b"\xff\x01").decode()},
                                  {"key": "empty", "value": None}]
    assert recs[0]["timestamp"] == ts and recs[0]["timestamp_type"] == "CreateTime"
    assert recs[1]["key"] is None and recs[1]["value"] is None  # a tombstone-shaped record
    # binary values cannot be shown as UTF-8: a clear 400 naming the offset and the way out
    bad = http.get(f"/v1/topics/{topic}/partitions/1/records", params={"offset": 0})
    assert bad.status_code == 400 and "encoding=base64" in bad.json()["message"]


def test_log_append_time_topic_reports_commit_time(http):
    topic = new_topic(http, 1, {"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    r = http.post(f"/v1/topics/{topic}/records", json={"records": [{"value": "x", "timestamp": 1000}]})
    assert r.status_code == 200, r.text
    res = r.json()["results"][0]
    assert res["timestamp_type"] == "LogAppendTime" and res["log_append_time"] >= before - 1000
    rec = fetch_all(http, topic, 0)[0]
    assert rec["timestamp"] == res["log_append_time"] and rec["timestamp_type"] == "LogAppendTime"


def test_arrow_form(http, topic):
    table = pa.table({"key": pa.array([b"a", None, b"c"]), "value": pa.array(["1", "2", "3"]),
                      "partition": pa.array([0, 1, None], pa.int32()),
                      "timestamp": pa.array([1_700_000_000_000] * 3, pa.int64())})
    r = http.post(f"/v1/topics/{topic}/records", content=arrow_body(table),
                  headers={"content-type": "application/vnd.apache.arrow.stream"})
    assert r.status_code == 200, r.text
    by_partition = {x["partition"]: x for x in r.json()["results"]}
    assert by_partition[0]["record_count"] + by_partition[1]["record_count"] == 3
    assert partition_for_key(b"c", 2) in by_partition
    # idempotence fields in the schema metadata instead of the query string
    pid = http.post("/v1/producers", json={}).json()["producer_id"]
    body = arrow_body(pa.table({"value": pa.array([b"m1", b"m2"])}),
                      {"producer_id": str(pid), "producer_epoch": "0", "base_sequence": "0", "partition": "1"})
    for expect_dup in (False, True):
        r = http.post(f"/v1/topics/{topic}/records", content=body,
                      headers={"content-type": "application/vnd.apache.arrow.stream"})
        assert r.status_code == 200 and r.json()["results"][0]["duplicate"] is expect_dup, r.text
    assert [x["value"] for x in fetch_all(http, topic, 1)][-2:] == ["m1", "m2"]


def test_bodies_parsed_on_the_loop_and_in_the_thread_pool_give_the_same_records(http, topic):
    """A JSON body over the lane's inline limit is parsed in the thread pool; both paths commit in order."""
    from api.produce_lane import INLINE_PARSE_BYTES

    small = {"records": [{"value": f"s{i}", "partition": 0} for i in range(10)]}
    big = {"records": [{"value": f"b{i}-" + "x" * 100, "partition": 0} for i in range(3000)]}
    assert len(json.dumps(small)) < INLINE_PARSE_BYTES["application/json"] < len(json.dumps(big))
    for body in (small, big, small):
        r = http.post(f"/v1/topics/{topic}/records", json=body)
        assert r.status_code == 200 and r.json()["results"][0]["record_count"] == len(body["records"]), r.text
    values = [x["value"] for x in fetch_all(http, topic, 0)]
    assert values == [f"s{i}" for i in range(10)] + [f"b{i}-" + "x" * 100 for i in range(3000)] + \
        [f"s{i}" for i in range(10)]


def test_a_partition_added_by_another_process_is_produced_to_at_once(http, front_log):
    """The front's cached metadata says 2 partitions; a request for partition 3 makes it read again (off the
    event loop) instead of refusing it."""
    t = new_topic(http, 2)
    assert http.post(f"/v1/topics/{t}/records", json={"records": [{"value": "a", "partition": 1}]}).status_code == 200
    front_log.alter_topic(t, partitions=4)
    r = http.post(f"/v1/topics/{t}/records", json={"records": [{"value": "b", "partition": 3}]})
    assert r.status_code == 200 and r.json()["results"][0]["partition"] == 3, r.text
    assert [x["value"] for x in fetch_all(http, t, 3)] == ["b"]
    r = http.post(f"/v1/topics/{t}/records", json={"records": [{"value": "c", "partition": 4}]})
    assert r.status_code == 404 and r.json()["error_code"] == 3, r.text


def test_acks_zero_answers_202_then_commits(http, topic):
    r = http.post(f"/v1/topics/{topic}/records", params={"acks": "0"},
                  json={"records": [{"value": f"x{i}", "partition": 0} for i in range(10)]})
    assert r.status_code == 202 and r.json() == {"topic": topic, "accepted_records": 10}
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if http.get(f"/v1/topics/{topic}").json()["partitions"][0]["high_watermark"] == 10:
            break
        time.sleep(0.1)
    assert [x["value"] for x in fetch_all(http, topic, 0)] == [f"x{i}" for i in range(10)]


def test_fetch_limits_and_delete_records(http, topic):
    r = http.post(f"/v1/topics/{topic}/records", json={"records": [{"value": f"v{i}", "partition": 0}
                                                                   for i in range(20)]})
    assert r.status_code == 200
    page = http.get(f"/v1/topics/{topic}/partitions/0/records", params={"offset": 5, "max_records": 4}).json()
    assert [x["offset"] for x in page["records"]] == [5, 6, 7, 8]
    assert (page["next_offset"], page["high_watermark"], page["log_start_offset"]) == (9, 20, 0)
    at_end = http.get(f"/v1/topics/{topic}/partitions/0/records", params={"offset": 20}).json()
    assert at_end["records"] == [] and at_end["next_offset"] == 20
    r = http.post(f"/v1/topics/{topic}/partitions/0/delete-records", json={"before_offset": 12})
    assert r.status_code == 200 and r.json()["log_start_offset"] == 12
    assert http.get(f"/v1/topics/{topic}").json()["partitions"][0]["log_start_offset"] == 12
    gone = http.get(f"/v1/topics/{topic}/partitions/0/records", params={"offset": 11})
    assert gone.status_code == 416 and gone.json()["error_code"] == 1
    assert fetch_all(http, topic, 0, offset=12)[0]["value"] == "v12"


def test_metrics_expose_the_listed_families(front_root, http, topic):
    r = http.post(f"/v1/topics/{topic}/records", json={"records": [{"value": "abc", "partition": 0}] * 3})
    assert r.status_code == 200
    http.get(f"/v1/topics/{topic}/partitions/0/records", params={"offset": 999})  # an error to count
    text = http.get("/metrics").text
    for family in ("lakelog_records_in_total", "lakelog_bytes_in_total", "lakelog_request_duration_seconds_bucket",
                   "lakelog_commit_duration_seconds_bucket", "lakelog_accumulator_buffered_bytes",
                   "lakelog_accumulator_buffer_memory_bytes", "lakelog_errors_total",
                   "lakelog_produce_stage_seconds_bucket"):
        assert family in text, family
    # where produce's time went: queued everywhere; uploads, the wait for the commit ahead and the commit PUT
    # only where commits are pipelined (object stores)
    counted = {sample.labels["stage"]: sample.value for metric in text_string_to_metric_families(text)
               for sample in metric.samples if sample.name == "lakelog_produce_stage_seconds_count"}
    pipelined = {"upload", "commit_wait", "commit"}
    assert counted.get("queue", 0) >= 1, counted
    if front_root[0].startswith("s3://"):
        assert all(counted.get(stage, 0) >= 1 for stage in pipelined), counted
    else:
        assert not pipelined & set(counted), counted
    line = next(x for x in text.splitlines() if x.startswith(f'lakelog_records_in_total{{topic="{topic}"}}'))
    assert float(line.split()[-1]) >= 3
    assert 'route="/v1/topics/{topic}/records"' in text
    assert 'lakelog_errors_total{error_code="1",error_name="OFFSET_OUT_OF_RANGE"}' in text
    assert http.post(f"/v1/topics/{topic}/records", json={"records": []}).status_code == 400  # counted by the lane
    assert 'lakelog_errors_total{error_code="42",error_name="INVALID_REQUEST"}' in http.get("/metrics").text


def test_openapi_and_docs(http):
    spec = http.get("/openapi.json").json()
    paths = spec["paths"]
    for p in ("/v1/topics", "/v1/topics/{topic}", "/v1/topics/{topic}/records", "/v1/producers",
              "/v1/topics/{topic}/partitions/{partition}/records", "/v1/groups/{group}/offsets", "/v1/groups",
              "/v1/health", "/v1/topics/{topic}/partitions/{partition}/delete-records"):
        assert p in paths, p
    body = paths["/v1/topics/{topic}/records"]["post"]["requestBody"]["content"]
    assert set(body) == {"application/json", "application/vnd.apache.arrow.stream"}
    assert "ProduceBody" in spec["components"]["schemas"]
    assert http.get("/docs").status_code == 200
    health = http.get("/v1/health").json()
    assert health["status"] == "ok" and health["auth"] is False


def test_buffer_memory_defaults_by_root_and_is_overridden(front_root, http, start_front):
    """buffer.memory: 64 MiB on a local root, 256 MiB on an object store (commit cycles there are PUT round trips,
    so bytes in flight set the rate and the segment size); ``LAKELOG_BUFFER_MEMORY`` overrides either."""
    def limit(client) -> float:
        line = next(x for x in client.get("/metrics").text.splitlines()
                    if x.startswith("lakelog_accumulator_buffer_memory_bytes "))
        return float(line.split()[-1])

    assert limit(http) == (256 << 20 if front_root[0].startswith("s3://") else 64 << 20)
    with start_front(env={"LAKELOG_BUFFER_MEMORY": str(3 << 20)}).client() as other:
        assert limit(other) == 3 << 20
