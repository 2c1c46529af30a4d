"""A consumer-group member in its own process, for the multi-process group tests.

    python consumer_proc.py '<json config>'

Config: ``bootstrap``, ``group``, ``topics``, ``log`` (a path), and optionally
``strategy``, ``instance_id``, ``session_timeout_ms``, ``heartbeat_interval_ms``,
``max_records``, ``stop`` (a path: the child closes the consumer and exits once it exists).

At-least-once: every polled batch is *processed* first -- one JSON line
``{"m": member, "g": generation, "t": topic, "p": partition, "o": [first, last], "pid": pid}``
appended to ``log`` and flushed -- and only then committed (``enable_auto_commit``
is off).  Rebalance callbacks log ``{"event": "assign"|"revoke", ...}`` lines, and a
``{"event": "ready"}`` line follows the first non-empty assignment.  A failed commit
(the partition moved in a rebalance) is logged and ignored: its next owner resumes
from the last successful commit, so records are re-read, never lost.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from lakelog.client import Consumer
from lakelog.errors import KafkaError


def main(config: dict) -> int:
    log = open(config["log"], "a", buffering=1)
    stop = Path(config["stop"]) if config.get("stop") else None
    pid = os.getpid()

    def write(entry: dict) -> None:
        log.write(json.dumps({**entry, "pid": pid, "time": time.time()}) + "\n")
        log.flush()

    consumer = Consumer(config["bootstrap"], group_id=config["group"], group_instance_id=config.get("instance_id"),
                        client_id=f"proc-{pid}", group_remote_assignor=config.get("assignor"),
                        enable_auto_commit=False, auto_offset_reset="earliest",
                        session_timeout_ms=config.get("session_timeout_ms", 2000),
                        heartbeat_interval_ms=config.get("heartbeat_interval_ms", 200),
                        max_poll_interval_ms=config.get("max_poll_interval_ms", 20_000))

    def on_assign(tps):
        md = consumer.group_metadata()
        write({"event": "assign", "m": md.member_id, "g": md.generation_id, "tps": [[t.topic, t.partition] for t in tps]})

    def on_revoke(tps):
        md = consumer.group_metadata()
        write({"event": "revoke", "m": md.member_id, "g": md.generation_id, "tps": [[t.topic, t.partition] for t in tps]})

    consumer.subscribe(config["topics"], on_assign=on_assign, on_revoke=on_revoke)
    ready = False
    try:
        while stop is None or not stop.exists():
            batches = consumer.poll(timeout_ms=200, max_records=config.get("max_records", 50))
            md = consumer.group_metadata()
            if not ready and consumer.assignment():
                ready = True
                write({"event": "ready", "m": md.member_id, "g": md.generation_id})
            for tp, records in batches.items():
                write({"m": md.member_id, "g": md.generation_id, "t": tp.topic, "p": tp.partition,
                       "o": [records[0].offset, records[-1].offset], "n": len(records)})
            if batches:
                try:
                    consumer.commit()
                except KafkaError as e:
                    write({"event": "commit-failed", "m": md.member_id, "g": md.generation_id, "error": str(e)})
    finally:
        consumer.close()
        write({"event": "closed"})
    return 0


if __name__ == "__main__":
    sys.exit(main(json.loads(sys.argv[1])))
