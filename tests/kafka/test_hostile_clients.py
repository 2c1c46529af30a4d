"""Hostile Kafka clients against a real ``lakelog serve --kafka-listener``: the review's findings 1, 2, 3's
memory, 4, 5 and 8a (finding 3's answer sizes and Kafka's fetch limits are in test_fetch_limits.py; 9a is a
row of the error table), and the listener's memory across 10,000 abusive connections.

Each finding's test failed on the code before the fix: the process aborted (1), memory grew by gigabytes and
was never returned (2, 4), every pipelined Fetch's answer was built and queued (3), a 60 MiB frame was read
whole before the login (5), a null array reached a handler (8a).  Every test ends with the front alive and
answering.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import struct
import time
from pathlib import Path

import pytest
from crc32c import crc32c

from front_process import kafka_front_process, new_topic
from hostile_support import rss_bytes
from kafka_frames import encode_frame, huge_count_frames, null_array_frames
from kafka_front import compression
from kafka_front.connection import MAX_HELD_BYTES, MAX_IN_FLIGHT
from wire_client import WireClient

PRODUCE, FETCH, METADATA, API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 0, 1, 3, 18, 17, 36
CORRUPT_MESSAGE = 2
SASL_USERS = {"users": [{"name": "carol", "password": "carol-pass"}]}
AUTH = {"tokens": [{"principal": "User:admin", "token": "admin-token"}], "super_users": ["User:admin"],
        "acls": [{"principal": "User:carol", "operations": ["Read", "Describe"], "resource_type": "Topic",
                  "resource_name": "*"}]}
SMALL_SASL_LIMIT = 65_536  # the abuse front's --sasl-server-max-receive-size


def _secure_front(tmp_path_factory, name: str, *args: str):
    d = tmp_path_factory.mktemp(name)
    (d / "auth.json").write_text(json.dumps(AUTH))
    (d / "sasl.json").write_text(json.dumps(SASL_USERS))
    f = kafka_front_process(str(d / "root"), d / "logs", args=("--sasl-file", str(d / "sasl.json"), *args))
    f.auth_file = str(d / "auth.json")
    return f.start()


@pytest.fixture(scope="module")
def kafka_front(tmp_path_factory):
    """This module's open front (conftest's ``http`` and ``bootstrap`` use it), at the default frame limit
    (64 MiB: what the review's Produce findings used)."""
    f = kafka_front_process(str(tmp_path_factory.mktemp("hostile-clients") / "root"),
                            tmp_path_factory.mktemp("hostile-clients-logs"))
    f.start()
    yield f
    f.stop()


@pytest.fixture(scope="module")
def secure(tmp_path_factory):
    f = _secure_front(tmp_path_factory, "hostile-secure")
    yield f
    f.stop()


def _alive(front) -> None:
    assert front.proc.poll() is None, front.log_tail()
    with WireClient(front.bootstrap) as w:
        assert w.request(API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"}).api_keys


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _reset(sock: socket.socket) -> None:
    """Close with a TCP reset (SO_LINGER 0), as the review's clients did."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def _settled(front, http) -> None:
    """Wait until the front holds no Kafka connection (it has seen every reset and finished what they left)."""
    def gauge(name: str) -> float:
        text = http.get("/metrics").text
        return float(re.search(rf"^{name} (\S+)$", text, re.M).group(1))

    deadline = time.monotonic() + 120
    while gauge("lakelog_kafka_connections") or gauge("lakelog_kafka_held_bytes"):
        assert time.monotonic() < deadline, "the front still holds Kafka connections"
        time.sleep(0.5)


# -- finding 1: one frame of a few dozen bytes aborted the whole process, before authentication ---------------
@pytest.mark.parametrize("name", sorted(huge_count_frames()))
def test_tiny_frames_declaring_huge_counts_close_only_their_connection(name, secure, kafka_front):
    frame = huge_count_frames()[name]
    for front in (secure, kafka_front):  # unauthenticated (closed before the body is parsed), and open
        with WireClient(front.bootstrap) as w:
            w.send_raw(frame)
            assert w.closed_by_server()
        _alive(front)


# -- finding 2: a reset connection kept its queued answers forever ----------------------------------------------
@pytest.fixture(scope="module")
def filled(kafka_front):
    """A one-partition topic of 16 MB (160 records of 100 kB) and a Fetch v12 frame asking for all of it."""
    with kafka_front.client() as http:
        topic = new_topic(http, partitions=1)
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": kafka_front.bootstrap, "linger.ms": 50, "message.max.bytes": 2 << 20})
    for _ in range(160):
        p.produce(topic, os.urandom(100_000), partition=0)
    assert p.flush(60) == 0
    del p  # its connections closed: the listener's gauges then count only the tests'
    fetch = encode_frame(FETCH, 12, {"max_wait": 0, "min_bytes": 1, "max_bytes": 16 << 20, "topics": [
        {"topic": topic, "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 16 << 20}]}]})
    with WireClient(kafka_front.bootstrap) as w:  # one answer read whole
        w.send_raw(fetch)
        assert len(w.read_frame()) > 15 << 20
    return topic, fetch


def test_reset_connections_return_their_memory(kafka_front, http, filled):
    _, fetch = filled

    def rounds(n: int) -> None:  # the review's rounds of 20 pipelined 16 MiB Fetches, never read, then a reset
        for _ in range(n):
            host, port = kafka_front.bootstrap.rsplit(":", 1)
            s = socket.create_connection((host, int(port)))
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.sendall(fetch * 20)
            time.sleep(1.5)  # the front reads and answers what it admits
            _reset(s)

    rounds(2)  # the allocator's high-water mark for this load
    _settled(kafka_front, http)
    baseline = rss_bytes(kafka_front.proc.pid)
    rounds(8)
    _settled(kafka_front, http)  # the listener holds nothing: every reset connection released its answers
    grown = rss_bytes(kafka_front.proc.pid) - baseline
    # a listener that keeps the answers of reset connections holds +256 MiB a round (2 GiB over 8); what the
    # allocator keeps of freed answers varies with the machine's load, a fraction of one round
    assert grown < 768 << 20, f"RSS grew by {grown >> 20} MiB"
    _alive(kafka_front)


# -- finding 3 (memory): 4 connections x 16 pipelined Fetches asking for 2**31-1 bytes peaked at 6.9 GB ---------
def _peak_rss_reset(pid: int) -> None:
    Path(f"/proc/{pid}/clear_refs").write_text("5")  # resets VmHWM, the peak RSS, to the current RSS


def _peak_rss(pid: int) -> int:
    return int(re.search(r"VmHWM:\s+(\d+) kB", Path(f"/proc/{pid}/status").read_text()).group(1)) * 1024


def test_pipelined_unbounded_fetches_hold_a_bounded_peak(kafka_front, http, filled):
    """Each connection holds at most MAX_HELD_BYTES of answers and Fetch reservations (a Fetch reserves
    fetch.max.bytes, 55 MiB, until its answer is built), so clients that ask for everything and read nothing
    raise the peak by at most twice that per connection (an answer's records and its encoded bytes, while it is
    built).  Without the bound the 64 answers of 16 MB are all built and queued: over 1 GiB."""
    topic, _ = filled
    huge = encode_frame(FETCH, 12, {"max_wait": 0, "min_bytes": 1, "max_bytes": 2**31 - 1, "topics": [
        {"topic": topic, "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 2**31 - 1}]}]})
    pid = kafka_front.proc.pid
    _settled(kafka_front, http)
    baseline = rss_bytes(pid)
    _peak_rss_reset(pid)
    host, port = kafka_front.bootstrap.rsplit(":", 1)
    socks = []
    for _ in range(4):
        s = socket.create_connection((host, int(port)))
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.sendall(huge * 16)
        socks.append(s)
    deadline = time.monotonic() + 60
    while True:  # the connections fill up to their bound, then stop being read
        held = float(re.search(r"^lakelog_kafka_held_bytes (\S+)$", http.get("/metrics").text, re.M).group(1))
        if held >= 4 * (15 << 20) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    time.sleep(1.0)
    held = float(re.search(r"^lakelog_kafka_held_bytes (\S+)$", http.get("/metrics").text, re.M).group(1))
    assert held <= 4 * MAX_HELD_BYTES, held
    for s in socks:
        _reset(s)
    _settled(kafka_front, http)
    peak = _peak_rss(pid) - baseline
    # what is held (the gauge above) plus, while an answer is encoded, one copy of its records beside its bytes
    assert peak < 2 * 4 * MAX_HELD_BYTES, f"peak RSS {peak >> 20} MiB above the baseline"
    _alive(kafka_front)


# -- finding 4: a 6 KB zstd batch decompressed to 64 MiB and walked 9.59 M records in Python ------------------
def test_a_small_compressed_batch_is_refused_at_its_first_bad_record(kafka_front, http):
    topic = new_topic(http, partitions=1)
    limit = 64 << 20  # the front's frame limit, what one request may decode to
    record = b"\x0c\x00\x00\x00\x01\x00\x00"  # length 6, attributes, timestamp and offset deltas 0, null key, b""
    count = limit // len(record)
    body = compression.compress(compression.ZSTD, record * count)
    tail = struct.pack(">hiqqqhii", compression.ZSTD, count - 1, 0, 0, -1, -1, -1, count) + body
    batch = struct.pack(">qiibI", 0, len(tail) + 9, 0, 2, crc32c(tail)) + tail
    assert len(batch) < 8000
    pid = kafka_front.proc.pid
    rss, cpu = rss_bytes(pid), _cpu_seconds(pid)
    with WireClient(kafka_front.bootstrap) as w:
        r = w.request(PRODUCE, 9, {"acks": -1, "timeout": 30000, "topic_data": [
            {"name": topic, "partition_data": [{"index": 0, "records": batch}]}]})
    answer = r.responses[0].partition_responses[0]
    assert answer.error_code == CORRUPT_MESSAGE and "record 1 has offset delta 0" in answer.error_message
    used = _cpu_seconds(pid) - cpu
    assert used < 1.0, f"{used:.2f} CPU seconds"  # before the fix: 5.1 s
    assert rss_bytes(pid) - rss < 100 << 20  # before: +1.4 GB
    assert http.get(f"/v1/topics/{topic}").json()["partitions"][0]["high_watermark"] == 0
    _alive(kafka_front)


# -- finding 5: frames up to 64 MiB were read whole before the SASL check --------------------------------------
def test_a_large_frame_before_authentication_closes_at_its_size(secure):
    with WireClient(secure.bootstrap) as w:
        w.send_raw(struct.pack(">i", 60 << 20) + b"\x00\x12\x00\x03")  # an ApiVersions frame of 60 MiB, begun
        assert w.closed_by_server(timeout=10)  # at once: the 60 MiB were never waited for
    with WireClient(secure.bootstrap) as w:  # at the limit (512 KiB): answered
        frame = encode_frame(API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
        padded = frame + b"\x00" * (524_288 - len(frame) + 4)  # bytes after the body are ignored, as by Kafka
        w.send_raw(struct.pack(">i", len(padded) - 4) + padded[4:])
        w.correlation = 7  # encode_frame's
        assert w.response(API_VERSIONS, 3).api_keys
    _alive(secure)


# -- finding 8a: null arrays reached handlers as None ----------------------------------------------------------
@pytest.mark.parametrize("name", sorted(null_array_frames()))
def test_null_arrays_close_the_connection_as_kafka_does(name, kafka_front):
    with WireClient(kafka_front.bootstrap) as w:
        w.send_raw(null_array_frames()[name])
        assert w.closed_by_server()  # Kafka's parser refuses the frame: "non-nullable field ... null"
    _alive(kafka_front)


# -- memory across 10,000 abusive connections -----------------------------------------------------------------
CONNECTIONS = 10_000
CONCURRENCY = 200
RSS_BOUND = 64 << 20  # growth allowed from after a warm-up of 1,000 connections to the end


def _abuses(topic: str) -> dict[str, tuple[int, list[bytes]]]:
    """Each kind of abusive connection: (weight in the mix, what it sends: a list of writes, each after the
    answer to the one before); it then resets the connection."""
    api_versions = encode_frame(API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
    login = [encode_frame(SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"}),
             encode_frame(SASL_AUTHENTICATE, 2, {"auth_bytes": b"\0carol\0carol-pass"})]
    fetch = encode_frame(FETCH, 12, {"max_wait": 5000, "min_bytes": 1 << 30, "max_bytes": 1 << 20, "topics": [
        {"topic": topic, "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}]})
    over = api_versions + b"\x00" * (SMALL_SASL_LIMIT + 1)
    return {
        "huge-count": (4, [huge_count_frames()["metadata-v12"]]),
        "oversized": (4, [struct.pack(">i", 600 << 20) + b"\x00\x12\x00\x03"]),
        "over-sasl-limit": (4, [struct.pack(">i", len(over) - 4) + over[4:]]),
        "half-frame": (4, [api_versions[:9]]),
        "unread-api-versions": (4, [api_versions * 3]),
        "null-array": (2, [*login, null_array_frames()["describe-groups-v5"]]),
        # finding 2's pattern: more pipelined long polls than a connection admits, never read
        "login-then-unread-fetches": (1, [*login, fetch * (MAX_IN_FLIGHT + 4)]),
    }


async def _abuse(host: str, port: int, writes: list[bytes]) -> None:
    try:
        reader, writer = await asyncio.open_connection(host, port)
    except OSError:
        return
    try:
        for i, data in enumerate(writes):
            writer.write(data)
            await writer.drain()
            if i < len(writes) - 1:  # a login step: its answer, before what follows it
                await asyncio.wait_for(reader.read(1 << 16), 5)
    except (OSError, asyncio.TimeoutError):
        pass
    finally:
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.close()


async def _run_abuses(bootstrap: str, kinds: list[list[bytes]], n: int) -> None:
    host, port = bootstrap.rsplit(":", 1)
    gate = asyncio.Semaphore(CONCURRENCY)

    async def one(i: int) -> None:
        async with gate:
            await _abuse(host, int(port), kinds[i % len(kinds)])

    await asyncio.gather(*(one(i) for i in range(n)))




def test_rss_stays_flat_across_10000_abusive_connections(tmp_path_factory):
    """The issue's bound, at its count: a leak of a few KiB per connection (the review's 49 MB over 3,000
    ApiVersions connections) only shows above the allocator's noise after thousands of connections, so no
    smaller run proves it.  Its cost is the front's few milliseconds of CPU per connection."""
    front = _secure_front(tmp_path_factory, "hostile-abuse", "--sasl-server-max-receive-size", str(SMALL_SASL_LIMIT))
    try:
        with front.client("admin-token") as http:
            topic = new_topic(http, partitions=1)
            assert http.post(f"/v1/topics/{topic}/records", json={"records": [{"value": "x" * 100}] * 10}
                             ).status_code == 200
            kinds = [writes for weight, writes in _abuses(topic).values() for _ in range(weight)]
            asyncio.run(_run_abuses(front.bootstrap, kinds, 1_000))  # warm-up: caches, pools, arenas
            _settled(front, http)
            baseline = rss_bytes(front.proc.pid)
            asyncio.run(_run_abuses(front.bootstrap, kinds, CONNECTIONS))
            _settled(front, http)
            grown = rss_bytes(front.proc.pid) - baseline
            assert grown < RSS_BOUND, f"RSS grew by {grown >> 20} MiB across {CONNECTIONS} connections"
        _alive(front)
    finally:
        front.stop()
    log = front.log_path.read_text()
    assert "Task was destroyed but it is pending" not in log
    assert "Traceback" not in log
