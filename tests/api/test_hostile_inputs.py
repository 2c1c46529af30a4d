"""Hostile and careless input against a real front: refused with Kafka's error, nothing written, the front up.

One test per finding of the hostile-input review (each failed before its fix), on the shared fronts over a
local and a moto S3 root, and the same bodies from a principal of an auth-enabled front that may only write
one topic prefix. Fuzzing (hypothesis) mutates valid Arrow IPC streams and generates JSON bodies; a longer
fuzz run: ``LAKELOG_FUZZ_SECONDS=600 make test PYTEST_ARGS="-k fuzz"``.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
import uuid

import httpx
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from front_process import Front, new_topic
from hostile_support import (arrow_bytes, bomb_body, clean_error_body, corrupt_offsets_body, fuzz_rounds,
                             refused_untouched, rss_bytes, storage_fingerprint)

from lakelog.storage.record_schema import HEADER_TYPE

ARROW = {"content-type": "application/vnd.apache.arrow.stream"}
JSON = {"content-type": "application/json"}


@pytest.fixture
def storage(front_root):
    root, _, options = front_root
    return root, options


def post_arrow(http, topic, body):
    return lambda: http.post(f"/v1/topics/{topic}/records", content=body, headers=ARROW)


def post_json(http, path, raw: bytes):
    return lambda: http.post(path, content=raw, headers=JSON)


# -- finding 1: corrupt Arrow offsets (SIGSEGV, or foreign heap memory in the log) -----------------------------
@pytest.mark.parametrize("second, last", [(4096, 16), (40, 16), (12, 8), (-5, 16)],
                         ids=["beyond-data", "slightly-beyond", "non-monotonic", "negative"])
def test_corrupt_arrow_offsets_are_corrupt_message(front, http, storage, topic, second, last):
    body = refused_untouched(storage, http, topic, post_arrow(http, topic, corrupt_offsets_body(second, last)),
                             400, "CORRUPT_MESSAGE")
    assert body["error_code"] == 2
    fetched = http.get(f"/v1/topics/{topic}/partitions/0/records", params={"offset": 0})
    assert fetched.status_code in (200, 416)


# -- finding 2: compression amplification ---------------------------------------------------------------------
@pytest.mark.parametrize("codec, decoded_mib", [("zstd", 1024), ("lz4", 200)])
def test_compression_bomb_refused_before_decompression_memory_flat(front, http, storage, topic, codec, decoded_mib):
    bomb = bomb_body(decoded_mib, codec)
    assert len(bomb) < 1 << 20  # under the front's body limit on the wire, hundreds of MiB decoded
    baseline = rss_bytes(front.proc.pid)
    stalls: list[float] = []
    stop = threading.Event()

    def probe_health():  # the event loop keeps answering while bombs arrive
        with front.client() as c:
            while not stop.is_set():
                t0 = time.monotonic()
                assert c.get("/v1/health").status_code == 200
                stalls.append(time.monotonic() - t0)
                time.sleep(0.02)

    prober = threading.Thread(target=probe_health)
    prober.start()
    try:
        for _ in range(5):
            body = refused_untouched(storage, http, topic, post_arrow(http, topic, bomb), 413, "MESSAGE_TOO_LARGE")
            assert body["error_code"] == 10 and "before decompression" in body["message"]
    finally:
        deadline = time.monotonic() + 10
        while len(stalls) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        stop.set()
        prober.join()
    grown = rss_bytes(front.proc.pid) - baseline
    assert grown < 150 << 20, f"the front grew by {grown >> 20} MiB under 5 bombs"
    assert len(stalls) >= 3 and max(stalls) < 0.5, f"health checks stalled: {stalls}"


# -- finding 4: a poison record (a header without a key) --------------------------------------------------------
def test_null_header_key_refused(front, http, storage, topic):
    table = pa.table({"value": pa.array([b"v"]), "headers": pa.array([[{"key": None, "value": b"x"}]], HEADER_TYPE)})
    body = refused_untouched(storage, http, topic, post_arrow(http, topic, arrow_bytes(table)), 400, "INVALID_RECORD")
    assert "header" in body["message"]
    nulled = pa.table({"value": pa.array([b"v"]), "headers": pa.array([[None]], HEADER_TYPE)})
    refused_untouched(storage, http, topic, post_arrow(http, topic, arrow_bytes(nulled)), 400, "INVALID_RECORD")
    refused_untouched(storage, http, topic, post_json(http, f"/v1/topics/{topic}/records",
                                                      b'{"records":[{"value":"v","headers":[{"key":null}]}]}'),
                      400, "INVALID_REQUEST")
    ok = pa.table({"value": pa.array([b"v"]), "headers": pa.array([[{"key": "k", "value": None}]], HEADER_TYPE)})
    assert http.post(f"/v1/topics/{topic}/records", content=arrow_bytes(ok), headers=ARROW,
                     params={"partition": 0}).status_code == 200
    records = http.get(f"/v1/topics/{topic}/partitions/0/records", params={"offset": 0}).json()["records"]
    assert any(r["headers"] == [{"key": "k", "value": None}] for r in records)


# -- finding 6: 500s that are 400s ---------------------------------------------------------------------------
def test_malformed_json_produce_bodies(front, http, storage, topic):
    path = f"/v1/topics/{topic}/records"
    for raw in (b'{"records":[{"value":"\xff\xfe"}]}',
                b'{"records":' + b"[" * 100_000 + b"]" * 100_000 + b"}",
                b'{"records":[{"value":"\\ud800"}]}',
                b'{"records":[{"value":"x","timestamp":1' + b"0" * 400 + b"}]}"):
        refused_untouched(storage, http, topic, post_json(http, path, raw), 400, "INVALID_REQUEST")


def test_hostile_bodies_to_a_transaction_are_refused_and_stage_nothing(front, http, storage, topic):
    """The transactional routes parse with the same bounded parser: malformed, deep, over-limit or non-idempotent
    bodies are refused with a Kafka error, the front stays up, the topic's files do not change, and the
    transaction has begun nothing (it stays Empty)."""
    from front_process import MAX_REQUEST_BYTES

    tid = f"tx-hostile-{uuid.uuid4().hex[:8]}"
    ident = http.post(f"/v1/transactions/{tid}/init", json={}).json()
    produce_path = f"/v1/transactions/{tid}/topics/{topic}/records"
    for raw, status, name in (
            (b'{"producer_id":', 400, "INVALID_REQUEST"),
            (b'{"records":' + b"[" * 100_000 + b"]" * 100_000 + b"}", 400, "INVALID_REQUEST"),
            (b'{"records":[{"value":"\ud800"}]}', 400, "INVALID_REQUEST"),
            (b'{"records":[{"value":"plain, not idempotent"}]}', 400, "INVALID_REQUEST"),
            (b"[" * (MAX_REQUEST_BYTES + 1), 413, "MESSAGE_TOO_LARGE")):
        refused_untouched(storage, http, topic, post_json(http, produce_path, raw), status, name)
    for raw in (b"not json", b'{"producer_id": 1e400, "producer_epoch": 0}', b'{"producer_id": [], "producer_epoch": {}}'):
        refused_untouched(storage, http, topic, post_json(http, f"/v1/transactions/{tid}/commit", raw), 400,
                          "INVALID_REQUEST")
    state = http.get(f"/v1/transactions/{tid}").json()
    assert (state["state"], state["producer_id"]) == ("Empty", ident["producer_id"]), state


def test_malformed_group_bodies_refused_before_any_state(front, http, topic):
    group = f"g-{uuid.uuid4().hex[:8]}"
    cases = [
        (f"/v1/groups/{group}/offsets",
         b'{"offsets":[{"topic":"%s","partition":0,"offset":0,"metadata":"\\ud800"}]}' % topic.encode()),
        (f"/v1/groups/{group}/offsets",
         b'{"offsets":[{"topic":"%s","partition":0,"offset":0}],"member_id":"\\udc00"}' % topic.encode()),
        (f"/v1/groups/{group}/members", b'{"topics":["%s"],"rebalance_timeout_ms":1' % topic.encode()
         + b"0" * 400 + b"}"),
        (f"/v1/groups/{group}/members", b'{"topics":["%s"],"client_id":"\\ud800"}' % topic.encode()),
        (f"/v1/groups/{group}/offsets", b'{"offsets":[{"topic":"%s","partition":0,"offset":"5"}]}' % topic.encode()),
        (f"/v1/groups/{group}/offsets", b'{"offsets":[{"topic":"%s","partition":true,"offset":1}]}' % topic.encode()),
    ]
    for path, raw in cases:
        r = http.post(path, content=raw, headers=JSON)
        assert r.status_code == 400, (raw[:80], r.text)
        assert r.json()["error_name"] == "INVALID_REQUEST"
        clean_error_body(r.json())
    assert http.get(f"/v1/groups/{group}").status_code == 404  # no member was joined or saved
    assert http.get(f"/v1/groups/{group}/offsets").json()["offsets"] == []


# -- finding 7: deviations from Kafka ------------------------------------------------------------------------
@pytest.mark.parametrize("group", ["a\x00b", "line\nbreak", "g" * 256, "del\x7f"])
def test_one_group_id_rule_for_coordinator_and_offsets(http, topic, group):
    from urllib.parse import quote

    path = quote(group, safe="")
    joined = http.post(f"/v1/groups/{path}/members", json={"topics": [topic]})
    committed = http.post(f"/v1/groups/{path}/offsets", json={"offsets": [{"topic": topic, "partition": 0,
                                                                           "offset": 0}]})
    assert (joined.status_code, joined.json()["error_name"]) == (400, "INVALID_GROUP_ID")
    assert (committed.status_code, committed.json()["error_name"]) == (400, "INVALID_GROUP_ID")


def test_config_values_are_not_coerced(http, storage, topic):
    for configs in ({"retention.ms": True}, {"retention.ms": None}, {"retention.ms": ["1"]}):
        refused_untouched(storage, http, topic, lambda c=configs: http.patch(f"/v1/topics/{topic}", json={"configs": c}),
                          400, "INVALID_REQUEST")


def test_subscription_to_illegal_topic_name(http):
    r = http.post(f"/v1/groups/g-{uuid.uuid4().hex[:8]}/members", json={"topics": [".."]})
    assert (r.status_code, r.json()["error_name"]) == (400, "INVALID_TOPIC_EXCEPTION")


def test_chunked_body_over_the_limit_is_413(front, http, storage, topic):
    from front_process import MAX_REQUEST_BYTES

    def chunks():
        for _ in range(MAX_REQUEST_BYTES // 65536 + 4):
            yield b"[" * 65536

    refused_untouched(storage, http, topic, lambda: http.post(f"/v1/topics/{topic}/records", content=chunks(),
                                                              headers=JSON), 413, "MESSAGE_TOO_LARGE")


def test_producer_id_never_handed_out_is_unknown(http, storage, topic):
    pid = http.post("/v1/producers", json={}).json()["producer_id"]
    body = {"producer_id": pid + 1, "producer_epoch": 0,
            "batches": [{"partition": 0, "base_sequence": 0, "records": [{"value": "x"}]}]}
    refused_untouched(storage, http, topic, lambda: http.post(f"/v1/topics/{topic}/records", json=body),
                      409, "UNKNOWN_PRODUCER_ID")
    body["producer_id"] = pid
    assert http.post(f"/v1/topics/{topic}/records", json=body).status_code == 200


def test_unknown_route_is_not_found(http):
    r = http.get("/v1/no-such-route")
    assert r.status_code == 404 and r.json()["error_name"] == "NOT_FOUND" and r.json()["error_code"] == 404
    assert http.delete("/v1/health").status_code == 405


def test_unexpected_errors_name_no_detail():
    """Storage failures are KAFKA_STORAGE_ERROR with the failure's kind only; other bugs say nothing."""
    from lakelog.broker.error_mapping import unexpected_error

    full = unexpected_error(OSError(28, "No space left on device", "/data/root/topics/t/_delta_log/5.json"),
                            "PATCH", "/v1/topics/t")
    assert (full.code, full.name, full.message) == (56, "KAFKA_STORAGE_ERROR",
                                                   "the storage failed: No space left on device")
    bug = unexpected_error(ValueError("/secret/path.py line 3"), "GET", "/v1/x")
    assert bug.code == -1 and "/secret" not in bug.message


