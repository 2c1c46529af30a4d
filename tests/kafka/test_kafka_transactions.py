"""Kafka transactions through real clients (confluent-kafka, kafka-python) against a real front.

What a broker guarantees and these tests check: a committed transaction's records and offsets appear together,
an aborted or still-open one's never do (to ``read_committed`` readers, and -- lakelog never stores them -- to
``read_uncommitted`` ones too), a newer producer instance fences an older one, and the coordinator aborts a
transaction that outlives ``transaction.timeout.ms``.
"""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from front_process import new_topic
from wire_client import WireClient

TIMEOUT = 30


def producer(bootstrap: str, tid: str, **conf) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 5, **conf})
    p.init_transactions(TIMEOUT)
    return p


def read_all(bootstrap: str, tps: list[tuple[str, int]], isolation: str, settle_s: float = 1.0,
             first_s: float = 10.0) -> dict:
    """Every record of ``tps`` from offset 0, as {(topic, partition): [(offset, value)]}, read until nothing new
    arrived for ``settle_s`` after the first record (or for ``first_s`` when none comes: a loaded machine's
    first fetch takes longer than ``settle_s``)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False, "isolation.level": isolation, "fetch.wait.max.ms": 50})
    c.assign([TopicPartition(t, p, 0) for t, p in tps])
    out: dict = {tp: [] for tp in tps}
    quiet_since, wait = time.monotonic(), first_s
    try:
        while time.monotonic() - quiet_since < wait:
            m = c.poll(0.1)
            if m is None or m.error():
                continue
            out[(m.topic(), m.partition())].append((m.offset(), m.value()))
            quiet_since, wait = time.monotonic(), settle_s
    finally:
        c.close()
    return out


def values(records: dict) -> dict:
    return {tp: [v for _, v in rs] for tp, rs in records.items()}


def list_offsets(bootstrap: str, topic: str, partitions: int, isolation: int) -> list[int]:
    """ListOffsets(latest) at ``isolation`` (0 read_uncommitted, 1 read_committed): the HW or the LSO."""
    with WireClient(bootstrap) as w:
        r = w.request(2, 7, {"replica_id": -1, "isolation_level": isolation, "topics": [
            {"name": topic, "partitions": [{"partition_index": p, "timestamp": -1} for p in range(partitions)]}]})
    return [p.offset for p in sorted(r.topics[0].partitions, key=lambda p: p.partition_index)]


@pytest.fixture
def topics(http) -> list[str]:
    return [new_topic(http, partitions=4) for _ in range(3)]


def test_commit_and_abort_across_three_topics_of_four_partitions(bootstrap, topics):
    p = producer(bootstrap, f"tx-{uuid.uuid4().hex[:6]}")
    tps = [(t, q) for t in topics for q in range(4)]
    expected: dict = {tp: [] for tp in tps}
    for round_, commit in enumerate([True, False, True, False, True]):
        p.begin_transaction()
        for t, q in tps:
            for i in range(3):
                v = f"r{round_}-{t}-{q}-{i}".encode()
                p.produce(t, value=v, partition=q)
                if commit:
                    expected[(t, q)].append(v)
        p.flush(TIMEOUT)
        (p.commit_transaction if commit else p.abort_transaction)(TIMEOUT)
    committed = read_all(bootstrap, tps, "read_committed")
    assert values(committed) == expected
    for rs in committed.values():  # offsets are dense: aborted records never took any
        assert [o for o, _ in rs] == list(range(9))
    assert values(read_all(bootstrap, tps, "read_uncommitted")) == expected
    for t in topics:
        assert list_offsets(bootstrap, t, 4, 1) == list_offsets(bootstrap, t, 4, 0) == [9, 9, 9, 9]


def test_an_open_transaction_is_invisible_until_it_commits(bootstrap, topics):
    t = topics[0]
    p = producer(bootstrap, f"tx-{uuid.uuid4().hex[:6]}")
    p.begin_transaction()
    delivered = []
    for i in range(20):
        p.produce(t, value=b"v%d" % i, partition=i % 4, on_delivery=lambda err, m: delivered.append((err, m.offset())))
    p.flush(TIMEOUT)
    assert len(delivered) == 20 and all(err is None for err, _ in delivered)  # acknowledged ...
    # ... with base offset -1 (offsets are assigned at commit), which librdkafka reports as no offset for a
    # batch's first record and -1 + i for the others (docs/kafka-clients.md)
    assert delivered[0][1] is None
    tps = [(t, q) for q in range(4)]
    for isolation in ("read_committed", "read_uncommitted"):
        assert values(read_all(bootstrap, tps, isolation, settle_s=0.5)) == {tp: [] for tp in tps}
    assert list_offsets(bootstrap, t, 4, 1) == [0, 0, 0, 0]
    p.commit_transaction(TIMEOUT)
    got = values(read_all(bootstrap, tps, "read_committed"))
    assert got == {(t, q): [b"v%d" % i for i in range(q, 20, 4)] for q in range(4)}


def test_a_newer_instance_fences_the_zombie(bootstrap, topics, http):
    t, tid = topics[0], f"tx-{uuid.uuid4().hex[:6]}"
    zombie = producer(bootstrap, tid)
    zombie.begin_transaction()
    zombie.produce(t, value=b"zombie", partition=0)
    zombie.flush(TIMEOUT)
    fresh = producer(bootstrap, tid)  # InitProducerId bumps the epoch and aborts the zombie's transaction
    with pytest.raises(KafkaException) as info:
        zombie.commit_transaction(TIMEOUT)
    err = info.value.args[0]
    assert err.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH) \
        or err.fatal(), err
    fresh.begin_transaction()
    fresh.produce(t, value=b"fresh", partition=0)
    fresh.commit_transaction(TIMEOUT)
    assert values(read_all(bootstrap, [(t, 0)], "read_committed")) == {(t, 0): [b"fresh"]}
    state = http.get(f"/v1/transactions/{tid}").json()
    assert state["state"] == "CompleteCommit" and state["producer_epoch"] >= 1


def test_the_coordinator_aborts_a_transaction_past_its_timeout(bootstrap, topics, http):
    t, tid = topics[0], f"tx-{uuid.uuid4().hex[:6]}"
    p = producer(bootstrap, tid, **{"transaction.timeout.ms": 2000})
    p.begin_transaction()
    for i in range(10):
        p.produce(t, value=b"late%d" % i, partition=i % 4)
    p.flush(TIMEOUT)
    epoch = http.get(f"/v1/transactions/{tid}").json()["producer_epoch"]
    deadline = time.monotonic() + 15
    while http.get(f"/v1/transactions/{tid}").json()["state"] != "CompleteAbort":
        assert time.monotonic() < deadline, "the coordinator never aborted the expired transaction"
        time.sleep(0.2)
    state = http.get(f"/v1/transactions/{tid}").json()
    assert state["producer_epoch"] == epoch + 1  # bumped: the abandoned producer is fenced
    with pytest.raises(KafkaException):
        p.commit_transaction(TIMEOUT)
    tps = [(t, q) for q in range(4)]
    assert values(read_all(bootstrap, tps, "read_committed", settle_s=0.5)) == {tp: [] for tp in tps}


def test_offsets_sent_to_a_transaction_commit_with_it_or_never(bootstrap, topics):
    src, dst = topics[0], topics[1]
    group = f"ctp-{uuid.uuid4().hex[:6]}"
    p = producer(bootstrap, f"tx-{uuid.uuid4().hex[:6]}")
    meta_consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        meta = meta_consumer.consumer_group_metadata()
        p.begin_transaction()
        p.produce(dst, value=b"out-aborted", partition=0)
        p.send_offsets_to_transaction([TopicPartition(src, 0, 5), TopicPartition(src, 1, 7)], meta, TIMEOUT)
        p.abort_transaction(TIMEOUT)
        assert [tp.offset for tp in meta_consumer.committed([TopicPartition(src, 0), TopicPartition(src, 1)],
                                                           TIMEOUT)] == [-1001, -1001]
        p.begin_transaction()
        p.produce(dst, value=b"out-committed", partition=0)
        p.send_offsets_to_transaction([TopicPartition(src, 0, 3), TopicPartition(src, 1, 4)], meta, TIMEOUT)
        p.commit_transaction(TIMEOUT)
        assert [tp.offset for tp in meta_consumer.committed([TopicPartition(src, 0), TopicPartition(src, 1)],
                                                           TIMEOUT)] == [3, 4]
    finally:
        meta_consumer.close()
    assert values(read_all(bootstrap, [(dst, 0)], "read_committed")) == {(dst, 0): [b"out-committed"]}


def test_kafka_python_transactional_producer_and_read_committed_consumer(bootstrap, topics):
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KTP

    t = topics[2]
    p = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=f"kp-{uuid.uuid4().hex[:6]}")
    try:
        p.init_transactions()
        p.begin_transaction()
        for i in range(8):
            p.send(t, value=b"kp-commit-%d" % i, partition=i % 4)
        p.commit_transaction()
        p.begin_transaction()
        for i in range(8):
            p.send(t, value=b"kp-abort-%d" % i, partition=i % 4)
        p.abort_transaction()
    finally:
        p.close()
    c = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed", enable_auto_commit=False,
                      consumer_timeout_ms=3000)
    try:
        c.assign([KTP(t, q) for q in range(4)])
        c.seek_to_beginning()
        got = sorted(m.value for m in c)
    finally:
        c.close()
    assert got == sorted(b"kp-commit-%d" % i for i in range(8))
