"""librdkafka's idempotent producer keeps retrying while the listener's process is SIGKILLed and restarted
several times: no acknowledged record is lost, none is written twice, and each partition keeps the order
the producer sent."""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest
from confluent_kafka import Producer

from front_process import kafka_front_process, new_topic

RECORDS = 3000
PARTITIONS = 2


@pytest.mark.slow
def test_idempotent_producer_survives_kill_9_restarts(tmp_path):
    front = kafka_front_process(str(tmp_path / "root"), tmp_path / "logs")
    front.start()
    try:
        with front.client() as http:
            topic = new_topic(http, PARTITIONS)
        p = Producer({"bootstrap.servers": front.bootstrap, "enable.idempotence": True, "acks": "all",
                      "linger.ms": 5, "message.timeout.ms": 180000, "retry.backoff.ms": 100,
                      "reconnect.backoff.max.ms": 500, "compression.type": "lz4"})
        acked: dict[int, list[int]] = {p_: [] for p_ in range(PARTITIONS)}
        failed = []

        def done(err, msg) -> None:
            if err is not None:
                failed.append(err)
            else:
                acked[msg.partition()].append(int(msg.value()))

        stop = threading.Event()
        restarts = []

        def chaos() -> None:
            for _ in range(3):
                if stop.wait(1.0):
                    return
                front.restart(crash=True)  # SIGKILL: nothing of the process's shutdown runs
                restarts.append(time.monotonic())

        killer = threading.Thread(target=chaos)
        killer.start()
        for i in range(RECORDS):
            p.produce(topic, str(i).encode(), partition=i % PARTITIONS, on_delivery=done)
            p.poll(0)
            time.sleep(0.0015)
        killer.join(120)
        stop.set()
        assert p.flush(180) == 0, "records still unacknowledged"
        assert len(restarts) == 3
        assert not failed, failed[:3]
        with front.client() as http:
            for part in range(PARTITIONS):
                stored = []
                offset = 0
                while True:
                    r = http.get(f"/v1/topics/{topic}/partitions/{part}/records",
                                 params={"offset": offset, "max_records": 1000})
                    assert r.status_code == 200, r.text
                    recs = r.json()["records"]
                    if not recs:
                        break
                    stored.extend(int(x["value"]) for x in recs)
                    offset = recs[-1]["offset"] + 1
                dupes = [v for v, c in Counter(stored).items() if c > 1]
                assert not dupes, f"partition {part}: written twice: {dupes[:10]}"
                assert stored == sorted(stored), f"partition {part}: order not kept"
                assert set(acked[part]) <= set(stored), "acknowledged records lost"
                assert stored == list(range(part, RECORDS, PARTITIONS)), "records missing"
    finally:
        front.kill()
