"""Fetch, differentially: every byte limit (``max_bytes``, ``partition_max_bytes``) and the long poll
(``min_bytes`` with ``max_wait_ms``) at the protocol level, and librdkafka consumers configured with
``fetch.max.bytes``, ``max.partition.fetch.bytes``, ``fetch.min.bytes`` and ``fetch.wait.max.ms`` -- against Apache
Kafka and lakelog.

The wire scenarios write each record as its own batch of about 1 KB (kafka-python's encoder) and choose limits
halfway between record counts, so that Kafka's whole batches and lakelog's own batching (the ``batches``
difference) return the same records.
"""

from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import Consumer, TopicPartition
from kafka.record.memory_records import MemoryRecords

from compat_support import TIMEOUT, Target, assert_same, batch, create_topic, deliver, produce_wire, request, run_both, unique
from wire_client import WireClient

PARTITIONS, PER_PARTITION, VALUE = 3, 4, 1000
B = 1070  # about one 1-record batch of a 1000-byte value: Kafka's batch 1,069-1,071 bytes, lakelog's records less
ALLOW = {"**/record_bytes": "batches"}


def fill(target: Target, topic: str) -> None:
    create_topic(target, topic, PARTITIONS)
    with WireClient(target.bootstrap) as w:
        for p in range(PARTITIONS):
            for i in range(PER_PARTITION):
                data = batch(-1, -1, -1, [f"p{p}-{i}-".encode().ljust(VALUE, b".")])
                assert produce_wire(w, topic, data, p)[0] == 0


def fetch(w: WireClient, topic: str, *, offsets=None, max_bytes=1 << 30, partition_max_bytes=1 << 30,
          min_bytes=1, max_wait_ms=0, isolation=0, order=None) -> dict:
    """One Fetch v12 and what it answered per partition: error, watermarks, log start offset, aborted
    transactions and the offsets of the records returned (decoded by kafka-python)."""
    order = order or list(range(PARTITIONS))
    offsets = offsets or {}
    started = time.monotonic()
    r = request(w, 1, 12, {"replica_id": -1, "max_wait": max_wait_ms, "min_bytes": min_bytes,
                          "max_bytes": max_bytes, "isolation_level": isolation, "session_id": 0, "session_epoch": -1,
                          "topics": [{"topic": topic, "partitions": [
                              {"partition": p, "current_leader_epoch": -1, "fetch_offset": offsets.get(p, 0),
                               "last_fetched_epoch": -1, "log_start_offset": -1,
                               "partition_max_bytes": partition_max_bytes} for p in order]}],
                          "forgotten_topics_data": [], "rack_id": ""})
    elapsed = time.monotonic() - started
    out = {"error": int(r.error_code), "partitions": {}}
    for t in r.responses:
        for p in t.partitions:
            offs, mr = [], MemoryRecords(bytes(p.records or b""))
            while mr.has_next():
                b = mr.next_batch()
                if b is None:
                    break
                offs.extend(rec.offset for rec in b)
            out["partitions"][str(p.partition_index)] = {
                "error": int(p.error_code), "high_watermark": p.high_watermark,
                "last_stable_offset": p.last_stable_offset, "log_start_offset": p.log_start_offset,
                "aborted": p.aborted_transactions, "offsets": offs, "record_bytes": len(p.records or b"")}
    out["elapsed"] = elapsed
    return out


LIMITS = {  # name -> the Fetch's limits (B: about one record's batch)
    "no_limits": {},
    "max_bytes_1": {"max_bytes": 1},
    "max_bytes_2.5": {"max_bytes": int(2.5 * B)},
    "max_bytes_6.5": {"max_bytes": int(6.5 * B)},
    "partition_max_1": {"partition_max_bytes": 1},
    "partition_max_1.5": {"partition_max_bytes": int(1.5 * B)},
    "partition_max_2.5_max_3.5": {"partition_max_bytes": int(2.5 * B), "max_bytes": int(3.5 * B)},
    "max_bytes_0": {"max_bytes": 0},
    "reversed_order_2.5": {"max_bytes": int(2.5 * B), "order": [2, 1, 0]},
    "from_offset_2": {"offsets": {0: 2, 1: 3, 2: 4}, "max_bytes": int(1.5 * B)},
    "out_of_range": {"offsets": {0: 100}},
}


def limits(target: Target, topic: str) -> dict:
    fill(target, topic)
    with WireClient(target.bootstrap) as w:
        out = {name: fetch(w, topic, **kw) for name, kw in LIMITS.items()}
    for o in out.values():
        assert o.pop("elapsed") < 10
    return out