# -- auth on: the same hostile bodies from a principal that may only write one prefix ------------------------
@pytest.fixture(scope="module")
def writer_front(tmp_path_factory):
    work = tmp_path_factory.mktemp("hostile-auth")
    auth = {"tokens": [{"principal": "User:admin", "token": "admin-t"}, {"principal": "User:w", "token": "w-t"}],
            "super_users": ["User:admin"],
            "acls": [{"principal": "User:w", "resource_type": "Topic", "pattern_type": "Prefixed",
                      "resource_name": "w-", "operations": ["Write"]}]}
    front = Front.with_auth(work, auth, env={"LAKELOG_MAX_REQUEST_BYTES": str(1 << 20)}).start()
    yield front
    front.stop()


def test_hostile_arrow_from_a_write_only_principal(writer_front):
    with writer_front.client("admin-t") as admin, writer_front.client("w-t") as w:
        topic = f"w-{uuid.uuid4().hex[:8]}"
        assert admin.post("/v1/topics", json={"name": topic, "partitions": 1}).status_code == 201
        storage = (writer_front.root, None)
        refused_untouched(storage, w, topic, post_arrow(w, topic, corrupt_offsets_body(4096)), 400, "CORRUPT_MESSAGE")
        refused_untouched(storage, w, topic, post_arrow(w, topic, bomb_body(1024)), 413, "MESSAGE_TOO_LARGE")
        # Repeated Authorization headers: the first one counts, on the produce lane and the other routes alike.
        good_first = [("authorization", "Bearer w-t"), ("authorization", "Bearer nope")]
        bad_first = [("authorization", "Bearer nope"), ("authorization", "Bearer w-t")]
        with httpx.Client(base_url=writer_front.url) as raw:
            ok = raw.post(f"/v1/topics/{topic}/records", json={"records": [{"value": "x"}]}, headers=good_first)
            assert ok.status_code == 200, ok.text
            assert raw.post(f"/v1/topics/{topic}/records", json={"records": [{"value": "x"}]},
                            headers=bad_first).status_code == 401
            assert raw.get("/v1/topics", headers=good_first).status_code == 200
            assert raw.get("/v1/topics", headers=bad_first).status_code == 401
        assert writer_front.proc.poll() is None


