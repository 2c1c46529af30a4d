"""A confluent-kafka producer as a child process, for the quotas benchmark (its own interpreter: two producers
measured side by side do not share a GIL).

    python -m bench._quota_producer '<json config>'

Config: bootstrap, topic, client_id, seconds (how long to produce), start (time.time() to start at), offered
(bytes/s to pace at, or null). Writes 10 KB records as fast as it may (or at the offered rate), then prints one JSON line: ``{"acks": [seconds since start ...], "throttles":
[seconds since start ...]}`` -- when each record was acknowledged (within the run) and when librdkafka reported
a throttle time above zero.
"""

from __future__ import annotations

import json
import sys
import time

from confluent_kafka import Producer


def main() -> None:
    cfg = json.loads(sys.argv[1])
    acks: list[float] = []
    throttles: list[float] = []
    start = cfg["start"]
    end = start + cfg["seconds"]
    # small batches: a request carries a few records, so the rate seen is the quota's, not one request's burst; a
    # small local queue: a throttled producer waits instead of spinning through its default 1 GB of buffer
    p = Producer({"bootstrap.servers": cfg["bootstrap"], "client.id": cfg["client_id"], "linger.ms": 5,
                  "acks": "all", "batch.size": 20_000, "queue.buffering.max.kbytes": 2048,
                  "throttle_cb": lambda e: e.throttle_time > 0 and throttles.append(time.time() - start)})

    def done(err, msg) -> None:
        now = time.time()
        if err is None and now < end:
            acks.append(now - start)

    p.list_topics(cfg["topic"], timeout=30)  # connected before the clock starts
    time.sleep(max(0.0, start - time.time()))
    value = b"v" * 10_000
    gap = len(value) / cfg["offered"] if cfg.get("offered") else 0.0
    sent = 0
    while time.time() < end:
        wait = start + sent * gap - time.time() if gap else 0.0
        if wait > 0:
            p.poll(min(0.05, wait))  # never a negative timeout: poll() waits forever on one
            continue
        try:
            p.produce(cfg["topic"], value, on_delivery=done)
            sent += 1
        except BufferError:
            p.poll(0.05)
        p.poll(0)
    p.flush(60)
    print(json.dumps({"acks": acks, "throttles": throttles}), flush=True)


if __name__ == "__main__":
    main()
