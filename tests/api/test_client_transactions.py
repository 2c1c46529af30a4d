"""The Python client's transactions against a real front: ``Producer`` commit, abort, offsets, fencing and timeout;
a consume-transform-produce loop with ``Consumer``; ``Consumer(isolation_level=...)``; the docs example."""

from __future__ import annotations

import base64
import re
import time
import uuid

import pytest

from front_process import REPO, new_topic
from lakelog.client import Admin, Consumer, Producer, TopicPartition
from lakelog.client.producer import TransactionAborted
from lakelog.errors import (InvalidConfig, InvalidTransactionTimeout, InvalidTxnState, KafkaError, ProducerFenced,
                            RequestTimedOut, UnknownTopicOrPartition)


def tx_id() -> str:
    return f"ctx-{uuid.uuid4().hex[:10]}"


def stored(admin: Admin, topic: str, partition: int) -> list[bytes]:
    recs = admin.fetch(topic, partition, 0, max_records=10000)["records"]
    assert [r["offset"] for r in recs] == list(range(len(recs)))
    return [base64.b64decode(r["value"]) for r in recs]


def all_stored(admin: Admin, topic: str, partitions: int = 2) -> list[bytes]:
    return sorted(v for p in range(partitions) for v in stored(admin, topic, p))


def committed(admin: Admin, group: str, topic: str) -> dict[int, int]:
    return {o["partition"]: o["offset"] for o in admin.fetch_offsets(group, topic)}


def make_consumer(front, front_root, **kwargs) -> Consumer:
    return Consumer(front.url, storage_options=front_root[2] or None, **kwargs)


def test_commit_and_abort(front, http):
    topic = new_topic(http)
    with Admin(front.url) as admin, Producer(front.url, transactional_id=tx_id(), linger_ms=2) as producer:
        producer.init_transactions()
        with pytest.raises(InvalidTxnState):
            producer.send(topic, b"outside")  # Kafka: cannot send without an ongoing transaction
        producer.begin_transaction()
        futures = [producer.send(topic, f"c{i}".encode(), partition=i % 2) for i in range(10)]
        producer.flush()
        assert {f.result().offset for f in futures} == {-1}  # staged: offsets come with the commit
        assert all_stored(admin, topic) == []
        producer.commit_transaction()
        assert stored(admin, topic, 0) == [f"c{i}".encode() for i in range(0, 10, 2)]
        assert stored(admin, topic, 1) == [f"c{i}".encode() for i in range(1, 10, 2)]

        producer.begin_transaction()
        sent = [producer.send(topic, b"aborted", partition=0) for _ in range(3)]
        producer.flush()
        producer.abort_transaction()
        assert [f.result().offset for f in sent] == [-1, -1, -1]
        producer.begin_transaction()  # a new transaction after the abort
        producer.send(topic, b"after", partition=0)
        producer.commit_transaction()
        assert stored(admin, topic, 0) == [f"c{i}".encode() for i in range(0, 10, 2)] + [b"after"]
        assert b"aborted" not in all_stored(admin, topic)


def test_abort_drops_records_not_sent_yet(front, http):
    topic = new_topic(http)
    with Admin(front.url) as admin, Producer(front.url, transactional_id=tx_id(), linger_ms=600_000,
                                              batch_size=1 << 20) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        queued = [producer.send(topic, b"queued", partition=1) for _ in range(4)]
        producer.abort_transaction()  # the linger never expired: nothing was sent
        for f in queued:
            with pytest.raises(TransactionAborted):
                f.result(timeout=5)
        producer.begin_transaction()
        kept = producer.send(topic, b"kept", partition=1)
        producer.commit_transaction()  # flushes despite the long linger
        assert kept.result(timeout=5).offset == -1
        assert all_stored(admin, topic) == [b"kept"]


def test_close_aborts_an_open_transaction(front, http):
    topic = new_topic(http)
    tid = tx_id()
    with Admin(front.url) as admin:
        producer = Producer(front.url, transactional_id=tid)
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(topic, b"open").result(timeout=60)
        producer.close()
        assert http.get(f"/v1/transactions/{tid}").json()["state"] == "CompleteAbort"
        assert all_stored(admin, topic) == []


def test_send_offsets_to_transaction(front, http):
    topic = new_topic(http)
    group = f"g-{uuid.uuid4().hex[:8]}"
    with Admin(front.url) as admin, Producer(front.url, transactional_id=tx_id()) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(topic, b"out", partition=0)
        producer.send_offsets_to_transaction({(topic, 0): 4, TopicPartition(topic, 1): 2}, group)
        assert committed(admin, group, topic) == {}
        producer.commit_transaction()
        assert committed(admin, group, topic) == {0: 4, 1: 2}
        assert all_stored(admin, topic) == [b"out"]

        producer.begin_transaction()  # offsets alone, list form
        producer.send_offsets_to_transaction([(topic, 0, 6, "m")], group)
        producer.commit_transaction()
        assert committed(admin, group, topic) == {0: 6, 1: 2}
        assert {o["partition"]: o["metadata"] for o in admin.fetch_offsets(group, topic)}[0] == "m"

        producer.begin_transaction()
        producer.send_offsets_to_transaction([(topic, 0, 9), (topic, 1, 9)], group)
        producer.send(topic, b"lost", partition=1)
        producer.abort_transaction()
        assert committed(admin, group, topic) == {0: 6, 1: 2}
        assert all_stored(admin, topic) == [b"out"]