# -- fuzzing ---------------------------------------------------------------------------------------------------
FUZZ_EXAMPLES = 40  # per round; make test runs one round, LAKELOG_FUZZ_SECONDS=N runs rounds for N seconds


def _valid_arrow_bodies() -> list[bytes]:
    table = pa.table({"key": pa.array(["k1", "k2", None]), "value": pa.array([b"a", None, b"ccc"]),
                      "headers": pa.array([[{"key": "h", "value": b"1"}], None, []], HEADER_TYPE),
                      "timestamp": pa.array([1_700_000_000_000, None, 1_700_000_000_001], pa.int64())})
    return [arrow_bytes(table), arrow_bytes(table, compression="lz4"), arrow_bytes(table, compression="zstd")]


@st.composite
def mutated_arrow(draw):
    body = bytearray(draw(st.sampled_from(_valid_arrow_bodies())))
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "int32", "int64", "truncate", "insert"]))
        at = draw(st.integers(0, len(body) - 1))
        if kind == "flip":
            body[at] ^= 1 << draw(st.integers(0, 7))
        elif kind in ("int32", "int64"):  # an offset, length, buffer size, dictionary id or codec field
            size = 4 if kind == "int32" else 8
            value = draw(st.sampled_from([0, 1, -1, 7, 255, 1 << 16, 1 << 30, (1 << 31) - 1, -(1 << 31)]))
            at = min(at, len(body) - size)
            body[at:at + size] = value.to_bytes(size, "little", signed=True)
        elif kind == "truncate":
            del body[at:]
            if not body:
                body = bytearray(b"\xff")
        else:
            body[at:at] = draw(st.binary(min_size=1, max_size=16))
    return bytes(body)