def test_fetch_byte_limits(targets):
    kafka, lakelog = run_both(targets, limits, unique("limits"))
    assert kafka["max_bytes_1"]["partitions"]["0"]["offsets"] == [0]
    assert_same(kafka, lakelog, ALLOW)


def long_poll(target: Target, topic: str) -> dict:
    """``min_bytes``/``max_wait_ms``: an empty partition waits the whole wait; more than there is waits too and
    then answers what there is; a record produced during the wait answers at once."""
    fill(target, topic)
    end = {p: PER_PARTITION for p in range(PARTITIONS)}
    out = {}
    with WireClient(target.bootstrap) as w:
        r = fetch(w, topic, offsets=end, max_wait_ms=1500)
        out["empty_waits"] = [r["elapsed"] >= 1.4, r["partitions"]]
        r = fetch(w, topic, min_bytes=100 * B, max_wait_ms=1500)
        out["too_little_waits"] = [r["elapsed"] >= 1.4, r["partitions"]]
        r = fetch(w, topic, min_bytes=2 * B, max_wait_ms=5000)
        out["enough_answers_at_once"] = [r["elapsed"] < 2.5, r["partitions"]]

        def later():
            time.sleep(0.5)
            with WireClient(target.bootstrap) as w2:
                produce_wire(w2, topic, batch(-1, -1, -1, [b"late"]))

        t = threading.Thread(target=later)
        t.start()
        r = fetch(w, topic, offsets=end, max_wait_ms=8000)
        t.join()
        out["woken_by_produce"] = [0.4 <= r["elapsed"] < 6, r["partitions"]]
    for o in out.values():
        for p in o[1].values():
            p.pop("record_bytes")
    return out


def test_fetch_long_poll(targets):
    kafka, lakelog = run_both(targets, long_poll, unique("poll"), parallel=False)
    assert kafka["empty_waits"][0] and kafka["woken_by_produce"][0]
    assert_same(kafka, lakelog)


# -- librdkafka consumers with each limit ------------------------------------------------------------------


def consume_all(target: Target, topic: str, partitions: int, expected: int, **conf) -> list:
    """Consume ``topic`` from the start with ``conf``; returns per partition the offsets and value sizes read."""
    c = Consumer(target.conf(**{"group.id": unique("limits"), "enable.auto.commit": False, **conf}))
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got: list[list] = [[] for _ in range(partitions)]
    deadline = time.monotonic() + TIMEOUT
    try:
        while sum(map(len, got)) < expected and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                got[m.partition()].append([m.offset(), len(m.value())])
    finally:
        c.close()
    return got


CONSUMER_LIMITS = {
    "fetch.max.bytes": {"fetch.max.bytes": 3000, "message.max.bytes": 3000},
    "max.partition.fetch.bytes": {"max.partition.fetch.bytes": 1500},
    "fetch.min.bytes": {"fetch.min.bytes": 100_000, "fetch.wait.max.ms": 300},
    "fetch.wait.max.ms": {"fetch.min.bytes": 1, "fetch.wait.max.ms": 10},
}


def consumer_limits(target: Target, topic: str) -> dict:
    fill(target, topic)
    return {name: consume_all(target, topic, PARTITIONS, PARTITIONS * PER_PARTITION, **conf)
            for name, conf in CONSUMER_LIMITS.items()}


def test_consumer_fetch_settings(targets):
    kafka, lakelog = run_both(targets, consumer_limits, unique("climits"))
    assert all(sum(map(len, v)) == PARTITIONS * PER_PARTITION for v in kafka.values())
    assert_same(kafka, lakelog)


def large_records(target: Target, topic: str) -> dict:
    """librdkafka's 0082: 900 KB records from 3 partitions, read with ``fetch.max.bytes`` 1,000,000 and
    ``receive.message.max.bytes`` 1,000,512 -- an answer over the latter disconnects the consumer."""
    create_topic(target, topic, 3)
    rows = [{"partition": p, "value": bytes([65 + p]) * 900_000} for p in range(3) for _ in range(2)]
    reports = deliver(target, topic, rows, **{"linger.ms": 0, "message.max.bytes": 1_000_000})
    got = consume_all(target, topic, 3, 6, **{"fetch.max.bytes": 1_000_000, "receive.message.max.bytes": 1_000_512,
                                              "max.partition.fetch.bytes": 1_000_000})
    return {"delivered": [r[:3] for r in reports], "consumed": got}


def test_large_records_under_fetch_max_bytes(targets):
    kafka, lakelog = run_both(targets, large_records, unique("large"))
    assert kafka["consumed"] == [[[0, 900_000], [1, 900_000]]] * 3
    assert_same(kafka, lakelog)