def test_a_new_instance_fences_the_old_one(front, http):
    topic = new_topic(http)
    tid = tx_id()
    with Admin(front.url) as admin:
        old = Producer(front.url, transactional_id=tid)
        old.init_transactions()
        old.begin_transaction()
        old.send(topic, b"zombie", partition=0).result(timeout=60)
        with Producer(front.url, transactional_id=tid) as new:
            new.init_transactions()
            with pytest.raises(ProducerFenced):
                old.commit_transaction()
            with pytest.raises(ProducerFenced):  # fatal: the producer cannot be used any more
                old.send(topic, b"again")
            with pytest.raises(ProducerFenced):
                old.begin_transaction()
            new.begin_transaction()
            new.send(topic, b"new", partition=0)
            new.commit_transaction()
        old.close()
        assert all_stored(admin, topic) == [b"new"]


def test_timed_out_transaction_fences_its_producer(front, http):
    topic = new_topic(http)
    tid = tx_id()
    with Admin(front.url) as admin, Producer(front.url, transactional_id=tid, transaction_timeout_ms=1500) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(topic, b"too slow", partition=0).result(timeout=60)
        deadline = time.monotonic() + 30
        while http.get(f"/v1/transactions/{tid}").json()["state"] != "CompleteAbort":
            assert time.monotonic() < deadline, "the coordinator never aborted the timed-out transaction"
            time.sleep(0.5)
        with pytest.raises((ProducerFenced, KafkaError)) as raised:
            producer.commit_transaction()
        assert raised.value.name in ("PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH")
        with pytest.raises(KafkaError):
            producer.send(topic, b"more")
        assert all_stored(admin, topic) == []


def test_failed_send_makes_the_transaction_abortable(front, http):
    topic = new_topic(http, configs={"max.message.bytes": 500})
    with Admin(front.url) as admin, Producer(front.url, transactional_id=tx_id(), linger_ms=1) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        ok = producer.send(topic, b"fine", partition=0)
        too_big = producer.send(topic, b"x" * 600, partition=1)
        with pytest.raises(KafkaError) as raised:
            producer.commit_transaction()
        assert raised.value.name == "MESSAGE_TOO_LARGE"
        assert ok.result().offset == -1 and too_big.exception() is not None
        producer.abort_transaction()
        assert all_stored(admin, topic) == []
        producer.begin_transaction()  # the producer itself is fine
        producer.send(topic, b"retry", partition=1)
        producer.commit_transaction()
        assert all_stored(admin, topic) == [b"retry"]


def test_unknown_outcome_makes_abort_take_a_new_epoch(start_front):
    """A write whose outcome stayed unknown (the front died) might still be staged later: abort takes a new epoch,
    fencing it, and the next transaction carries none of it."""
    front = start_front()
    with front.client() as http:
        topic = new_topic(http)
        tid = tx_id()
        producer = Producer(front.url, transactional_id=tid, linger_ms=1, delivery_timeout_ms=1500,
                            request_timeout_ms=1000, retry_backoff_ms=50, retry_backoff_max_ms=200)
        try:
            producer.init_transactions()
            epoch = http.get(f"/v1/transactions/{tid}").json()["producer_epoch"]
            producer.begin_transaction()
            producer.send(topic, b"staged", partition=0).result(timeout=60)
            front.kill()
            lost = producer.send(topic, b"unknown", partition=1)
            with pytest.raises(RequestTimedOut):
                lost.result(timeout=60)
            with pytest.raises(RequestTimedOut):  # abortable: the transaction cannot commit any more
                producer.commit_transaction()
            front.start()
            producer.abort_transaction()
            state = http.get(f"/v1/transactions/{tid}").json()
            assert (state["producer_epoch"], state["state"]) == (epoch + 1, "CompleteAbort")
            producer.begin_transaction()
            producer.send(topic, b"after", partition=0)
            producer.commit_transaction()
        finally:
            producer.close()
        with Admin(front.url) as admin:
            assert all_stored(admin, topic) == [b"after"]