@pytest.mark.fuzz
def test_fuzz_mutated_arrow_streams(front, storage):
    with front.client() as http:
        topic = new_topic(http, partitions=1)
        baseline = rss_bytes(front.proc.pid)

        @settings(max_examples=FUZZ_EXAMPLES, deadline=None, database=None,
                  suppress_health_check=list(HealthCheck))
        @given(body=mutated_arrow())
        def check(body):
            before = storage_fingerprint(*storage, topic)
            r = http.post(f"/v1/topics/{topic}/records", content=body, headers=ARROW)
            assert r.status_code in (200, 400, 413), (r.status_code, r.text, hashlib.sha256(body).hexdigest())
            if r.status_code != 200:
                clean_error_body(r.json())
                assert r.json()["error_name"] in ("CORRUPT_MESSAGE", "INVALID_REQUEST", "MESSAGE_TOO_LARGE",
                                                  "INVALID_RECORD", "INVALID_TIMESTAMP"), r.text
                assert storage_fingerprint(*storage, topic) == before

        assert fuzz_rounds(check) >= 1
        assert http.get("/v1/health").status_code == 200 and front.proc.poll() is None
        assert rss_bytes(front.proc.pid) - baseline < 150 << 20


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(1 << 70), max_value=1 << 70) | st.floats(allow_nan=False)
    | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(
        st.sampled_from(["records", "key", "value", "headers", "timestamp", "partition", "offsets", "topic",
                         "offset", "metadata", "topics", "client_id", "member_id", "configs", "batches",
                         "producer_id", "producer_epoch", "base_sequence", "encoding"]) | st.text(max_size=5),
        children, max_size=5),
    max_leaves=25)


@pytest.mark.fuzz
def test_fuzz_json_bodies_never_500(front):
    with front.client() as http:
        topic = new_topic(http, partitions=1)
        group = f"fuzz-{uuid.uuid4().hex[:8]}"
        paths = [f"/v1/topics/{topic}/records", f"/v1/groups/{group}/offsets", f"/v1/groups/{group}/members",
                 "/v1/topics", "/v1/producers"]

        @settings(max_examples=FUZZ_EXAMPLES, deadline=None, database=None,
                  suppress_health_check=list(HealthCheck))
        @given(path=st.sampled_from(paths), value=json_values)
        def check(path, value):
            r = http.post(path, content=json.dumps(value).encode(), headers=JSON)
            assert r.status_code < 500, (path, value, r.text)
            if r.status_code >= 400:
                clean_error_body(r.json())

        assert fuzz_rounds(check) >= 1
        assert http.get("/v1/health").status_code == 200 and front.proc.poll() is None
