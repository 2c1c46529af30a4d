"""Bad input, table-driven: every row of the issue's error list, with status, Kafka code, and no write.

Each row prepares (e.g. a producer's first batch), then sends one bad request
about a topic holding one committed record per partition, and asserts the HTTP
status, the error body's ``error_code`` and ``error_name``, and that the topic
is unchanged by the request (same Delta version, high watermarks and configs).  Auth rows (401/403) are in
``test_http_auth.py``; the back-pressure row (429) needs its own front and is below.
"""

from __future__ import annotations

import io
import time

import pyarrow as pa
import pytest

from front_process import MAX_REQUEST_BYTES, new_topic


def _state(http, topic: str) -> dict:
    r = http.get(f"/v1/topics/{topic}")
    assert r.status_code == 200, r.text
    d = r.json()
    return {"version": d["version"], "configs": d["configs"],
            "hw": [p["high_watermark"] for p in d["partitions"]]}


def _producer(http, transactional_id: str | None = None) -> tuple[int, int]:
    r = http.post("/v1/producers", json={"transactional_id": transactional_id} if transactional_id else {})
    assert r.status_code == 200, r.text
    return r.json()["producer_id"], r.json()["producer_epoch"]


def _idem(pid: int, epoch: int, partition: int, seq: int, n: int = 1) -> dict:
    return {"producer_id": pid, "producer_epoch": epoch,
            "batches": [{"partition": partition, "base_sequence": seq,
                         "records": [{"value": f"v{seq + i}"} for i in range(n)]}]}


