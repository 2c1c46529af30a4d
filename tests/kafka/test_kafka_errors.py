"""docs/kafka-clients.md's error table, one test per row, against a real listener with exact requests (kio types
through :class:`wire_client.WireClient`).  Rows that need a secured front are tested in ``test_kafka_sasl.py``
and ``test_kafka_acls.py``; the table and the tests must name the same rows."""

from __future__ import annotations

import re
import struct
import time
from pathlib import Path

import pytest

from crc32c import crc32c
from kafka_front.record_batch import compressed_batch, encode_batch
from wire_client import WireClient

DOC = Path(__file__).resolve().parents[2] / "docs" / "kafka-clients.md"
ELSEWHERE = {  # rows whose test needs the secured front of test_kafka_sasl.py
    "topic-authorization": "test_kafka_sasl.py::test_denied_topic_gets_topic_authorization_failed",
    "sasl-authentication-failed": "test_kafka_sasl.py::test_bad_credentials_fail_authentication",
    "unsupported-sasl-mechanism": "test_kafka_sasl.py::test_requests_before_authentication_close_the_connection",
    "before-authentication": "test_kafka_sasl.py::test_requests_before_authentication_close_the_connection",
    "cluster-authorization": "test_kafka_acls.py::test_acl_apis_need_the_cluster_and_file_acls_stay",
    "sasl-bare-token-failed": "test_kafka_acls.py::test_bare_token_exchange_after_a_v0_handshake",
    "sasl-frame-too-large": "test_hostile_clients.py::test_a_large_frame_before_authentication_closes_at_its_size",
}
PRODUCE, FETCH, LIST_OFFSETS, METADATA = 0, 1, 2, 3


def doc_rows() -> dict[str, int | None]:
    """Row id -> Kafka error code (None for rows that close the connection)."""
    text = DOC.read_text()
    table = text.split("## Errors", 1)[1]
    rows = {}
    for m in re.finditer(r"^\| `([a-z-]+)` \|[^|]*\|[^|]*\| (?:(\d+) `[A-Z_]+`|connection closed)", table, re.M):
        rows[m.group(1)] = int(m.group(2)) if m.group(2) else None
    assert rows, "no rows found in the error table"
    return rows


def batch(values: list[bytes], *, pid: int = -1, epoch: int = -1, seq: int = -1, stamps: list[int] | None = None,
          codec: int = 0) -> bytes:
    n = len(values)
    raw = encode_batch(base_offset=0, offset_deltas=list(range(n)), timestamps=stamps or [int(time.time() * 1000)] * n,
                       keys=[None] * n, values=values, producer_id=pid, producer_epoch=epoch, base_sequence=seq)
    return compressed_batch(raw, codec)


def produce(w: WireClient, topic: str, records: bytes, *, partition: int = 0, acks: int = -1):
    r = w.request(PRODUCE, 9, {"acks": acks, "timeout": 30000, "topic_data": [
        {"name": topic, "partition_data": [{"index": partition, "records": records}]}]})
    return r.responses[0].partition_responses[0]


def _hw(http, topic: str, partition: int = 0) -> int:
    return http.get(f"/v1/topics/{topic}").json()["partitions"][partition]["high_watermark"]


def row_unsupported_version(wire, topic, http):
    wire.send_raw(wire.frame(PRODUCE, 9, {"acks": -1, "timeout": 1000, "topic_data": []})[:6] + b"\x00\x63"
                  + wire.frame(PRODUCE, 9, {"acks": -1, "timeout": 1000, "topic_data": []})[8:])
    data = wire.read_frame()  # Produce v99: the header and UNSUPPORTED_VERSION
    assert struct.unpack_from(">h", data, 4)[0] == 35
    v = wire.request(18, 3, {"client_software_name": "t", "client_software_version": "1"})
    assert v.error_code == 0  # the connection stays usable
    wire.send_raw(wire.frame(18, 3, {"client_software_name": "t", "client_software_version": "1"})[:6] + b"\x00\x09"
                  + wire.frame(18, 3, {"client_software_name": "t", "client_software_version": "1"})[8:])
    data = wire.read_frame()  # ApiVersions v9: answered at v0 with the supported ranges
    assert struct.unpack_from(">h", data, 4)[0] == 35
    return 35


