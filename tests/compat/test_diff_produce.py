"""Produce and ListOffsets, differentially: every codec with and without idempotence through librdkafka, a
producer's retries at the protocol level (the same batch sent again, a sequence gap, a producer id never given out), the produce
errors a client sees, and ListOffsets by timestamp, earliest, latest and max timestamp -- each against Apache Kafka
and lakelog, compared by :func:`compat_support.assert_same`.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import TopicPartition

from compat_support import (BASE_TS, TIMEOUT, Target, assert_same, batch, create_topic, deliver, error_name,
                            produce_wire, read_partitions, request, run_both, unique, watermarks)
from wire_client import WireClient

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def records(n: int = 30) -> list[dict]:
    """Keyed and unkeyed records, a tombstone, headers, compressible and small values, explicit timestamps."""
    out = []
    for i in range(n):
        out.append({"partition": i % 2, "key": None if i % 7 == 0 else f"k{i % 5}".encode(),
                    "value": None if i == 11 else (b"x" * 10_000 if i % 10 == 3 else f"v{i}".encode()),
                    "headers": [("h", f"{i}".encode()), ("h", None)] if i % 4 == 0 else None,
                    "timestamp": BASE_TS + i * 1000})
    return out


def list_offsets(target: Target, topic: str, partitions: int, stamps: list[int]) -> dict:
    """ListOffsets for each of ``stamps`` (a timestamp, or -2 earliest, -1 latest, -3 max timestamp) per
    partition, through librdkafka's offsets_for_times: ``{stamp: [[offset, error, leader epoch]]}``."""
    from confluent_kafka import Consumer

    c = Consumer(target.conf(**{"group.id": unique("lo")}))
    try:
        out = {}
        for ts in stamps:
            got = c.offsets_for_times([TopicPartition(topic, p, ts) for p in range(partitions)], timeout=TIMEOUT)
            out[str(ts)] = [[tp.offset, error_name(tp.error), tp.leader_epoch] for tp in got]
        return out
    finally:
        c.close()


def produce_and_read(target: Target, topic: str, codec: str, idempotent: bool) -> dict:
    create_topic(target, topic, 2)
    rows = records()
    reports = deliver(target, topic, rows, **{"compression.type": codec, "enable.idempotence": idempotent})
    return {"delivered": reports, "read": read_partitions(target, topic, 2),
            "watermarks": watermarks(target, topic, 2),
            "list_offsets": list_offsets(target, topic, 2, [BASE_TS - 1, BASE_TS, BASE_TS + 2500, BASE_TS + 28_000,
                                                             BASE_TS + 29_000, BASE_TS + 10**9, -2, -1, -3])}


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("idempotent", [True, False], ids=["idempotent", "plain"])
def test_produce_every_codec(targets, codec, idempotent):
    kafka, lakelog = run_both(targets, produce_and_read, unique(f"codec-{codec}"), codec, idempotent)
    assert sum(len(p) for p in kafka["read"]) == 30
    assert_same(kafka, lakelog)


def log_append_time(target: Target, topic: str) -> dict:
    """A topic with ``message.timestamp.type=LogAppendTime``: the broker stamps every record."""
    create_topic(target, topic, 1, {"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    reports = deliver(target, topic, [{"value": b"a", "timestamp": BASE_TS}, {"value": b"b", "timestamp": BASE_TS}])
    after = int(time.time() * 1000)
    read = read_partitions(target, topic, 1)[0]
    return {"delivered": [[e, p, o, ts_type, before <= ts <= after] for e, p, o, (ts_type, ts) in reports],
            "read": [[r["offset"], r["timestamp_type"], before <= r["timestamp"] <= after] for r in read]}


def test_log_append_time(targets):
    kafka, lakelog = run_both(targets, log_append_time, unique("lat"))
    assert kafka["read"] == [[0, 2, True], [1, 2, True]]
    assert_same(kafka, lakelog)


def produce_errors(target: Target, topic: str) -> dict:
    """What a producer is told: a record over the topic's max.message.bytes, a timestamp beyond
    message.timestamp.after.max.ms (Kafka 4's default: one hour), a record to a topic that does not exist yet
    (auto.create.topics.enable, Kafka's default, creates it with num.partitions)."""
    create_topic(target, topic, 1, {"max.message.bytes": "2000"})
    now = int(time.time() * 1000)
    out = {
        "too_large": deliver(target, topic, [{"value": b"y" * 3000}], **{"retries": 0}),
        "future_timestamp": deliver(target, topic, [{"value": b"f", "timestamp": now + 2 * 3600_000}],
                                    **{"retries": 0}),
        "after_errors": deliver(target, topic, [{"value": b"ok", "timestamp": BASE_TS}]),
    }
    new = f"{topic}-auto"
    out["auto_created"] = [[e, p, o] for e, p, o, _ in deliver(target, new, [{"value": b"a"}],
                                                                **{"message.timeout.ms": 20000})]
    md = target.admin().list_topics(new, timeout=TIMEOUT).topics[new]
    out["auto_created_partitions"] = len(md.partitions)
    return out


def test_produce_errors(targets):
    kafka, lakelog = run_both(targets, produce_errors, unique("perr"))
    assert kafka["too_large"][0][0] == "MSG_SIZE_TOO_LARGE"
    assert_same(kafka, lakelog)


# -- retries at the protocol level: what a producer's retry sends is the same batch again ---------------------


def retries(target: Target, topic: str) -> dict:
    create_topic(target, topic, 1)
    with WireClient(target.bootstrap) as w:
        init = request(w, 22, 4, {"transactional_id": None, "transaction_timeout": 60000, "producer_id": -1,
                                 "producer_epoch": -1})
        assert init.error_code == 0, init
        pid, epoch = init.producer_id, init.producer_epoch
        b0, b1, b2 = (batch(pid, epoch, s, [f"s{s}-{i}".encode() for i in range(3)]) for s in (0, 3, 6))
        out = {"first": produce_wire(w, topic, b0),
               "retry_of_first": produce_wire(w, topic, b0),
               "second": produce_wire(w, topic, b1),
               "retry_of_both": [produce_wire(w, topic, b0), produce_wire(w, topic, b1)],
               "sequence_gap": produce_wire(w, topic, batch(pid, epoch, 9 + 3, [b"gap"])),
               "third": produce_wire(w, topic, b2),
               "unknown_producer": produce_wire(w, topic, batch(pid + 1_000_000, 0, 0, [b"who"]))}
    out["read"] = [r["value"] for r in read_partitions(target, topic, 1)[0]]
    return out


def test_retries_and_sequences(targets):
    kafka, lakelog = run_both(targets, retries, unique("retry"))
    assert kafka["retry_of_first"][:2] == [0, 0] and len(kafka["read"]) == 10
    assert kafka["unknown_producer"][0] == 0 and kafka["read"][-1] == b"who"
    assert lakelog["unknown_producer"][:2] == [59, -1]  # UNKNOWN_PRODUCER_ID, nothing written
    assert lakelog["read"] == kafka["read"][:-1]
    assert_same(kafka, lakelog, {"unknown_producer/*": "producer-ids", "read/9": "producer-ids"})
