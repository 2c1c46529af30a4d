"""The Kafka listener fuzzed over the wire: hypothesis over kio's generated schemas of every API and version the
listener advertises, half of the frames then mutated byte by byte (kafka_frames.mutated), sent to a real
``lakelog serve --kafka-listener``.

Properties, whatever the frame:

* the process stays up and keeps answering; its memory after the run is within ``RSS_BOUND`` of before;
* a frame is either refused (its connection closed) or answered with a response that parses at the asked
  version and carries no ``UNKNOWN_SERVER_ERROR`` (a handler meeting a value it did not expect) and no error
  message showing a stack trace or a server path;
* nothing is written: the fuzzing principal may only Describe (every write is denied after its frame is
  parsed), and the root's files are byte-identical after the run; before authentication, every frame but
  ApiVersions and SASL's closes its connection;
* Produce on an open front writes exactly what it acknowledges: the high watermark moves by the records of
  the partitions answered without error, by none for a refused frame.

``make test`` runs one short round of each; ``LAKELOG_FUZZ_SECONDS=N`` runs rounds for about N seconds per test
(docs/kafka-clients.md, "Fuzzing", has the counts of a long run).  Each test prints its counts.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import socket
import struct
import time
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.serial import entity_reader

from front_process import kafka_front_process, new_topic
from hostile_support import FUZZ_SECONDS, fuzz_rounds, rss_bytes
from kafka_frames import encode_frame, mutated, request_values, served_versions
from kafka_front.messages import request_type, response_type
from kafka_front.record_batch import compressed_batch, encode_batch

FUZZ_EXAMPLES = 60  # per round (make test: one round, < 30 s); LAKELOG_FUZZ_SECONDS=N runs rounds for about N seconds
pytestmark = [pytest.mark.fuzz, pytest.mark.timeout(600 + 2 * FUZZ_SECONDS)]  # a long run past pytest's 600 s
RSS_BOUND = 150 << 20
ANSWER_TIMEOUT_S = 2.0  # a long poll (Fetch, JoinGroup) the fuzzer gives up on: it closes the connection
PRODUCE, API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 0, 18, 17, 36
AUTH = {"tokens": [{"principal": "User:admin", "token": "admin-token"}], "super_users": ["User:admin"],
        "acls": [{"principal": "User:fuzz", "operation": "Describe", "resource_type": t, "resource_name": "*"}
                 for t in ("Topic", "Group", "TransactionalId")]
        + [{"principal": "User:fuzz", "operation": "Describe", "resource_type": "Cluster"}]}
SASL_USERS = {"users": [{"name": "fuzz", "password": "fuzz-pass"}]}


def root_fingerprint(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


class Peer:
    """One connection of the fuzzer; ``send`` returns the answer's bytes, or None if the front closed the
    connection (or kept a long poll past ANSWER_TIMEOUT_S, after which the fuzzer closes it)."""

    def __init__(self, bootstrap: str, login: bool) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=30)
        if login:
            assert self.send(encode_frame(SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})) is not None
            answer = self.send(encode_frame(SASL_AUTHENTICATE, 2, {"auth_bytes": b"\0fuzz\0fuzz-pass"}))
            assert answer is not None and struct.unpack_from(">h", answer, 5)[0] == 0

    def send(self, frame: bytes, timeout: float = ANSWER_TIMEOUT_S) -> bytes | None:
        try:
            self.sock.settimeout(30)
            self.sock.sendall(frame)
            self.sock.settimeout(timeout)
            head = self._exactly(4)
            return self._exactly(struct.unpack(">i", head)[0])
        except (OSError, ConnectionError):
            return None

    def _exactly(self, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("closed")
            out += chunk
        return bytes(out)

    def close(self) -> None:
        self.sock.close()


def unknown_server_errors(value) -> list[str]:
    """The fields of a parsed response (at any depth) that hold UNKNOWN_SERVER_ERROR (-1)."""
    found = []
    if dataclasses.is_dataclass(value):
        for f in dataclasses.fields(value):
            v = getattr(value, f.name)
            if f.name == "error_code" and int(v) == -1:
                found.append(type(value).__name__)
            found += unknown_server_errors(v)
    elif isinstance(value, tuple):
        for v in value:
            found += unknown_server_errors(v)
    return found


INTERNALS = re.compile(r'Traceback|File "|\.py\b|/(?:work|tmp|usr|home|root|proc)/')


def leaked_internals(value) -> list[str]:
    """The error messages of a parsed response (at any depth) that show a stack trace or a server path."""
    found = []
    if dataclasses.is_dataclass(value):
        for f in dataclasses.fields(value):
            v = getattr(value, f.name)
            if f.name == "error_message" and isinstance(v, str) and INTERNALS.search(v):
                found.append(v)
            found += leaked_internals(v)
    elif isinstance(value, tuple):
        for v in value:
            found += leaked_internals(v)
    return found


def parse_answer(api_key: int, version: int, answer: bytes):
    """The response at ``version`` (header v1 for flexible versions, but ApiVersions' v0); raises if it does
    not parse whole."""
    cls = response_type(api_key, version)
    offset = 4 + (1 if cls.__flexible__ and api_key != API_VERSIONS else 0)
    value, size = entity_reader(cls)(answer, offset)
    assert offset + size == len(answer), (api_key, version, offset + size, len(answer))
    return value


def named(topic: str, group: str) -> dict[str, st.SearchStrategy]:
    """Names the fuzzer uses: the front's topic and group half of the time, so requests reach real state."""
    topics = st.sampled_from([topic, topic, "no-such-topic"]) | st.text(max_size=8)
    return {"name": topics, "topic": topics, "topic_name": topics, "group_id": st.sampled_from([group, "g"]),
            "key": st.sampled_from([group, topic]), "transactional_id": st.sampled_from(["fuzz-tx", "t"])}


@st.composite
def frames(draw, names: dict, versions: list[tuple[int, int]]):
    api_key, version = draw(st.sampled_from(versions))
    values = draw(request_values(request_type(api_key, version), names=names))
    frame = encode_frame(api_key, version, values, correlation_id=draw(st.integers(0, 1 << 20)))
    if draw(st.booleans()):
        frame = draw(mutated(frame))
    return api_key, version, frame


@pytest.fixture(scope="module")
def secure(tmp_path_factory):
    d = tmp_path_factory.mktemp("fuzz-secure")
    (d / "auth.json").write_text(json.dumps(AUTH))
    (d / "sasl.json").write_text(json.dumps(SASL_USERS))
    f = kafka_front_process(str(d / "root"), d / "logs", args=("--sasl-file", str(d / "sasl.json")))
    f.auth_file = str(d / "auth.json")
    f.start()
    with f.client("admin-token") as http:
        f.topic = new_topic(http, partitions=2)
        assert http.post(f"/v1/topics/{f.topic}/records", json={"records": [{"value": "v"}] * 20}).status_code == 200
        f.group = "fuzz-group"
        assert http.post(f"/v1/groups/{f.group}/offsets", json={"offsets": [
            {"topic": f.topic, "partition": 0, "offset": 3}]}).status_code in (200, 204)
    yield f
    f.stop()


def _report(name: str, counts: Counter) -> None:
    print(f"\n{name}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))


def test_fuzz_every_api_as_a_principal_that_may_only_describe(secure):
    root = Path(secure.root)
    before = root_fingerprint(root)
    baseline = rss_bytes(secure.proc.pid)
    counts: Counter = Counter()
    peer: list[Peer | None] = [None]
    names = named(secure.topic, secure.group)

    @settings(max_examples=FUZZ_EXAMPLES, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(frames(names, served_versions()))
    def check(case):
        api_key, version, frame = case
        if peer[0] is None:
            peer[0] = Peer(secure.bootstrap, login=True)
        answer = peer[0].send(frame)
        counts["frames"] += 1
        if answer is None:
            counts["closed"] += 1
            peer[0].close()
            peer[0] = None
            return
        counts["answered"] += 1
        if struct.unpack_from(">i", answer)[0] != struct.unpack_from(">i", frame, 8)[0]:
            return  # an unsupported version's short answer or ApiVersions' v0: checked in test_kafka_errors
        if not _served(api_key, version):
            return
        response = parse_answer(api_key, version, answer)
        assert not unknown_server_errors(response), (api_key, version, frame.hex())
        assert not leaked_internals(response), (api_key, version, frame.hex())

    fuzz_rounds(check)
    if peer[0] is not None:
        peer[0].close()
    _report("describe-only principal", counts)
    assert counts["closed"] and counts["answered"]  # both kinds of frames were met
    assert secure.proc.poll() is None
    assert root_fingerprint(root) == before  # nothing written
    assert rss_bytes(secure.proc.pid) - baseline < RSS_BOUND


def test_fuzz_before_authentication(secure):
    counts: Counter = Counter()
    pre_auth = {API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE}
    names = named(secure.topic, secure.group)

    @settings(max_examples=FUZZ_EXAMPLES, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(frames(names, served_versions()))
    def check(case):
        api_key, version, frame = case
        peer = Peer(secure.bootstrap, login=False)
        try:
            answer = peer.send(frame)
        finally:
            peer.close()
        counts["frames"] += 1
        counts["closed" if answer is None else "answered"] += 1
        if struct.unpack_from(">h", frame, 4)[0] not in pre_auth:
            assert answer is None, (api_key, version)  # closed before its body was parsed

    fuzz_rounds(check)
    _report("before authentication", counts)
    assert secure.proc.poll() is None


def _served(api_key: int, version: int) -> bool:
    return (api_key, version) in SERVED


SERVED = set(served_versions())


@pytest.fixture(scope="module")
def kafka_front(tmp_path_factory):
    """This module's open front (conftest's ``http`` and ``bootstrap`` use it)."""
    f = kafka_front_process(str(tmp_path_factory.mktemp("fuzz-open") / "root"),
                            tmp_path_factory.mktemp("fuzz-open-logs"), env={"LAKELOG_MAX_REQUEST_BYTES": str(1 << 20)})
    f.start()
    yield f
    f.stop()


def _batches(draw) -> bytes:
    n = draw(st.integers(1, 5))
    raw = encode_batch(base_offset=0, offset_deltas=list(range(n)), timestamps=[int(time.time() * 1000)] * n,
                       keys=[None] * n, values=[draw(st.binary(max_size=30)) for _ in range(n)])
    return compressed_batch(raw, draw(st.sampled_from([0, 1, 2, 3, 4])))


def test_fuzz_produce_writes_exactly_what_it_acknowledges(kafka_front, http):
    topic = new_topic(http, partitions=1)
    baseline = rss_bytes(kafka_front.proc.pid)
    counts: Counter = Counter()

    def hw() -> int:
        return http.get(f"/v1/topics/{topic}").json()["partitions"][0]["high_watermark"]

    @settings(max_examples=FUZZ_EXAMPLES, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(st.data())
    def check(data):
        version = data.draw(st.integers(3, 9))
        records = b"".join(_batches(data.draw) for _ in range(data.draw(st.integers(1, 3))))
        frame = encode_frame(PRODUCE, version, {"acks": -1, "timeout": 10000, "topic_data": [
            {"name": topic, "partition_data": [{"index": 0, "records": records}]}]})
        if data.draw(st.booleans()):
            frame = data.draw(mutated(frame))
        acks = _acks(frame)  # a mutation may have made it 0: no answer, whatever is appended
        before = hw()
        peer = Peer(kafka_front.bootstrap, login=False)
        try:
            answer = peer.send(frame, timeout=1.0 if acks == 0 else 60.0)  # a produce answers after its commit
        finally:
            peer.close()
        counts["frames"] += 1
        if acks == 0:
            counts["acks=0"] += 1
            _settle(hw)  # what it appends (if anything) lands before the next frame is measured
            return
        if answer is None:
            counts["closed"] += 1
            assert hw() == before, frame.hex()
            return
        response = parse_answer(PRODUCE, version, answer)
        assert not unknown_server_errors(response) and not leaked_internals(response), frame.hex()
        accepted = [p for t in response.responses for p in t.partition_responses
                    if t.name == topic and p.index == 0 and p.error_code == 0]
        counts["written" if accepted else "refused"] += 1
        if not accepted:
            assert hw() == before, frame.hex()
        else:
            assert accepted[0].base_offset == before and hw() > before

    fuzz_rounds(check)
    _report("produce", counts)
    assert counts["written"] and counts["refused"] + counts["closed"]
    assert kafka_front.proc.poll() is None
    assert rss_bytes(kafka_front.proc.pid) - baseline < RSS_BOUND


def _settle(hw, quiet_s: float = 1.0, timeout_s: float = 30.0) -> None:
    """Wait until the high watermark has not moved for ``quiet_s``."""
    deadline, last, since = time.monotonic() + timeout_s, hw(), time.monotonic()
    while time.monotonic() - since < quiet_s and time.monotonic() < deadline:
        time.sleep(0.1)
        now = hw()
        if now != last:
            last, since = now, time.monotonic()


def _acks(frame: bytes) -> int | None:
    """The acks of a (possibly mutated) Produce frame, if it still reads as one."""
    from kafka_front.frame_check import check_header, check_request
    from kafka_front.messages import is_flexible, read_header, read_request

    api_key, version = struct.unpack_from(">hh", frame, 4)
    body = frame[4:]
    try:
        check_request(api_key, version, body, check_header(body, is_flexible(api_key, version)))  # before kio
        _, size = read_header(body, is_flexible(api_key, version))
        return read_request(api_key, version, body, size).acks
    except Exception:
        return None
