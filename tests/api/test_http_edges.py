"""The HTTP front's edges against hostile clients, on a real ``lakelog serve``: request heads are bounded (431),
JSON bodies are UTF-8 without a byte order mark (400, nothing written), a v3 produce answer of many records
is streamed a slice at a time instead of being held whole, a 404 that echoes the path is never sniffed, and a
browser's cross-origin write to ``/v1`` or ``/v3`` is refused (403) while the same request from a
non-browser client, or from the front's own origin, goes through.
"""

from __future__ import annotations

import json
import socket
import time
import uuid

import httpx
import pytest

from front_process import Front

MAX_HEAD = 16 << 10  # api.request_head.MAX_HEAD_BYTES
BOM = b"\xef\xbb\xbf"


@pytest.fixture(scope="module")
def front(tmp_path_factory):
    work = tmp_path_factory.mktemp("http-edges")
    f = Front(str(work / "root"), work, env={"LAKELOG_MAX_REQUEST_BYTES": str(16 << 20)}).start()
    yield f
    f.stop()


@pytest.fixture(scope="module")
def http(front):
    with front.client() as c:
        yield c


@pytest.fixture(scope="module")
def cid(http) -> str:
    return http.get("/v3/clusters").json()["data"][0]["cluster_id"]


def new_topic(http, partitions: int = 1) -> str:
    name = f"edge-{uuid.uuid4().hex[:8]}"
    assert http.post("/v1/topics", json={"name": name, "partitions": partitions}).status_code == 201
    return name


