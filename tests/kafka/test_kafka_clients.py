"""Real Kafka clients (confluent-kafka, kafka-python, aiokafka, kcat) against a real ``lakelog serve
--kafka-listener``: produce with every codec and idempotence, consume from the beginning, by timestamp; the
same records over HTTP and the reverse."""

from __future__ import annotations

import asyncio
import base64
import subprocess
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def produce_confluent(bootstrap: str, topic: str, records: list[tuple], **conf) -> list[tuple[int, int]]:
    """Produce (key, value, headers, timestamp, partition) records; returns (partition, offset) per record."""
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 5,
                  **conf})
    acked, errors = [], []

    def done(err, msg):
        (errors if err else acked).append(err or (msg.partition(), msg.offset(), msg.value()))

    for key, value, headers, ts, partition in records:
        kw = {"partition": partition} if partition is not None else {}
        p.produce(topic, value=value, key=key, headers=headers, timestamp=ts or 0, on_delivery=done, **kw)
    assert p.flush(30) == 0
    assert not errors, errors
    return acked


def consume_all(bootstrap: str, topic: str, expected: int, **conf) -> list:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, **conf})
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(2)])
        out, deadline = [], time.monotonic() + 30
        while len(out) < expected and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None:
                assert m.error() is None, m.error()
                out.append(m)
        return out
    finally:
        c.close()


@pytest.mark.parametrize("codec", CODECS)
def test_confluent_idempotent_produce_every_codec_round_trips(bootstrap, topic, http, codec):
    now = int(time.time() * 1000)
    records = [(f"k{i}".encode(), f"value-{codec}-{i}".encode() * 3, [("h", f"{i}".encode())], now + i, None)
               for i in range(200)]
    acked = produce_confluent(bootstrap, topic, records, **{"compression.type": codec})
    assert len(acked) == 200
    got = consume_all(bootstrap, topic, 200)
    assert sorted(m.value() for m in got) == sorted(r[1] for r in records)
    by_value = {m.value(): m for m in got}
    for key, value, headers, ts, _ in records:
        m = by_value[value]
        assert m.key() == key and m.headers() == headers and m.timestamp()[1] == ts
    # per partition, offsets are dense and in the order the producer sent them
    for p in (0, 1):
        offs = [m.offset() for m in got if m.partition() == p]
        assert offs == list(range(len(offs)))
    # the same records over HTTP: offsets, timestamps, headers, producer ids
    r = http.get(f"/v1/topics/{topic}/partitions/0/records", params={"offset": 0, "max_records": 500,
                                                                     "encoding": "base64"})
    assert r.status_code == 200, r.text
    over_http = r.json()["records"]
    kafka_p0 = sorted((m.offset(), m.value(), m.timestamp()[1]) for m in got if m.partition() == 0)
    assert [(x["offset"], base64.b64decode(x["value"]), x["timestamp"]) for x in over_http] == kafka_p0
    assert all(x["producer_id"] >= 0 for x in over_http), "idempotent records keep their producer id"
    assert over_http[0]["headers"][0]["key"] == "h"


def test_http_produce_is_consumed_over_kafka(bootstrap, topic, http):
    r = http.post(f"/v1/topics/{topic}/records",
                  json={"records": [{"key": "a", "value": "from-http", "partition": 1, "timestamp": 1234567,
                                     "headers": [{"key": "x", "value": "y"}]}]})
    assert r.status_code == 200, r.text
    got = consume_all(bootstrap, topic, 1)
    assert len(got) == 1
    m = got[0]
    assert (m.partition(), m.offset(), m.key(), m.value(), m.timestamp()[1], m.headers()) == \
        (1, 0, b"a", b"from-http", 1234567, [("x", b"y")])


def test_offsets_for_times_and_list_offsets(bootstrap, topic):
    base = 1_700_000_000_000
    produce_confluent(bootstrap, topic, [(None, f"v{i}".encode(), None, base + i * 1000, 0) for i in range(10)])
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "x"})
    try:
        got = c.offsets_for_times([TopicPartition(topic, 0, base + 4500)], timeout=10)
        assert got[0].offset == 5
        got = c.offsets_for_times([TopicPartition(topic, 0, base + 99_000)], timeout=10)
        assert got[0].offset == -1  # no record that late: Kafka answers the end (-1 in the client)
        lo, hi = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        assert (lo, hi) == (0, 10)
    finally:
        c.close()


