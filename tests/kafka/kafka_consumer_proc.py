"""A confluent-kafka group consumer as a child process (so a test can SIGKILL it).

    python kafka_consumer_proc.py '<json config>'

Config: bootstrap, topic, group, strategy (or ``"protocol": "consumer"`` for KIP-848), session_ms.  Prints one
JSON line per rebalance callback (``{"event": "assign"|"revoke"|"lost", "tps": [...], "time": t}``, printed before
the callback returns), one per change of its assignment (``{"assigned": [[topic, partition], ...]}``), and
``{"consumed": n}`` after each commit; commits synchronously after every poll that returned records.  Stops on
SIGTERM (closing: it leaves the group).
"""

from __future__ import annotations

import json
import signal
import sys
import time

from confluent_kafka import Consumer


def main() -> None:
    cfg = json.loads(sys.argv[1])
    conf = {"bootstrap.servers": cfg["bootstrap"], "group.id": cfg["group"], "auto.offset.reset": "earliest",
            "enable.auto.commit": False}
    if cfg.get("protocol") == "consumer":
        conf["group.protocol"] = "consumer"
    else:
        conf.update({"partition.assignment.strategy": cfg["strategy"], "session.timeout.ms": cfg["session_ms"],
                     "heartbeat.interval.ms": 300})
    c = Consumer(conf)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))

    def event(kind: str):
        def callback(consumer, partitions) -> None:
            print(json.dumps({"event": kind, "tps": sorted([tp.topic, tp.partition] for tp in partitions),
                              "time": time.time()}), flush=True)
        return callback

    c.subscribe([cfg["topic"]], on_assign=event("assign"), on_revoke=event("revoke"), on_lost=event("lost"))
    last = None
    consumed = 0
    while not stop:
        msgs = c.consume(100, 0.2)
        good = [m for m in msgs if m.error() is None]
        if good:
            consumed += len(good)
            try:
                c.commit(asynchronous=False)
                print(json.dumps({"consumed": consumed}), flush=True)
            except Exception as e:  # a commit racing a rebalance: the next poll retries
                print(json.dumps({"commit_error": str(e)}), flush=True)
        now = sorted([tp.topic, tp.partition] for tp in c.assignment())
        if now != last:
            print(json.dumps({"assigned": now}), flush=True)
            last = now
    c.close()
    print(json.dumps({"closed": True}), flush=True)


if __name__ == "__main__":
    main()
