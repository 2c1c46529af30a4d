"""Fetch byte limits as Kafka applies them (``KafkaApis.handleFetchRequest``, ``ReplicaManager.readFromLog``),
against a real ``lakelog serve --kafka-listener --fetch-max-bytes`` with exact requests, and librdkafka's own
test 0082 reproduced with confluent-kafka.

* the broker's ``fetch.max.bytes`` caps the answer whatever ``max_bytes`` asks (finding 3: 2**31-1 was
  honoured as sent);
* a partition listed many times is answered once (finding 3: 25 listings of a 40 MiB partition answered
  1 GB), with its last listing's offset;
* only until the first partition that returns data may the limits be passed, by one record; after the
  response's budget is spent no further batch goes out (issue 56: 1,843,824 bytes answered to
  ``fetch.max.bytes=1000000``).
"""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Consumer, Producer

from front_process import kafka_front_process, new_topic
from wire_client import WireClient

FETCH = 1
BROKER_FETCH_MAX = 3 << 20  # this module's front: --fetch-max-bytes
RECORD = 100_000


@pytest.fixture(scope="module")
def kafka_front(tmp_path_factory):
    f = kafka_front_process(str(tmp_path_factory.mktemp("fetch-limits") / "root"),
                            tmp_path_factory.mktemp("fetch-limits-logs"),
                            args=("--fetch-max-bytes", str(BROKER_FETCH_MAX)))
    f.start()
    yield f
    f.stop()


def _produce(bootstrap: str, topic: str, per_partition: dict[int, int], size: int = RECORD) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "message.max.bytes": 4 << 20})
    errors = []
    for partition, n in per_partition.items():
        for i in range(n):
            p.produce(topic, bytes([i % 256]) * size, partition=partition,
                      on_delivery=lambda err, msg: err and errors.append(err))
    assert p.flush(60) == 0 and not errors, errors


def _fetch(w: WireClient, topic: str, listings: list[tuple[int, int, int]], max_bytes: int):
    """Fetch v12 of ``(partition, offset, partition_max_bytes)`` listings in order: {partition: (records bytes,
    error code)}, and the partitions answered, in order."""
    r = w.request(FETCH, 12, {"max_wait": 0, "min_bytes": 1, "max_bytes": max_bytes, "isolation_level": 0,
                              "session_id": 0, "session_epoch": -1, "topics": [
                                  {"topic": topic, "partitions": [
                                      {"partition": p, "fetch_offset": o, "partition_max_bytes": m,
                                       "current_leader_epoch": -1, "log_start_offset": -1}
                                      for p, o, m in listings]}]})
    parts = [p for t in r.responses for p in t.partitions]
    return {p.partition_index: (len(p.records or b""), p.error_code) for p in parts}, \
        [p.partition_index for p in parts]


def _records_in(w: WireClient, topic: str, partition: int, offset: int, max_bytes: int) -> int:
    from kafka_front.record_batch import decode_batch, split_batches

    r = w.request(FETCH, 12, {"max_wait": 0, "min_bytes": 1, "max_bytes": max_bytes, "topics": [
        {"topic": topic, "partitions": [{"partition": partition, "fetch_offset": offset,
                                         "partition_max_bytes": max_bytes}]}]})
    data = r.responses[0].partitions[0].records or b""
    return sum(len(decode_batch(b, max_decompressed_bytes=1 << 30)) for b in split_batches(data))


def test_broker_fetch_max_bytes_caps_every_answer(wire, http, bootstrap):
    topic = new_topic(http, partitions=1)
    _produce(bootstrap, topic, {0: 60})  # 6 MB
    got, _ = _fetch(wire, topic, [(0, 0, 2**31 - 1)], max_bytes=2**31 - 1)
    size, code = got[0]
    assert code == 0 and BROKER_FETCH_MAX - 2 * RECORD < size <= BROKER_FETCH_MAX, size


def test_a_partition_listed_many_times_is_answered_once(wire, http, bootstrap):
    topic = new_topic(http, partitions=2)
    _produce(bootstrap, topic, {0: 10, 1: 10})
    listings = [(0, 0, 1 << 20)] * 24 + [(1, 0, 1 << 20), (0, 7, 1 << 20)]
    got, order = _fetch(wire, topic, listings, max_bytes=64 << 20)
    assert order == [0, 1]  # where it was first listed, once
    assert got[0][0] < 4 * RECORD  # its last listing's offset, 7: three records of 100 kB
    assert _records_in(wire, topic, 0, 7, 1 << 20) == 3


def test_partition_max_bytes_is_honoured(wire, http, bootstrap):
    topic = new_topic(http, partitions=2)
    _produce(bootstrap, topic, {0: 10, 1: 10})
    got, _ = _fetch(wire, topic, [(0, 0, 250_000), (1, 0, 150_000)], max_bytes=10 << 20)
    assert 2 * RECORD < got[0][0] <= 250_000 and RECORD < got[1][0] <= 150_000, got


def test_only_the_first_partition_with_data_may_pass_the_limits(wire, http, bootstrap):
    topic = new_topic(http, partitions=3, configs={"max.message.bytes": str(2 << 20)})
    big = 1_500_000
    _produce(bootstrap, topic, {0: 2, 1: 2, 2: 2}, size=big)
    # partition 0 first: one whole record past both limits, then nothing more in this answer
    got, _ = _fetch(wire, topic, [(0, 0, 1 << 20), (1, 0, 1 << 20), (2, 0, 1 << 20)], max_bytes=1_000_000)
    assert big < got[0][0] < big + 200 and got[1][0] == got[2][0] == 0, got
    # partition 0 at its end (no data): partition 1's first record may still pass the limits
    got, _ = _fetch(wire, topic, [(0, 2, 1 << 20), (1, 0, 1 << 20), (2, 0, 1 << 20)], max_bytes=1_000_000)
    assert got[0][0] == 0 and big < got[1][0] < big + 200 and got[2][0] == 0, got


def test_no_batch_goes_out_once_the_budget_is_spent(wire, http, bootstrap):
    topic = new_topic(http, partitions=3)
    _produce(bootstrap, topic, {0: 10, 1: 10, 2: 10})
    got, _ = _fetch(wire, topic, [(0, 0, 1 << 20), (1, 0, 1 << 20), (2, 0, 1 << 20)], max_bytes=450_000)
    total = sum(size for size, _ in got.values())
    assert 4 * RECORD < total <= 450_000, got  # partition 0's four records; the others get none past the budget
    assert got[1][0] == got[2][0] == 0


def test_librdkafka_0082_fetch_max_bytes(http, bootstrap):
    """librdkafka's test 0082: 900 KiB records on 3 partitions, fetch.max.bytes 1000000 and
    receive.message.max.bytes 1000512 (a larger answer is a protocol error to librdkafka, which then
    disconnects); every record is consumed without error."""
    topic = new_topic(http, partitions=3)
    per_partition = 4
    _produce(bootstrap, topic, {p: per_partition for p in range(3)}, size=900 * 1024)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g0082-{uuid.uuid4().hex[:6]}",
                  "auto.offset.reset": "earliest", "max.partition.fetch.bytes": 20_000_000,
                  "fetch.max.bytes": 1_000_000, "receive.message.max.bytes": 1_000_512})
    errors, got = [], 0
    try:
        c.subscribe([topic])
        for _ in range(240):
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                errors.append(m.error())
                continue
            got += 1
            if got == 3 * per_partition:
                break
    finally:
        c.close()
    assert not errors and got == 3 * per_partition, (got, errors)