def test_kafka_python_and_aiokafka_round_trip(bootstrap, topic):
    from kafka import KafkaConsumer, KafkaProducer

    p = KafkaProducer(bootstrap_servers=bootstrap, acks="all", compression_type="gzip", enable_idempotence=True)
    futures = [p.send(topic, key=b"k", value=f"kp-{i}".encode(), partition=0) for i in range(50)]
    offsets = [f.get(timeout=30).offset for f in futures]
    p.close()
    assert offsets == list(range(50))

    async def aio() -> list[bytes]:
        from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

        prod = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, compression_type="lz4")
        await prod.start()
        try:
            md = await prod.send_and_wait(topic, b"aio-0", partition=0)
            assert md.offset == 50
        finally:
            await prod.stop()
        cons = AIOKafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False)
        await cons.start()
        try:
            from aiokafka import TopicPartition as ATP

            cons.assign([ATP(topic, 0)])
            await cons.seek_to_beginning(ATP(topic, 0))
            out = []
            while len(out) < 51:
                batch = await cons.getmany(timeout_ms=5000)
                assert batch, "aiokafka got nothing in 5 s"
                for msgs in batch.values():
                    out.extend(m.value for m in msgs)
            return out
        finally:
            await cons.stop()

    assert asyncio.run(aio()) == [f"kp-{i}".encode() for i in range(50)] + [b"aio-0"]

    c = KafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest", consumer_timeout_ms=5000,
                      enable_auto_commit=False)
    values = [m.value for m in c if m.partition == 0]
    c.close()
    assert values[:51] == [f"kp-{i}".encode() for i in range(50)] + [b"aio-0"]


def _kcat(*args: str, stdin: str | None = None) -> str:
    r = subprocess.run(["kcat", *args], input=stdin, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_kcat_metadata_produce_consume_and_timestamp_query(bootstrap, topic):
    listing = _kcat("-b", bootstrap, "-L", "-t", topic)
    assert f'topic "{topic}" with 2 partitions' in listing and "leader 1" in listing
    _kcat("-b", bootstrap, "-P", "-t", topic, "-p", "1", "-K", ":", "-z", "snappy",
          stdin="".join(f"k{i}:v{i}\n" for i in range(20)))
    out = _kcat("-b", bootstrap, "-C", "-t", topic, "-p", "1", "-e", "-f", "%o %k %s\n")
    assert out.splitlines() == [f"{i} k{i} v{i}" for i in range(20)]
    stamp = int(subprocess.run(["kcat", "-b", bootstrap, "-C", "-t", topic, "-p", "1", "-o", "5", "-c", "1",
                                "-f", "%T"], capture_output=True, text=True, timeout=60).stdout)
    q = _kcat("-b", bootstrap, "-Q", "-t", f"{topic}:1:{stamp}")
    assert f"{topic} [1] offset" in q
    assert int(q.split("offset")[1].split()[0]) <= 5  # first offset at or after the 6th record's timestamp


def test_producing_to_a_missing_topic_creates_it(bootstrap, http):
    """Kafka's auto.create.topics.enable (on by default): the producer's Metadata request creates the topic with
    num.partitions (1) partitions (tests/kafka/test_kafka_configs.py runs a front with it off)."""
    name = f"auto-{uuid.uuid4().hex[:8]}"
    p = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 30000})
    errors = []
    p.produce(name, b"x", on_delivery=lambda err, msg: errors.append(err))
    p.flush(60)
    assert errors == [None]
    assert len(http.get(f"/v1/topics/{name}").json()["partitions"]) == 1


def test_kafka_traffic_shows_in_the_fronts_metrics(bootstrap, topic, http):
    produce_confluent(bootstrap, topic, [(None, b"m", None, None, 0)])
    text = http.get("/metrics").text
    assert 'lakelog_kafka_request_duration_seconds_count{api="Produce"}' in text
    assert f'lakelog_records_in_total{{topic="{topic}"}} 1.0' in text