def high_water_mark(pid: int) -> int:
    """The process's peak resident memory so far, in bytes (VmHWM)."""
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def raw_request(front: Front, data: bytes, pieces: int = 1) -> bytes:
    """Send ``data`` in ``pieces`` on a fresh connection and read what comes back until the front closes."""
    with socket.create_connection(("127.0.0.1", front.port), timeout=30) as s:
        step = -(-len(data) // pieces)
        try:
            for i in range(0, len(data), step):
                s.sendall(data[i:i + step])
                if pieces > 1:
                    time.sleep(0.002)
        except OSError:  # refused before the client finished sending
            pass
        out = b""
        try:
            while chunk := s.recv(65536):
                out += chunk
        except OSError:
            pass
    return out


def test_request_heads_are_bounded(front, http):
    big = "a" * 200_000
    r = http.get("/v1/health", headers={"X-Big": big})
    assert r.status_code == 431 and f"{MAX_HEAD} bytes" in r.text
    r = http.get("/v1/health", params={"q": "x" * (MAX_HEAD + 1)})
    assert r.status_code == 431
    many = {f"X-H{i}": "v" * 100 for i in range(200)}
    assert http.get("/v1/health", headers=many).status_code == 431
    assert http.get("/v1/health", headers={"X-Fine": "a" * 8000}).status_code == 200
    # a header that never ends, dripped in 2 KiB pieces: refused once the head passes the bound, not held
    dripped = raw_request(front, b"GET /v1/health HTTP/1.1\r\nHost: x\r\nX-Drip: " + b"d" * 400_000, pieces=200)
    assert dripped.startswith(b"HTTP/1.1 431 "), dripped[:100]
    # pipelined small requests are not mistaken for one big head
    pipelined = raw_request(front, b"GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n" * 600
                            + b"GET /v1/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert pipelined.count(b"HTTP/1.1 200 OK") == 601
    assert http.get("/v1/health").status_code == 200


def test_json_bodies_are_utf8_without_a_byte_order_mark(http, cid):
    name = f"bom-{uuid.uuid4().hex[:6]}"
    body = json.dumps({"topic_name": name}).encode()
    for bad in (BOM + body, body.decode().encode("utf-16"), body.decode().encode("utf-16-le"),
                body.decode().encode("utf-32")):
        r = http.post(f"/v3/clusters/{cid}/topics", content=bad, headers={"content-type": "application/json"})
        assert r.status_code == 400 and r.json()["error_code"] == 400 and "UTF-8" in r.json()["message"], r.text
    r = http.post("/v1/topics", content=BOM + json.dumps({"name": name}).encode(),
                  headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["error_name"] == "INVALID_REQUEST", r.text
    assert http.get(f"/v1/topics/{name}").status_code == 404  # nothing was created
    topic = new_topic(http)
    r = http.put(f"/v3/clusters/{cid}/topics/{topic}/configs/retention.ms", content=BOM + b'{"value": "1"}',
                 headers={"content-type": "application/json"})
    assert r.status_code == 400
    r = http.post(f"/v3/clusters/{cid}/topics/{topic}/records", content=BOM + b'{"value": {"type": "STRING", '
                  b'"data": "x"}}', headers={"content-type": "application/json"})
    assert r.status_code == 400
    d = http.get(f"/v1/topics/{topic}").json()
    assert "retention.ms" not in d["overrides"] and d["partitions"][0]["high_watermark"] == 0
    # the same bodies without the mark are fine
    r = http.post(f"/v3/clusters/{cid}/topics", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 201, r.text


def test_v3_produce_answer_is_streamed_not_held(front, http, cid):
    """560,000 null records in an 8 MiB body: their 98 MiB of reports go out a slice at a time (chunked), so
    the front's peak memory grows by less than the answer's size."""
    topic = new_topic(http)
    record = b'{"value":null}\n'

    def produce(count: int) -> tuple[httpx.Response, bytes]:
        with http.stream("POST", f"/v3/clusters/{cid}/topics/{topic}/records", content=record * count,
                         headers={"content-type": "application/json"}) as r:
            return r, r.read()

    produce(20_000)  # warm: what every request allocates once is not counted below
    before = high_water_mark(front.proc.pid)
    count = (8 << 20) // len(record)
    r, answer = produce(count)
    grown = high_water_mark(front.proc.pid) - before
    assert r.status_code == 200 and "content-length" not in r.headers
    assert r.headers.get("transfer-encoding") == "chunked"
    lines = answer.split(b"\r\n")
    assert len(lines) == count + 1 and lines[-1] == b""
    first, last = json.loads(lines[0]), json.loads(lines[-2])
    assert (first["error_code"], first["offset"], last["offset"]) == (200, 20_000, 20_000 + count - 1)
    assert last["value"] is None
    assert len(answer) > 90 << 20
    # Held whole, the answer would be counted about three times (each report, their list, the joined body); the
    # decoded records cost some 60 MiB of the growth, the reports one slice.
    assert grown < len(answer), f"peak memory grew {grown >> 20} MiB for a {len(answer) >> 20} MiB answer"
    assert http.get(f"/v1/topics/{topic}").json()["partitions"][0]["high_watermark"] == 20_000 + count


def test_a_404_that_echoes_the_path_is_not_sniffed(http, cid):
    for path in ("/v1/<script>alert(1)</script>", f"/v3/clusters/{cid}/<img src=x>", "/nowhere<b>"):
        r = http.get(path)
        assert r.status_code == 404
        assert r.headers["x-content-type-options"] == "nosniff"
        assert r.headers["content-type"].startswith("application/json")


def test_cross_origin_writes_are_refused_on_the_apis(front, http, cid):
    name = f"xo-{uuid.uuid4().hex[:6]}"
    same_origin = f"http://127.0.0.1:{front.port}"
    refused = [({"Origin": "http://evil.example"}, "/v1"), ({"Sec-Fetch-Site": "cross-site"}, "/v1"),
               ({"Sec-Fetch-Site": "same-site", "Origin": same_origin}, "/v1"),  # another port: same site
               ({"Origin": "null"}, "/v1"), ({"Sec-Fetch-Site": "cross-site"}, "/v3")]
    for headers, api in refused:
        if api == "/v1":
            r = http.post("/v1/topics", json={"name": name}, headers=headers)
            assert r.status_code == 403 and r.json()["error_name"] == "INVALID_REQUEST", (headers, r.text)
        else:
            r = http.post(f"/v3/clusters/{cid}/topics", json={"topic_name": name}, headers=headers)
            assert r.status_code == 403 and r.json()["error_code"] == 403, (headers, r.text)
        r = http.post(f"/v1/topics/{name}/records", json={"records": [{"value": "x"}]}, headers=headers)
        assert r.status_code == 403
    assert http.get(f"/v1/topics/{name}").status_code == 404  # nothing was created or produced
    # reads are not writes; the front's own origin and non-browser clients write
    assert http.get("/v1/topics", headers={"Origin": "http://evil.example"}).status_code == 200
    assert http.post("/v1/topics", json={"name": name}, headers={"Sec-Fetch-Site": "same-origin"}).status_code == 201
    assert http.post(f"/v1/topics/{name}/records", json={"records": [{"value": "x"}]},
                     headers={"Origin": same_origin}).status_code == 200
    assert http.delete(f"/v1/topics/{name}", headers={"Sec-Fetch-Site": "none"}).status_code in (200, 204)
