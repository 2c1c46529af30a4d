"""Transactions, differentially (confluent-kafka): commit and abort beside non-transactional records,
read_committed and read_uncommitted readers, an open transaction's last stable offset, fencing by a newer
instance, and offsets sent to a transaction -- against Apache Kafka and lakelog.

lakelog writes no transaction markers and never stores aborted or open transactions' records (the
``control-records``, ``uncommitted-records`` and ``transactional-ack`` differences). The tests do not wave offsets
through: they map Kafka's offsets onto the records a read_committed reader sees and require lakelog's offsets to
equal them, and Kafka's high watermark to exceed lakelog's by exactly the markers and aborted records.
"""

from __future__ import annotations

import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from compat_support import (TIMEOUT, Target, assert_same, create_topic, error_name, read_partitions, run_both,
                            stable_watermarks, unique, watermarks)


def tx_producer(target: Target, tid: str) -> Producer:
    p = Producer(target.conf(**{"transactional.id": tid, "linger.ms": 5}))
    p.init_transactions(TIMEOUT)
    return p


def send(p: Producer, topic: str, rows: list[tuple[int, str]], reports: list) -> None:
    for partition, value in rows:
        p.produce(topic, value=value.encode(), partition=partition,
                  on_delivery=lambda err, m: reports.append([m.value().decode(), error_name(err), m.offset()]))
    assert p.flush(TIMEOUT) == 0


def values(target: Target, topic: str, partitions: int, isolation: str, expect: int) -> list[list]:
    return [[[r["offset"], r["value"].decode()] for r in part]
            for part in read_partitions(target, topic, partitions, isolation=isolation, expect=expect)]


def commit_and_abort(target: Target, topic: str) -> dict:
    create_topic(target, topic, 2)
    p = tx_producer(target, unique("tx"))
    plain = Producer(target.conf(**{"linger.ms": 0}))
    reports: list = []
    p.begin_transaction()
    send(p, topic, [(0, "a0"), (0, "a1"), (0, "a2"), (1, "a3")], reports)
    p.commit_transaction(TIMEOUT)
    p.begin_transaction()
    send(p, topic, [(0, "b0"), (0, "b1")], reports)
    p.abort_transaction(TIMEOUT)
    send(plain, topic, [(0, "n0")], reports)
    p.begin_transaction()
    send(p, topic, [(0, "c0"), (1, "c1")], reports)
    p.commit_transaction(TIMEOUT)
    # an open transaction: its records are not stable
    p.begin_transaction()
    send(p, topic, [(1, "d0")], reports)
    open_committed = watermarks(target, topic, 2, "read_committed")
    open_uncommitted = watermarks(target, topic, 2, "read_uncommitted")
    read_open = values(target, topic, 2, "read_committed", 7)
    p.abort_transaction(TIMEOUT)
    return {"delivered": sorted(reports), "read_committed": values(target, topic, 2, "read_committed", 7),
            "read_uncommitted": values(target, topic, 2, "read_uncommitted", 7),
            "watermarks": stable_watermarks(target, topic, 2), "open": {
                "read_committed_watermarks": open_committed, "watermarks": open_uncommitted,
                "read_committed": read_open}}


def dense(read: list[list]) -> list[list]:
    """Kafka's offsets as lakelog assigns them: each record's rank among what a read_committed reader sees."""
    return [[[i, v] for i, (_, v) in enumerate(part)] for part in read]


def test_commit_abort_and_visibility(targets):
    kafka, lakelog = run_both(targets, commit_and_abort, unique("txn"))
    # Kafka: p0 a0 a1 a2 (marker) b0 b1 (abort marker) n0 c0 (marker); p1 a3 (marker) c1 (marker) d0 (abort marker)
    assert [[v for _, v in part] for part in kafka["read_committed"]] == [["a0", "a1", "a2", "n0", "c0"],
                                                                          ["a3", "c1"]]
    assert [[v for _, v in part] for part in kafka["read_uncommitted"]] == [
        ["a0", "a1", "a2", "b0", "b1", "n0", "c0"], ["a3", "c1", "d0"]]
    markers, aborted = [3, 3], [2, 1]  # per partition: EndTxn markers written, aborted records
    # control-records: the same records in the same order, at offsets without markers and aborted records
    assert lakelog["read_committed"] == dense(kafka["read_committed"])
    assert [hi for _, hi in kafka["watermarks"]] == [
        l_hi + m + a for (_, l_hi), m, a in zip(lakelog["watermarks"], markers, aborted)]
    # uncommitted-records: lakelog's read_uncommitted reads what read_committed reads; open records are invisible
    assert lakelog["read_uncommitted"] == lakelog["read_committed"]
    assert kafka["open"]["read_committed_watermarks"][1][1] < kafka["open"]["watermarks"][1][1]  # LSO < HW
    assert lakelog["open"]["read_committed_watermarks"] == lakelog["open"]["watermarks"]
    assert kafka["delivered"][9][0] == "n0"
    assert_same(kafka, lakelog, {
        "delivered/9/2": "control-records", "delivered/*/2": "transactional-ack", "read_committed/*/*/0": "control-records",
        "read_uncommitted/**": "uncommitted-records", "watermarks/*/1": "control-records",
        "open/*/*/1": "control-records", "open/read_committed/*/*/0": "control-records"})