def row_unknown_api(wire, topic, http):
    payload = struct.pack(">hhi", 999, 0, 77) + b"\xff\xff"
    wire.send_raw(struct.pack(">i", len(payload)) + payload)
    data = wire.read_frame()
    assert struct.unpack_from(">i", data)[0] == 77
    code = struct.unpack_from(">h", data, 4)[0]
    assert wire.request(METADATA, 12, {"topics": None}).brokers[0].node_id == 1  # still usable
    return code


def row_malformed_frame(wire, topic, http):
    with WireClient(wire.sock.getpeername()[0] + ":" + str(wire.sock.getpeername()[1])) as other:
        wire.send_raw(struct.pack(">i", 1 << 30))  # a frame size beyond the limit
        assert wire.closed_by_server()
        good = other.frame(PRODUCE, 9, {"acks": -1, "timeout": 1000, "topic_data": [
            {"name": topic, "partition_data": [{"index": 0, "records": batch([b"x"])}]}]})
        with WireClient(other.sock.getpeername()[0] + ":" + str(other.sock.getpeername()[1])) as third:
            third.send_raw(good[:4] + good[4:12] + b"\xff" * (len(good) - 12))  # a body kio cannot parse
            assert third.closed_by_server()
        assert _hw(http, topic) == 0  # nothing written
        assert other.request(METADATA, 12, {"topics": None}).brokers  # other connections unaffected
    return None


