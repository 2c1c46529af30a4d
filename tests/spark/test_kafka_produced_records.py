"""A record produced over Kafka's protocol is the same record in Spark and through the maintenance jobs.

librdkafka (idempotent, lz4, keys, headers, CreateTime timestamps) produces into a real ``lakelog serve
--kafka-listener``; ``spark.read.format("lakelog")`` returns the same partitions, offsets, keys, values,
timestamps and headers; the compaction job (a Spark job) keeps the latest record per key at its Kafka
offset, and a Kafka consumer afterwards reads exactly those, with their producer's headers.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from lakelog.maintenance.cleaner import run_compaction
from lakelog.log import Log
from lakelog.storage.storage_root import StorageRoot

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "api"))

from front_process import kafka_front_process  # noqa: E402

BASE_TS = 1_700_000_000_000


@pytest.fixture
def kafka_front(tmp_path):
    f = kafka_front_process(str(tmp_path / "root"), tmp_path / "logs").start()
    yield f
    f.stop()


def produce(bootstrap: str, topic: str, records: list[tuple]) -> dict[bytes, tuple[int, int]]:
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                  "compression.type": "lz4", "linger.ms": 5})
    acked, errors = {}, []

    def done(err, msg):
        if err:
            errors.append(err)
        else:
            acked[msg.value()] = (msg.partition(), msg.offset())

    for key, value, headers, ts, partition in records:
        p.produce(topic, key=key, value=value, headers=headers, timestamp=ts, partition=partition, on_delivery=done)
    assert p.flush(60) == 0 and not errors, errors
    return acked


def consume(bootstrap: str, topic: str, partitions: int, expected: int) -> list:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{time.monotonic_ns()}",
                  "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        out, deadline = [], time.monotonic() + 60
        while len(out) < expected and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None:
                assert m.error() is None, m.error()
                out.append(m)
        time.sleep(0.5)  # anything past the expected count would show up here
        while (m := c.poll(0.2)) is not None:
            out.append(m)
        return out
    finally:
        c.close()


def test_kafka_records_in_spark_and_through_compaction(spark, kafka_front):
    log = Log(StorageRoot.resolve(kafka_front.root))
    log.create_topic("orders", 2, {"cleanup.policy": "compact", "min.compaction.lag.ms": "0"})
    records = [(f"k{i % 5}".encode(), f"v{i}".encode(), [("trace", f"t{i}".encode())], BASE_TS + i, i % 2)
               for i in range(40)]
    acked = {}
    for start in range(0, 40, 10):  # four flushes: four commits, so several segments per partition
        acked |= produce(kafka_front.bootstrap, "orders", records[start:start + 10])
    assert len(acked) == 40 and len(log.segments("orders", 0)) >= 3

    rows = (spark.read.format("lakelog").option("path", kafka_front.root).option("subscribe", "orders")
            .option("includeHeaders", "true").load().collect())
    assert len(rows) == 40
    for r in rows:
        i = int(r["value"][1:])
        key, value, headers, ts, partition = records[i]
        assert (r["partition"], r["offset"]) == acked[value]
        assert bytes(r["key"]) == key and r["timestampType"] == 0
        assert int(r["timestamp"].timestamp() * 1000) == ts
        assert [(h["key"], bytes(h["value"])) for h in r["headers"]] == headers
    # producer ids: idempotent Kafka records keep theirs in the table (what HTTP fetch reports too)
    assert {b["producer_id"] for b in _http_records(kafka_front, 0)} != {-1}

    report = run_compaction(spark, log.root, ["orders"], min_dirty_ratio=-1)
    assert report.topics, report
    latest = {}
    for key, value, headers, ts, partition in records:
        latest[(partition, key)] = (value, headers, ts)
    got = consume(kafka_front.bootstrap, "orders", 2, len(latest))
    # Kafka's cleaner keeps each partition's last segment whole (the active segment): at least the latest
    # record of every key remains, at its original offset, with its headers and timestamp.
    by_value = {m.value(): m for m in got}
    for (partition, key), (value, headers, ts) in latest.items():
        m = by_value[value]
        assert (m.partition(), m.offset()) == acked[value]
        assert m.key() == key and m.headers() == headers and m.timestamp()[1] == ts
    assert len(got) < 40, "compaction removed superseded records"
    for p in (0, 1):
        offsets = [m.offset() for m in got if m.partition() == p]
        assert offsets == sorted(offsets)


def _http_records(front, partition: int) -> list[dict]:
    import httpx

    r = httpx.get(f"{front.url}/v1/topics/orders/partitions/{partition}/records",
                  params={"offset": 0, "max_records": 100}, timeout=30)
    assert r.status_code == 200, r.text
    return r.json()["records"]