def fencing(target: Target, topic: str) -> dict:
    """A second producer with the same transactional.id fences the first: its commit fails fatally, the new
    instance commits, and nothing of the fenced transaction is read."""
    create_topic(target, topic, 1)
    tid = unique("fence")
    old = tx_producer(target, tid)
    old.begin_transaction()
    reports: list = []
    send(old, topic, [(0, "old")], reports)
    new = tx_producer(target, tid)
    out: dict = {}
    try:
        old.commit_transaction(TIMEOUT)
        out["old_commit"] = None
    except KafkaException as e:
        err = e.args[0]
        out["old_commit"] = {"fatal": err.fatal(), "fenced": err.name() in ("_FENCED", "PRODUCER_FENCED",
                                                                             "INVALID_PRODUCER_EPOCH")}
    new.begin_transaction()
    send(new, topic, [(0, "new")], reports)
    new.commit_transaction(TIMEOUT)
    out["read_committed"] = [r["value"] for r in read_partitions(target, topic, 1, isolation="read_committed",
                                                                  expect=1)[0]]
    out["delivered_errors"] = sorted([v, e] for v, e, _ in reports)
    return out


def test_fencing(targets):
    kafka, lakelog = run_both(targets, fencing, unique("fence"))
    assert kafka["old_commit"] == {"fatal": True, "fenced": True} and kafka["read_committed"] == [b"new"]
    assert_same(kafka, lakelog)


def offsets_to_transaction(target: Target, topic: str) -> dict:
    """Consume-transform-produce: offsets sent to a committed transaction become the group's committed offsets;
    those sent to an aborted one never do."""
    create_topic(target, topic, 1)
    out_topic = f"{topic}-out"
    create_topic(target, out_topic, 1)
    plain = Producer(target.conf())
    send(plain, topic, [(0, f"in{i}") for i in range(6)], [])
    group = unique("ctp")
    c = Consumer(target.conf(**{"group.id": group, "enable.auto.commit": False, "auto.offset.reset": "earliest",
                                "isolation.level": "read_committed"}))
    c.subscribe([topic])
    p = tx_producer(target, unique("ctp"))
    got: list = []
    deadline = time.monotonic() + TIMEOUT
    while len(got) < 6 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append(m)
    assert len(got) == 6, f"{target.name}: read {len(got)} of 6"
    committed = {}
    for upto, outcome in ((3, "commit"), (6, "abort")):
        p.begin_transaction()
        send(p, out_topic, [(0, m.value().decode().replace("in", "out")) for m in got[upto - 3:upto]], [])
        p.send_offsets_to_transaction([TopicPartition(topic, 0, upto)], c.consumer_group_metadata(), TIMEOUT)
        (p.commit_transaction if outcome == "commit" else p.abort_transaction)(TIMEOUT)
        committed[outcome] = [tp.offset for tp in c.committed([TopicPartition(topic, 0)], timeout=TIMEOUT)]
    c.close()
    return {"committed": committed,
            "output": [r["value"] for r in read_partitions(target, out_topic, 1, isolation="read_committed",
                                                           expect=3)[0]]}


def test_offsets_sent_to_transactions(targets):
    kafka, lakelog = run_both(targets, offsets_to_transaction, unique("ctp"))
    assert kafka == {"committed": {"commit": [3], "abort": [3]}, "output": [b"out0", b"out1", b"out2"]}
    assert_same(kafka, lakelog)