def test_misuse_is_refused(front, http):
    topic = new_topic(http)
    with pytest.raises(InvalidConfig):
        Producer(front.url, transactional_id=tx_id(), transaction_timeout_ms=0)
    with Producer(front.url) as plain:
        with pytest.raises(InvalidTxnState):
            plain.init_transactions()
    with Producer(front.url, transactional_id=tx_id(), transaction_timeout_ms=1_000_000) as too_long:
        with pytest.raises(InvalidTransactionTimeout):  # the coordinator's transaction.max.timeout.ms
            too_long.init_transactions()
    with Producer(front.url, transactional_id=tx_id()) as producer:
        with pytest.raises(InvalidTxnState):
            producer.begin_transaction()  # before init_transactions
        producer.init_transactions()
        for call in (producer.commit_transaction, producer.abort_transaction):
            with pytest.raises(InvalidTxnState):
                call()
        producer.begin_transaction()
        with pytest.raises(InvalidTxnState):
            producer.begin_transaction()
        with pytest.raises(UnknownTopicOrPartition):
            producer.send(f"missing-{uuid.uuid4().hex[:6]}", b"x")
        producer.commit_transaction()  # nothing was written: nothing to commit on the front


def test_consume_transform_produce_is_exactly_once(front, front_root, http):
    source, sink = new_topic(http), new_topic(http)
    group = f"ctp-{uuid.uuid4().hex[:8]}"
    with Producer(front.url) as plain:
        for i in range(40):
            plain.send(source, f"in-{i}".encode(), key=f"k{i % 5}".encode())
    consumer = make_consumer(front, front_root, group_id=group, enable_auto_commit=False,
                             auto_offset_reset="earliest", isolation_level="read_committed")
    consumer.subscribe([source])
    producer = Producer(front.url, transactional_id=f"ctp-{group}", linger_ms=1)
    producer.init_transactions()
    failed_once = False
    done = 0
    deadline = time.monotonic() + 120
    try:
        while done < 40:
            assert time.monotonic() < deadline, f"only {done} of 40 records were processed"
            batch = consumer.poll(timeout_ms=500, max_records=7)
            if not batch:
                continue
            producer.begin_transaction()
            for tp, records in batch.items():
                for r in records:
                    producer.send(sink, r.value.replace(b"in-", b"out-"), key=r.key)
            producer.send_offsets_to_transaction({tp: consumer.position(tp) for tp in batch},
                                                 consumer.group_metadata())
            if not failed_once:  # a crash of the processing step: abort and reprocess from the committed offsets
                failed_once = True
                producer.abort_transaction()
                for tp in consumer.assignment():
                    consumer.seek(tp, consumer.committed(tp) or 0)
                continue
            producer.commit_transaction()
            done += sum(len(records) for records in batch.values())
        with Admin(front.url) as admin:
            assert all_stored(admin, sink) == sorted(f"out-{i}".encode() for i in range(40))  # each exactly once
            ends = {p["partition"]: p["high_watermark"] for p in admin.describe_topic(source)["partitions"]}
            assert committed(admin, group, source) == ends
    finally:
        producer.close()
        consumer.close()


def test_consumer_isolation_level(front, front_root, http):
    topic = new_topic(http)
    for bad in ("READ_COMMITTED", "committed", None):
        with pytest.raises(InvalidConfig):
            make_consumer(front, front_root, isolation_level=bad)
    with Producer(front.url, transactional_id=tx_id()) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(topic, b"committed", partition=0)
        producer.commit_transaction()
        producer.begin_transaction()
        producer.send(topic, b"open", partition=0).result(timeout=60)  # staged, not committed
        seen = {}
        for level in ("read_uncommitted", "read_committed"):
            c = make_consumer(front, front_root, isolation_level=level)
            assert c.isolation_level == level
            c.assign([TopicPartition(topic, 0)])
            c.seek(TopicPartition(topic, 0), 0)
            got = []
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and not got:
                got = [r.value for rs in c.poll(timeout_ms=200).values() for r in rs]
            time.sleep(0.5)
            got += [r.value for rs in c.poll(timeout_ms=200).values() for r in rs]
            seen[level] = got
            c.close()
        assert seen == {"read_uncommitted": [b"committed"], "read_committed": [b"committed"]}
        producer.abort_transaction()


def test_docs_python_api_transactions_example_runs(front, front_root, monkeypatch):
    """docs/python-api.md's transactions example (a ``python front`` block, which needs a front) runs as written."""
    text = (REPO / "docs" / "python-api.md").read_text()
    blocks = re.findall(r"^```python front\n(.*?)^```", text, flags=re.S | re.M)
    assert len(blocks) == 1, "docs/python-api.md lost its transactions example"
    for key, value in front_root[1].items():  # an S3 root: the consumer's credentials, from the AWS environment
        monkeypatch.setenv(key, value)
    printed: list = []
    code = blocks[0].replace("http://127.0.0.1:8080", front.url)
    exec(compile(code, "docs/python-api.md", "exec"), {"print": lambda *a: printed.append(a)})
    (offsets,) = printed[-1]
    assert sum(o["offset"] for o in offsets) == 6 and all(o["lag"] == 0 for o in offsets)
    with Admin(front.url) as admin:
        assert all_stored(admin, "ledger") == sorted(f"PAYMENT {i}".encode() for i in range(6))
