"""The Python client (``lakelog.client``) and ``lakelog produce --url`` against a real front."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from front_process import REPO
from lakelog.client import Admin, Producer
from lakelog.errors import MessageTooLarge, ProducerFenced, TopicAlreadyExists, UnknownTopicOrPartition
from lakelog.writer.partitioner import partition_for_key


def values(admin: Admin, topic: str, partition: int) -> list[bytes]:
    import base64

    recs = admin.fetch(topic, partition, 0, max_records=10000)["records"]
    return [base64.b64decode(r["value"]) if r["value"] is not None else None for r in recs]


def test_admin_round_trip(front):
    with Admin(front.url) as admin:
        name = "adm-" + front.url.rsplit(":", 1)[1]
        admin.create_topic(name, 2, {"retention.ms": 5000})
        with pytest.raises(TopicAlreadyExists):
            admin.create_topic(name, 2)
        assert name in admin.list_topics()
        assert admin.alter_topic(name, partitions=3)["partitions"][2]["partition"] == 2
        assert admin.describe_topic(name)["configs"]["retention.ms"] == "5000"
        pid, epoch = admin.init_producer()
        assert pid >= 0 and epoch == 0
        admin.commit_offsets("adm-group", [(name, 0, 0, "m")])
        assert admin.fetch_offsets("adm-group")[0]["metadata"] == "m"
        assert "adm-group" in admin.list_groups()
        assert admin.delete_group("adm-group") == 1
        admin.delete_topic(name)
        with pytest.raises(UnknownTopicOrPartition):
            admin.describe_topic(name)


def test_producer_partitions_batches_and_acknowledges(front):
    with Admin(front.url) as admin:
        topic = f"cli-{id(admin):x}"
        admin.create_topic(topic, 3)
        with Producer(front.url, linger_ms=2, batch_size=2000) as producer:
            keyed = [(f"key-{i}".encode(), f"k{i}".encode(), producer.send(topic, f"k{i}", key=f"key-{i}"))
                     for i in range(60)]
            explicit = [producer.send(topic, f"e{i}".encode(), partition=2, headers={"h": b"1"}) for i in range(30)]
            sticky = [producer.send(topic, f"s{i}".encode()) for i in range(90)]
            producer.flush()
            for key, value, f in keyed:
                meta = f.result()
                assert meta.partition == partition_for_key(key, 3)
                assert values(admin, topic, meta.partition)[meta.offset] == value
            offsets = [f.result().offset for f in explicit]
            assert offsets == sorted(offsets) and all(f.result().partition == 2 for f in explicit)
            assert {f.result().partition for f in sticky} <= {0, 1, 2}
        total = sum(p["high_watermark"] for p in admin.describe_topic(topic)["partitions"])
        assert total == 180  # idempotent batches: each record exactly once
        for p in range(3):  # per partition, records are in send order
            stored = [v for v in values(admin, topic, p) if v.startswith(b"s")]
            assert stored == sorted(stored, key=lambda v: int(v[1:]))


def test_producer_fails_only_the_offending_batch(front):
    with Admin(front.url) as admin:
        topic = f"big-{id(admin):x}"
        admin.create_topic(topic, 2, {"max.message.bytes": 500})
        with Producer(front.url, linger_ms=50) as producer:
            ok = producer.send(topic, b"small", partition=0)
            too_big = producer.send(topic, b"x" * 600, partition=1)
            producer.flush()
            assert ok.result().offset == 0
            with pytest.raises(MessageTooLarge):
                too_big.result()
            after = producer.send(topic, b"next", partition=1)  # the sequence was not consumed
            assert after.result(timeout=60).offset == 0


def test_fenced_transactional_producer_fails(front):
    with Admin(front.url) as admin:
        topic = f"tx-{id(admin):x}"
        admin.create_topic(topic, 1)
    first = Producer(front.url, transactional_id=f"app-{topic}")
    first.init_transactions()
    first.begin_transaction()
    assert first.send(topic, b"one").result(timeout=60).offset == -1  # staged until the commit
    first.commit_transaction()
    first.begin_transaction()
    with Producer(front.url, transactional_id=f"app-{topic}") as second:
        second.init_transactions()
        second.begin_transaction()
        second.send(topic, b"two")
        second.commit_transaction()
    with pytest.raises(ProducerFenced):
        first.send(topic, b"zombie").result(timeout=60)
    with pytest.raises(ProducerFenced):
        first.send(topic, b"again")
    first.close()
    with Admin(front.url) as admin:
        assert values(admin, topic, 0) == [b"one", b"two"]


def test_cli_produce_bootstrap(front, http):
    topic = f"clip-{front.port}"
    assert http.post("/v1/topics", json={"name": topic, "partitions": 2}).status_code == 201
    lines = "".join(f"k{i}\tvalue-{i}\n" for i in range(25))
    out = subprocess.run([sys.executable, "-m", "lakelog.cli", "produce", topic, "--url", front.url,
                          "--key-separator", "\t", "--json"], input=lines, capture_output=True, text=True,
                         cwd=str(REPO), timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["records"] == 25
    stored = {}
    for p in range(2):
        for r in http.get(f"/v1/topics/{topic}/partitions/{p}/records", params={"offset": 0}).json()["records"]:
            stored[r["key"]] = (p, r["value"])
    assert stored == {f"k{i}": (partition_for_key(f"k{i}".encode(), 2), f"value-{i}") for i in range(25)}
    missing = subprocess.run([sys.executable, "-m", "lakelog.cli", "produce", "no-such-topic", "--url",
                              front.url], input="x\n", capture_output=True, text=True, cwd=str(REPO), timeout=120)
    assert missing.returncode == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in missing.stderr


def test_docs_http_example_runs(front):
    """The Python example of docs/http.md runs as written against a front (only the URL differs)."""
    import re

    text = (REPO / "docs" / "http.md").read_text()
    blocks = re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)
    assert blocks, "docs/http.md lost its Python example"
    namespace: dict = {"print": lambda *a: printed.append(a)}
    printed: list = []
    for code in blocks:
        exec(compile(code.replace("http://127.0.0.1:8080", front.url), "docs/http.md", "exec"), namespace)
    (offsets,) = printed[-1]
    assert offsets[0]["topic"] == "orders" and offsets[0]["lag"] == 0 and offsets[0]["metadata"]