def _arrow(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    with pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    return sink.getvalue()


def _seeded_producer(http, topic: str, transactional_id: str | None = None) -> tuple[int, int]:
    """A producer with one committed batch (sequences 0..0) on partition 0."""
    pid, epoch = _producer(http, transactional_id)
    r = http.post(f"/v1/topics/{topic}/records", json=_idem(pid, epoch, 0, 0))
    assert r.status_code == 200 and r.json()["results"][0]["error_code"] == 0, r.text
    return pid, epoch


def row_malformed_json(http, t):
    return lambda: http.post(f"/v1/topics/{t}/records", content=b'{"records": [',
                             headers={"content-type": "application/json"})


def row_wrong_shape(http, t):
    return lambda: http.post(f"/v1/topics/{t}/records", json={"records": {"value": "x"}})


def row_unknown_field(http, t):
    return lambda: http.post(f"/v1/topics/{t}/records", json={"records": [{"value": "x", "offset": 3}]})


def row_empty_records(http, t):
    return lambda: http.post(f"/v1/topics/{t}/records", json={"records": []})


def row_bad_base64(http, t):
    return lambda: http.post(f"/v1/topics/{t}/records",
                     json={"encoding": "base64", "records": [{"value": "aGVsbG8="}, {"value": "not base64!"}]})


def row_bad_arrow(http, t):
    return lambda: http.post(f"/v1/topics/{t}/records", content=b"\x00\x01 not arrow",
                     headers={"content-type": "application/vnd.apache.arrow.stream"})


def row_arrow_unknown_column(http, t):
    body = _arrow(pa.table({"value": pa.array([b"x"]), "offset": pa.array([1])}))
    return lambda: http.post(f"/v1/topics/{t}/records", content=body,
                     headers={"content-type": "application/vnd.apache.arrow.stream"})


def row_bad_timestamp(http, t):
    return lambda: http.post(f"/v1/topics/{t}/records", json={"records": [{"value": "x", "timestamp": 2**62}]})


def row_invalid_topic_name_produce(http, t):
    return lambda: http.post("/v1/topics/bad$name/records", json={"records": [{"value": "x"}]})


def row_invalid_topic_name_create(http, t):
    return lambda: http.post("/v1/topics", json={"name": "no spaces allowed", "partitions": 1})


def row_internal_topic_produce(http, t):
    return lambda: http.post("/v1/topics/__consumer_offsets/records", json={"records": [{"value": "x"}]})


def row_invalid_config_create(http, t):
    return lambda: http.post("/v1/topics", json={"name": t + "-x", "partitions": 1,
                                                 "configs": {"retention.ms": "soon"}})


def row_unknown_config_alter(http, t):
    return lambda: http.patch(f"/v1/topics/{t}", json={"configs": {"no.such.config": "1"}})


def row_unknown_codec_create(http, t):
    return lambda: http.post("/v1/topics", json={"name": t + "-z", "partitions": 1,
                                                 "configs": {"compression.type": "brotli"}})


def row_unknown_codec_alter(http, t):  # Kafka's codec names are lower case
    return lambda: http.patch(f"/v1/topics/{t}", json={"configs": {"compression.type": "ZSTD"}})


def row_partition_decrease(http, t):
    return lambda: http.patch(f"/v1/topics/{t}", json={"partitions": 1})


def row_zero_partitions(http, t):
    return lambda: http.post("/v1/topics", json={"name": t + "-y", "partitions": 0})


def row_unknown_topic(http, t):
    return lambda: http.post(f"/v1/topics/{t}-missing/records", json={"records": [{"value": "x"}]})


def row_unknown_partition(http, t):
    return lambda: http.post(f"/v1/topics/{t}/records", json={"records": [{"value": "x", "partition": 7}]})


def row_unknown_partition_idempotent(http, t):
    pid, epoch = _producer(http)
    return lambda: http.post(f"/v1/topics/{t}/records", json=_idem(pid, epoch, 9, 0))


def row_commit_unknown_topic(http, t):
    return lambda: http.post("/v1/groups/g1/offsets", json={"offsets": [{"topic": t + "-missing", "partition": 0,
                                                                 "offset": 1}]})


def row_topic_exists(http, t):
    return lambda: http.post("/v1/topics", json={"name": t, "partitions": 2})


def row_sequence_gap(http, t):
    pid, epoch = _seeded_producer(http, t)
    return lambda: http.post(f"/v1/topics/{t}/records", json=_idem(pid, epoch, 0, 5))


def row_first_sequence_not_zero(http, t):
    pid, epoch = _producer(http)
    return lambda: http.post(f"/v1/topics/{t}/records", json=_idem(pid, epoch, 1, 3))


def row_stale_epoch(http, t):
    pid, _ = _producer(http)
    r = http.post(f"/v1/topics/{t}/records", json=_idem(pid, 1, 0, 0))  # the producer moved to epoch 1
    assert r.status_code == 200, r.text
    return lambda: http.post(f"/v1/topics/{t}/records", json=_idem(pid, 0, 0, 1))


def row_fenced(http, t):
    tid = f"tx-{t}"
    pid, epoch = _seeded_producer(http, t, tid)
    assert _producer(http, tid) == (pid, epoch + 1)  # a new instance fences this one
    return lambda: http.post(f"/v1/topics/{t}/records", json=_idem(pid, epoch, 0, 1))


def row_unknown_producer(http, t):
    return lambda: http.post(f"/v1/topics/{t}/records", json=_idem(2**40, 0, 0, 0))


def row_record_too_large(http, t):
    return lambda: http.post(f"/v1/topics/{t}/records", json={"records": [{"value": "x" * 2000}]})


def row_body_too_large(http, t):
    return lambda: http.post(f"/v1/topics/{t}/records", json={"records": [{"value": "x" * (MAX_REQUEST_BYTES + 10)}]})


def _chunked_over_the_limit(head: bytes, tail: bytes):
    """A JSON body, chunked (no Content-Length), with a string value that takes it past the limit."""
    yield head
    for _ in range(MAX_REQUEST_BYTES // 65536 + 2):
        yield b"x" * 65536
    yield tail


def row_body_too_large_chunked(http, t):
    return lambda: http.post(f"/v1/topics/{t}/records", content=_chunked_over_the_limit(b'{"records": [{"value": "',
                                                                                       b'"}]}'),
                             headers={"content-type": "application/json"})


def row_create_body_too_large_chunked(http, t):
    """A route whose body FastAPI parses (its own 400 must not replace the limit's error)."""
    body = _chunked_over_the_limit(b'{"name": "too-large-chunked", "partitions": 1, "configs": {"x": "', b'"}}')
    return lambda: http.post("/v1/topics", content=body, headers={"content-type": "application/json"})


def row_wrong_content_type(http, t):
    return lambda: http.post(f"/v1/topics/{t}/records", content=b"value=x",
                     headers={"content-type": "application/x-www-form-urlencoded"})


def row_bad_acks(http, t):
    return lambda: http.post(f"/v1/topics/{t}/records", params={"acks": "2"}, json={"records": [{"value": "x"}]})


def row_arrow_producer_id_out_of_range(http, t):
    body = _arrow(pa.table({"value": pa.array([b"x"])}))
    return lambda: http.post(f"/v1/topics/{t}/records", params={"producer_id": "-1", "producer_epoch": "0",
                                                                "base_sequence": "0", "partition": "0"},
                             content=body, headers={"content-type": "application/vnd.apache.arrow.stream"})


def row_arrow_partition_not_integer(http, t):
    body = _arrow(pa.table({"value": pa.array([b"x"])}))
    return lambda: http.post(f"/v1/topics/{t}/records", params={"partition": "first"}, content=body,
                             headers={"content-type": "application/vnd.apache.arrow.stream"})


def row_json_with_arrow_query_params(http, t):
    return lambda: http.post(f"/v1/topics/{t}/records", params={"partition": "0"}, json={"records": [{"value": "x"}]})


def row_fetch_above_hw(http, t):
    return lambda: http.get(f"/v1/topics/{t}/partitions/0/records", params={"offset": 10**6})


def row_fetch_below_log_start(http, t):
    return lambda: http.get(f"/v1/topics/{t}/partitions/0/records", params={"offset": -1})


def row_delete_records_above_hw(http, t):
    return lambda: http.post(f"/v1/topics/{t}/partitions/0/delete-records", json={"before_offset": 10**6})


def row_metadata_too_large(http, t):
    return lambda: http.post("/v1/groups/g1/offsets", json={"offsets": [{"topic": t, "partition": 0, "offset": 1,
                                                                 "metadata": "m" * 5000}]})


def row_bad_group(http, t):
    return lambda: http.get("/v1/groups/bad%01group/offsets")


ROWS = [
    # (row, status, error code, error name)
    (row_malformed_json, 400, 42, "INVALID_REQUEST"),
    (row_wrong_shape, 400, 42, "INVALID_REQUEST"),
    (row_unknown_field, 400, 42, "INVALID_REQUEST"),
    (row_empty_records, 400, 42, "INVALID_REQUEST"),
    (row_bad_base64, 400, 42, "INVALID_REQUEST"),
    (row_bad_arrow, 400, 2, "CORRUPT_MESSAGE"),
    (row_arrow_unknown_column, 400, 42, "INVALID_REQUEST"),
    (row_bad_timestamp, 400, 32, "INVALID_TIMESTAMP"),
    (row_bad_acks, 400, 42, "INVALID_REQUEST"),
    (row_arrow_producer_id_out_of_range, 400, 42, "INVALID_REQUEST"),
    (row_arrow_partition_not_integer, 400, 42, "INVALID_REQUEST"),
    (row_json_with_arrow_query_params, 400, 42, "INVALID_REQUEST"),
    (row_invalid_topic_name_produce, 400, 17, "INVALID_TOPIC_EXCEPTION"),
    (row_invalid_topic_name_create, 400, 17, "INVALID_TOPIC_EXCEPTION"),
    (row_internal_topic_produce, 400, 17, "INVALID_TOPIC_EXCEPTION"),
    (row_invalid_config_create, 400, 40, "INVALID_CONFIG"),
    (row_unknown_config_alter, 400, 40, "INVALID_CONFIG"),
    (row_unknown_codec_create, 400, 40, "INVALID_CONFIG"),
    (row_unknown_codec_alter, 400, 40, "INVALID_CONFIG"),
    (row_partition_decrease, 400, 37, "INVALID_PARTITIONS"),
    (row_zero_partitions, 400, 37, "INVALID_PARTITIONS"),
    (row_metadata_too_large, 400, 12, "OFFSET_METADATA_TOO_LARGE"),
    (row_bad_group, 400, 24, "INVALID_GROUP_ID"),
    (row_unknown_topic, 404, 3, "UNKNOWN_TOPIC_OR_PARTITION"),
    (row_unknown_partition, 404, 3, "UNKNOWN_TOPIC_OR_PARTITION"),
    (row_unknown_partition_idempotent, 404, 3, "UNKNOWN_TOPIC_OR_PARTITION"),
    (row_commit_unknown_topic, 404, 3, "UNKNOWN_TOPIC_OR_PARTITION"),
    (row_topic_exists, 409, 36, "TOPIC_ALREADY_EXISTS"),
    (row_sequence_gap, 409, 45, "OUT_OF_ORDER_SEQUENCE_NUMBER"),
    (row_first_sequence_not_zero, 409, 45, "OUT_OF_ORDER_SEQUENCE_NUMBER"),
    (row_stale_epoch, 409, 47, "INVALID_PRODUCER_EPOCH"),
    (row_fenced, 409, 90, "PRODUCER_FENCED"),
    (row_unknown_producer, 409, 59, "UNKNOWN_PRODUCER_ID"),
    (row_record_too_large, 413, 10, "MESSAGE_TOO_LARGE"),
    (row_body_too_large, 413, 10, "MESSAGE_TOO_LARGE"),
    (row_body_too_large_chunked, 413, 10, "MESSAGE_TOO_LARGE"),
    (row_create_body_too_large_chunked, 413, 10, "MESSAGE_TOO_LARGE"),
    (row_wrong_content_type, 415, 42, "INVALID_REQUEST"),
    (row_fetch_above_hw, 416, 1, "OFFSET_OUT_OF_RANGE"),
    (row_fetch_below_log_start, 416, 1, "OFFSET_OUT_OF_RANGE"),
    (row_delete_records_above_hw, 416, 1, "OFFSET_OUT_OF_RANGE"),
]


@pytest.fixture(scope="module")
def seeded(front):
    """A topic (max.message.bytes=1000) with one record in each of its 2 partitions, shared by the rows
    (each row compares the topic's state right before and after its own bad request)."""
    with front.client() as http:
        t = new_topic(http, 2, {"max.message.bytes": 1000})
        for p in (0, 1):
            r = http.post(f"/v1/topics/{t}/records", json={"records": [{"value": "seed", "partition": p}]})
            assert r.status_code == 200, r.text
    return t


@pytest.mark.parametrize("row,status,code,name", ROWS, ids=[r[0].__name__[4:] for r in ROWS])
def test_bad_request_is_refused_and_writes_nothing(http, seeded, row, status, code, name):
    send = row(http, seeded)  # setup (e.g. a producer's first batch) happens here, before the snapshot
    topics_before = http.get("/v1/topics").json()["topics"]
    before = _state(http, seeded)
    response = send()
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error_code", "error_name", "message"}, body
    assert (body["error_code"], body["error_name"]) == (code, name), body
    assert body["message"]
    assert _state(http, seeded) == before
    assert http.get("/v1/topics").json()["topics"] == topics_before  # no topic created by a failed create


def test_per_partition_errors_in_one_request(http, topic):
    """Kafka's per-partition model: one bad batch in a request fails alone; the others commit (200)."""
    pid, epoch = _producer(http)
    body = {"producer_id": pid, "producer_epoch": epoch, "batches": [
        {"partition": 0, "base_sequence": 0, "records": [{"value": "ok"}]},
        {"partition": 1, "base_sequence": 4, "records": [{"value": "gap"}]},
    ]}
    r = http.post(f"/v1/topics/{topic}/records", json=body)
    assert r.status_code == 200, r.text
    ok, bad = r.json()["results"]
    assert (ok["partition"], ok["error_code"], ok["base_offset"]) == (0, 0, 0)
    assert (bad["partition"], bad["error_code"], bad["error_name"], bad["base_offset"]) == \
        (1, 45, "OUT_OF_ORDER_SEQUENCE_NUMBER", -1)
    assert _state(http, topic)["hw"] == [1, 0]


def test_backpressure_answers_429_with_retry_after(start_front):
    """A full accumulator (buffer.memory) refuses new produce requests with 429 and Retry-After; nothing of
    the refused request is written."""
    f = start_front(env={"LAKELOG_BUFFER_MEMORY": "3000", "LAKELOG_LINGER_MS": "2000",
                         "LAKELOG_BATCH_SIZE": str(1 << 20)})
    with f.client() as http:
        t = new_topic(http, 1)
        first = http.post(f"/v1/topics/{t}/records", params={"acks": "0"},
                          json={"records": [{"value": "a" * 1000}, {"value": "b" * 1000}]})
        assert first.status_code == 202, first.text
        assert first.json()["accepted_records"] == 2
        second = http.post(f"/v1/topics/{t}/records", json={"records": [{"value": "c" * 1500}]})
        assert second.status_code == 429, second.text
        assert second.json()["error_code"] == 89 and second.json()["error_name"] == "THROTTLING_QUOTA_EXCEEDED"
        assert int(second.headers["Retry-After"]) >= 1
        deadline = time.monotonic() + 60
        while _state(http, t)["hw"] != [2] and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _state(http, t)["hw"] == [2]  # the acks=0 request committed; the refused one did not
        values = [r["value"] for r in http.get(f"/v1/topics/{t}/partitions/0/records",
                                               params={"offset": 0}).json()["records"]]
        assert values == ["a" * 1000, "b" * 1000]
        metrics = http.get("/metrics").text
        assert 'lakelog_errors_total{error_code="89",error_name="THROTTLING_QUOTA_EXCEEDED"} 1.0' in metrics