def row_declared_length_past_frame(wire, topic, http):
    from kafka_frames import huge_count_frames, uvarint

    for frame in huge_count_frames().values():  # 27 and 51 bytes declaring 2**32-2 and 4e9 elements
        with WireClient(wire.sock.getpeername()[0] + ":" + str(wire.sock.getpeername()[1])) as other:
            other.send_raw(frame)
            assert other.closed_by_server()
    good = wire.frame(PRODUCE, 9, {"acks": -1, "timeout": 1000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": batch([b"x"])}]}]})
    at = good.index(topic.encode()) - 1  # the topic name's compact length, made 1 MiB: past the frame's end
    bad = good[:at] + uvarint((1 << 20) + 1) + good[at + 1:]
    wire.send_raw(struct.pack(">i", len(bad) - 4) + bad[4:])
    assert wire.closed_by_server()
    assert _hw(http, topic) == 0
    return None


def row_null_not_nullable(wire, topic, http):
    from kafka_frames import null_array_frames

    for frame in null_array_frames().values():
        with WireClient(wire.sock.getpeername()[0] + ":" + str(wire.sock.getpeername()[1])) as other:
            other.send_raw(frame)
            assert other.closed_by_server()
    assert wire.request(METADATA, 12, {"topics": None}).brokers  # null where Kafka allows it: every topic
    return None


def row_inconsistent_batch_offset_range(wire, topic, http):
    three = bytearray(batch([b"a", b"b", b"c"]))
    struct.pack_into(">i", three, 23, 2**31 - 1)  # last offset delta 2**31-1 for 3 records (the review's 9a)
    struct.pack_into(">I", three, 17, crc32c(bytes(three[21:])))
    r = produce(wire, topic, bytes(three))
    assert "Inconsistent batch offset range" in r.error_message
    assert _hw(http, topic) == 0
    return r.error_code


def row_unknown_topic(wire, topic, http):
    r = produce(wire, "no-such-topic-errors", batch([b"x"]))
    f = wire.request(FETCH, 12, {"max_wait": 0, "min_bytes": 1, "max_bytes": 1 << 20, "topics": [
        {"topic": "no-such-topic-errors", "partitions": [{"partition": 0, "fetch_offset": 0,
                                                          "partition_max_bytes": 1 << 20}]}]})
    assert f.responses[0].partitions[0].error_code == r.error_code
    return r.error_code


def row_unknown_partition(wire, topic, http):
    return produce(wire, topic, batch([b"x"]), partition=7).error_code


def row_corrupt_batch(wire, topic, http):
    good = bytearray(batch([b"x", b"y"]))
    good[-1] ^= 0xFF  # CRC no longer matches
    code = produce(wire, topic, bytes(good)).error_code
    assert _hw(http, topic) == 0
    return code


def row_decompression_bomb(wire, topic, http):
    bomb = batch([b"\0" * (8 << 20)], codec=4)  # the test front's frame limit is 2 MiB
    assert len(bomb) < 4096
    code = produce(wire, topic, bomb).error_code
    assert _hw(http, topic) == 0
    return code


def row_invalid_required_acks(wire, topic, http):
    return produce(wire, topic, batch([b"x"]), acks=2).error_code


def row_message_too_large(wire, topic, http):
    http.patch(f"/v1/topics/{topic}", json={"configs": {"max.message.bytes": "100"}})
    return produce(wire, topic, batch([b"x" * 500])).error_code


def row_invalid_timestamp(wire, topic, http):
    return produce(wire, topic, batch([b"x"], stamps=[-5])).error_code


def row_internal_topic(wire, topic, http):
    return produce(wire, "__consumer_offsets", batch([b"x"])).error_code


def row_out_of_order_sequence(wire, topic, http):
    init = wire.request(22, 4, {"transactional_id": None, "transaction_timeout": 60000, "producer_id": -1,
                                "producer_epoch": -1})
    assert produce(wire, topic, batch([b"a"], pid=init.producer_id, epoch=init.producer_epoch, seq=0)).error_code == 0
    code = produce(wire, topic, batch([b"c"], pid=init.producer_id, epoch=init.producer_epoch, seq=5)).error_code
    assert _hw(http, topic) == 1
    return code


def row_unknown_producer_id(wire, topic, http):
    return produce(wire, topic, batch([b"a"], pid=10 ** 12, epoch=0, seq=0)).error_code


def _init_txn(wire, tid: str, timeout: int = 60000):
    return wire.request(22, 4, {"transactional_id": tid, "transaction_timeout": timeout, "producer_id": -1,
                                "producer_epoch": -1})


def row_transaction_timeout(wire, topic, http):
    assert _init_txn(wire, f"tx-{topic}", 900_001).error_code == _init_txn(wire, f"tx-{topic}", 0).error_code
    return _init_txn(wire, f"tx-{topic}", 0).error_code


def row_txn_not_initialised(wire, topic, http):
    return wire.request(26, 3, {"transactional_id": f"never-{topic}", "producer_id": 5, "producer_epoch": 0,
                                "committed": True}).error_code


def row_txn_invalid_state(wire, topic, http):
    init = _init_txn(wire, f"tx-{topic}")
    return wire.request(26, 3, {"transactional_id": f"tx-{topic}", "producer_id": init.producer_id,
                                "producer_epoch": init.producer_epoch, "committed": True}).error_code


def row_txn_fenced(wire, topic, http):
    old = _init_txn(wire, f"tx-{topic}")
    new = _init_txn(wire, f"tx-{topic}")
    assert (new.producer_id, new.producer_epoch) == (old.producer_id, old.producer_epoch + 1)
    add = wire.request(24, 3, {"v3_and_below_transactional_id": f"tx-{topic}",
                               "v3_and_below_producer_id": old.producer_id,
                               "v3_and_below_producer_epoch": old.producer_epoch,
                               "v3_and_below_topics": [{"name": topic, "partitions": [0]}]})
    return add.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code


def row_txn_unknown_partition(wire, topic, http):
    init = _init_txn(wire, f"tx-{topic}")
    add = wire.request(24, 3, {"v3_and_below_transactional_id": f"tx-{topic}",
                               "v3_and_below_producer_id": init.producer_id,
                               "v3_and_below_producer_epoch": init.producer_epoch,
                               "v3_and_below_topics": [{"name": topic, "partitions": [0, 99]}]})
    codes = {r.partition_index: r.partition_error_code for r in add.results_by_topic_v3_and_below[0].results_by_partition}
    assert codes[0] == 55  # OPERATION_NOT_ATTEMPTED
    return codes[99]


def row_txn_batch_mismatch(wire, topic, http):
    init = _init_txn(wire, f"tx-{topic}")
    raw = _transactional(batch([b"a"], pid=init.producer_id, epoch=init.producer_epoch, seq=0))
    code = produce(wire, topic, raw).error_code  # no transactional_id in the request
    assert _hw(http, topic) == 0
    return code


def _commit_and_wait(wire, http, tid: str, init) -> None:
    """EndTxn(commit), then wait until the coordinator completed it (EndTxn answers once it is decided)."""
    assert wire.request(26, 3, {"transactional_id": tid, "producer_id": init.producer_id,
                                "producer_epoch": init.producer_epoch, "committed": True}).error_code == 0
    deadline = time.monotonic() + 10
    while http.get(f"/v1/transactions/{tid}").json()["state"] != "CompleteCommit":
        assert time.monotonic() < deadline, "the commit never completed"
        time.sleep(0.05)


def _transactional(raw: bytes) -> bytes:
    """``raw`` with the batch's isTransactional attribute bit (0x10) set and its CRC32C recomputed."""
    out = bytearray(raw)
    struct.pack_into(">h", out, 21, struct.unpack_from(">h", out, 21)[0] | 0x10)
    struct.pack_into(">I", out, 17, crc32c(bytes(out[21:])))
    return bytes(out)


def row_txn_corrupt_batch(wire, topic, http):
    tid = f"tx-{topic}"
    init = _init_txn(wire, tid)
    add = wire.request(24, 3, {"v3_and_below_transactional_id": tid, "v3_and_below_producer_id": init.producer_id,
                               "v3_and_below_producer_epoch": init.producer_epoch,
                               "v3_and_below_topics": [{"name": topic, "partitions": [0]}]})
    assert add.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 0
    bad = bytearray(_transactional(batch([b"x", b"y"], pid=init.producer_id, epoch=init.producer_epoch, seq=0)))
    bad[-1] ^= 0xFF  # CRC no longer matches
    r = wire.request(PRODUCE, 9, {"transactional_id": tid, "acks": -1, "timeout": 30000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": bytes(bad)}]}]})
    code = r.responses[0].partition_responses[0].error_code
    _commit_and_wait(wire, http, tid, init)  # nothing was staged: the commit appends nothing
    assert _hw(http, topic) == 0
    return code


def row_txn_offset_commit_invalid(wire, topic, http):
    tid, group = f"tx-{topic}", f"g-{topic}"
    init = _init_txn(wire, tid)
    ids = {"transactional_id": tid, "producer_id": init.producer_id, "producer_epoch": init.producer_epoch}
    assert wire.request(25, 3, {**ids, "group_id": group}).error_code == 0
    r = wire.request(28, 3, {**ids, "group_id": group, "generation_id": -1, "member_id": "",
                             "group_instance_id": None, "topics": [{"name": topic, "partitions": [
                                 {"partition_index": 0, "committed_offset": -5, "committed_leader_epoch": -1,
                                  "committed_metadata": None}]}]})
    code = r.topics[0].partitions[0].error_code
    _commit_and_wait(wire, http, tid, init)  # nothing was staged: the commit commits no offset
    assert http.get(f"/v1/groups/{group}/offsets").json()["offsets"] == []
    return code


def row_offset_out_of_range(wire, topic, http):
    f = wire.request(FETCH, 12, {"max_wait": 0, "min_bytes": 1, "max_bytes": 1 << 20, "topics": [
        {"topic": topic, "partitions": [{"partition": 0, "fetch_offset": 50, "partition_max_bytes": 1 << 20}]}]})
    p = f.responses[0].partitions[0]
    assert (p.high_watermark, p.log_start_offset) == (-1, -1)  # Kafka's answer with an error
    return p.error_code


def row_coordinator_key_type(wire, topic, http):
    return wire.request(10, 4, {"key_type": 2, "coordinator_keys": ["tx"]}).coordinators[0].error_code


def row_inconsistent_group_protocol(wire, topic, http):
    group = f"g-proto-{topic}"  # a consumer group (an HTTP member): a classic member must speak `consumer` in it
    r = http.post(f"/v1/groups/{group}/members", json={"topics": [topic], "session_timeout_ms": 10_000})
    assert r.status_code == 200, r.text
    return wire.request(11, 7, {"group_id": group, "session_timeout": 10000, "rebalance_timeout": 10000,
                                "member_id": "", "protocol_type": "connect",
                                "protocols": [{"name": "range", "metadata": b""}]}).error_code


def row_unknown_member(wire, topic, http):
    return wire.request(12, 4, {"group_id": f"g-{topic}", "generation_id": 1, "member_id": "nobody"}).error_code


def row_fenced_instance_id(wire, topic, http):
    group = f"g-static-{topic}"
    join = {"group_id": group, "session_timeout": 10_000, "rebalance_timeout": 10_000, "member_id": "",
            "group_instance_id": "worker-1", "protocol_type": "consumer", "protocols": [{"name": "range",
                                                                                        "metadata": b"md"}]}
    old = wire.request(11, 5, join)
    assert old.error_code == 0 and old.leader == old.member_id
    assert wire.request(14, 3, {"group_id": group, "generation_id": old.generation_id, "member_id": old.member_id,
                                "group_instance_id": "worker-1", "assignments": []}).error_code == 0
    new = wire.request(11, 5, join)  # a restart with the same group.instance.id replaces the first member
    assert new.error_code == 0 and new.member_id != old.member_id and new.generation_id == old.generation_id
    r = wire.request(8, 7, {"group_id": group, "generation_id_or_member_epoch": old.generation_id,
                            "member_id": old.member_id, "group_instance_id": "worker-1", "topics": [
                                {"name": topic, "partitions": [{"partition_index": 0, "committed_offset": 0,
                                                                "committed_leader_epoch": -1,
                                                                "committed_metadata": None}]}]})
    assert http.get(f"/v1/groups/{group}/offsets").json()["offsets"] == []  # nothing committed
    return r.topics[0].partitions[0].error_code


def row_topic_already_exists(wire, topic, http):
    r = wire.request(19, 7, {"topics": [{"name": topic, "num_partitions": 1, "replication_factor": 1}],
                             "timeout": 10000})
    return r.topics[0].error_code


def row_invalid_partitions(wire, topic, http):
    r = wire.request(37, 3, {"topics": [{"name": topic, "count": 1, "assignments": None}], "timeout": 10000})
    return r.results[0].error_code


def _create_topic(wire, name: str, *, partitions: int = 1, rf: int = 1, assignments=(), configs=()) -> int:
    r = wire.request(19, 7, {"topics": [{"name": name, "num_partitions": partitions, "replication_factor": rf,
                                         "assignments": list(assignments), "configs": list(configs)}],
                             "timeout_ms": 30000, "validate_only": False})
    return r.topics[0].error_code


def row_invalid_config(wire, topic, http):
    name = f"{topic}-bad"
    code = _create_topic(wire, name, configs=[{"name": "flush.ms", "value": "-1"}])
    assert http.get(f"/v1/topics/{name}").status_code == 404
    r = wire.request(44, 1, {"resources": [{"resource_type": 2, "resource_name": topic, "configs": [
        {"name": "retention.ms", "config_operation": 2, "value": "1"}]}], "validate_only": False})  # APPEND
    assert r.responses[0].error_code == code
    return code


def row_invalid_replication_factor(wire, topic, http):
    return _create_topic(wire, f"{topic}-rf", rf=3)


def row_invalid_replica_assignment(wire, topic, http):
    return _create_topic(wire, f"{topic}-ra", partitions=-1, rf=-1,
                         assignments=[{"partition_index": 0, "broker_ids": [2]}])


def row_read_only_broker_config(wire, topic, http):
    r = wire.request(33, 2, {"resources": [{"resource_type": 4, "resource_name": "1", "configs": [
        {"name": "num.partitions", "value": "3"}]}], "validate_only": False})
    return r.responses[0].error_code


def row_security_disabled(wire, topic, http):
    r = wire.request(30, 3, {"creations": [{"resource_type": 2, "resource_name": topic, "resource_pattern_type": 3,
                                            "principal": "User:a", "host": "*", "operation": 3,
                                            "permission_type": 3}]})
    return r.results[0].error_code


def row_scram_credential_not_found(wire, topic, http):
    r = wire.request(50, 0, {"users": [{"name": f"nobody-{topic}"}]})
    return r.results[0].error_code


def row_duplicate_resource(wire, topic, http):
    r = wire.request(50, 0, {"users": [{"name": topic}, {"name": topic}]})
    return r.results[0].error_code


def row_unacceptable_credential(wire, topic, http):
    r = wire.request(51, 0, {"deletions": [], "upsertions": [{"name": topic, "mechanism": 1, "iterations": 1000,
                                                             "salt": b"salt", "salted_password": b"x" * 32}]})
    return r.results[0].error_code


def row_invalid_quota(wire, topic, http):
    r = wire.request(49, 1, {"entries": [{"entity": [{"entity_type": "client-id", "entity_name": topic}],
                                          "ops": [{"key": "producer_byte_rate", "value": 1.5, "remove": False}]}],
                             "validate_only": False})
    return r.entries[0].error_code


def row_controller_endpoints(wire, topic, http):
    r = wire.request(60, 1, {"include_cluster_authorized_operations": False, "endpoint_type": 2})
    return r.error_code


ROWS = {name[4:].replace("_", "-"): fn for name, fn in list(globals().items()) if name.startswith("row_")}


def test_table_and_tests_name_the_same_rows():
    assert set(doc_rows()) == set(ROWS) | set(ELSEWHERE)


@pytest.mark.parametrize("row", sorted(ROWS))
def test_error_row(row, wire, topic, http):
    expected = doc_rows()[row]
    got = ROWS[row](wire, topic, http)
    assert got == expected, f"{row}: expected {expected}, got {got}"
