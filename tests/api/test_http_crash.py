"""Crash: idempotent clients under load, the front killed with SIGKILL mid-load and restarted.

Three client threads, each its own idempotent :class:`lakelog.client.Producer`
(own producer id), send uniquely-valued records while the front is killed and
restarted on the same port.  The clients retry through the outage.  At the
end every record was acknowledged, and the log holds every acknowledged
record exactly once, at the offset it was acknowledged with, with dense
offsets in every partition -- and nothing else (no half-written batch).
"""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest

from front_process import new_topic
from lakelog.client import Producer

CLIENTS = 3
RECORDS_PER_CLIENT = 400
PARTITIONS = 3


def produce(url: str, topic: str, client: int, out: dict, errors: list) -> None:
    try:
        with Producer(url, linger_ms=5, batch_size=2500, retry_backoff_ms=50, retry_backoff_max_ms=500,
                      delivery_timeout_ms=180_000, request_timeout_ms=20_000) as producer:
            futures = []
            for i in range(RECORDS_PER_CLIENT):
                key = f"k{i % 7}".encode() if i % 3 else None  # keyed and sticky records
                value = f"c{client}-r{i}".encode()
                futures.append((value, producer.send(topic, value, key=key)))
                if i % 10 == 9:
                    time.sleep(0.04)  # spread the load over ~2 s, so the kill lands mid-load
            producer.flush(timeout=170)
            for value, f in futures:
                meta = f.result(timeout=1)
                out[value] = (meta.partition, meta.offset)
    except Exception as e:  # reported by the main thread
        errors.append(e)


@pytest.mark.slow
def test_kill_front_mid_load_every_ack_exactly_once(start_front):
    front = start_front()
    with front.client() as http:
        topic = new_topic(http, PARTITIONS)

    def committed() -> int:
        try:
            with front.client(timeout=5) as http:
                return sum(p["high_watermark"] for p in http.get(f"/v1/topics/{topic}").json()["partitions"])
        except Exception:
            return -1

    acked: dict[bytes, tuple[int, int]] = {}
    errors: list[Exception] = []
    threads = [threading.Thread(target=produce, args=(front.url, topic, c, acked, errors)) for c in range(CLIENTS)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 120
    while committed() < 100 and time.monotonic() < deadline:
        time.sleep(0.05)
    before_kill = committed()
    assert 0 < before_kill < CLIENTS * RECORDS_PER_CLIENT, "the kill must land mid-load"
    front.kill()
    time.sleep(1.0)  # clients see connection errors and back off
    front.start()
    for t in threads:
        t.join(timeout=200)
    assert not any(t.is_alive() for t in threads), "a client did not finish"
    assert not errors, errors
    assert len(acked) == CLIENTS * RECORDS_PER_CLIENT

    with front.client() as http:
        seen: dict[bytes, tuple[int, int]] = {}
        dup = Counter()
        for p in range(PARTITIONS):
            offset, records = 0, []
            while True:
                r = http.get(f"/v1/topics/{topic}/partitions/{p}/records",
                             params={"offset": offset, "max_records": 5000})
                assert r.status_code == 200, r.text
                page = r.json()
                records += page["records"]
                if page["next_offset"] >= page["high_watermark"]:
                    break
                offset = page["next_offset"]
            assert [x["offset"] for x in records] == list(range(len(records))), f"offsets of partition {p} not dense"
            for x in records:
                v = x["value"].encode()
                dup[v] += 1
                seen[v] = (p, x["offset"])
    assert [v for v, n in dup.items() if n > 1] == []  # nothing twice
    assert set(seen) == set(acked)  # everything acknowledged, nothing unacknowledged
    assert seen == acked  # each at the partition and offset it was acknowledged with
