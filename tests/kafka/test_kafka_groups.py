"""Consumer groups of real librdkafka consumers (child processes) on the listener, with every assignor: joins,
a graceful leave, a SIGKILLed member whose session expires, cooperative incremental rebalances; committed
offsets seen by ``lakelog groups describe`` and over HTTP; an HTTP member sharing a group with Kafka members."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer

from front_process import REPO, new_topic

CHILD = str(Path(__file__).with_name("kafka_consumer_proc.py"))
PARTITIONS = 4


class Member:
    """A child consumer and what it reported."""

    def __init__(self, bootstrap: str, topic: str, group: str, strategy: str) -> None:
        cfg = {"bootstrap": bootstrap, "topic": topic, "group": group, "strategy": strategy, "session_ms": 3000}
        self.proc = subprocess.Popen([sys.executable, CHILD, json.dumps(cfg)], stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True)
        self.history: list[list] = []
        self.consumed = 0
        self.closed = False
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            ev = json.loads(line)
            if "assigned" in ev:
                self.history.append([tuple(x) for x in ev["assigned"]])
            elif "consumed" in ev:
                self.consumed = ev["consumed"]
            elif "closed" in ev:
                self.closed = True

    @property
    def assignment(self) -> set:
        return set(self.history[-1]) if self.history else set()

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(30)


def wait_for(members: list[Member], timeout: float = 60.0) -> None:
    """Until ``members`` own every partition between them, each at least one, none twice."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        sets = [m.assignment for m in members]
        union = set().union(*sets)
        if all(sets) and len(union) == PARTITIONS and sum(map(len, sets)) == PARTITIONS:
            return
        time.sleep(0.1)
    raise AssertionError(f"no settled assignment: {[sorted(m.assignment) for m in members]}")


def produce(bootstrap: str, topic: str, n: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap})
    for i in range(n):
        p.produce(topic, f"v{i}".encode(), partition=i % PARTITIONS)
    assert p.flush(30) == 0


@pytest.mark.parametrize("strategy", ["range", "roundrobin", "cooperative-sticky"])
def test_group_lifecycle_with_each_assignor(kafka_front, bootstrap, http, strategy):
    topic = new_topic(http, PARTITIONS)
    group = f"g-{uuid.uuid4().hex[:8]}"
    produce(bootstrap, topic, 40)
    a = Member(bootstrap, topic, group, strategy)
    members = [a]
    try:
        wait_for([a])
        b = Member(bootstrap, topic, group, strategy)
        members.append(b)
        wait_for([a, b])
        c = Member(bootstrap, topic, group, strategy)
        members.append(c)
        wait_for([a, b, c])
        deadline = time.monotonic() + 30
        while a.consumed + b.consumed + c.consumed < 40 and time.monotonic() < deadline:
            time.sleep(0.1)
        c.kill()  # no LeaveGroup: its session (3 s) must expire
        killed_at = time.monotonic()
        wait_for([a, b])
        assert time.monotonic() - killed_at >= 2.0, "the killed member's partitions moved before its session ended"
        b.stop()  # LeaveGroup: a takes everything at once
        wait_for([a], timeout=20)
        if strategy == "cooperative-sticky":
            # incremental: a never gave up everything it owned while members came and went
            first = a.history.index(next(h for h in a.history if h))
            assert all(a.history[first:]), f"a's assignment went empty: {a.history}"
        r = http.get(f"/v1/groups/{group}")
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["protocol"] == strategy and len(body["members"]) == 1
        committed = {(o["topic"], o["partition"]): o["offset"] for o in body["offsets"]}
        assert sum(committed.values()) == 40 and len(committed) == PARTITIONS
        cli = subprocess.run([sys.executable, "-m", "lakelog.cli", "groups", "describe", group, "--bootstrap",
                              kafka_front.url], capture_output=True, text=True, cwd=str(REPO), timeout=120,
                             env={**os.environ, "PYTHONPATH": str(REPO)})
        assert cli.returncode == 0, cli.stderr
        assert topic in cli.stdout and "10" in cli.stdout
    finally:
        for m in members:
            m.stop()


def test_http_and_kafka_members_share_a_group(bootstrap, http):
    topic = new_topic(http, PARTITIONS)
    group = f"g-{uuid.uuid4().hex[:8]}"
    a = Member(bootstrap, topic, group, "range")
    try:
        wait_for([a])
        result: dict = {}

        def join() -> None:
            result["r"] = http.post(f"/v1/groups/{group}/members", json={
                "topics": [topic], "protocols": ["range"], "session_timeout_ms": 10000,
                "rebalance_timeout_ms": 20000}, timeout=60)

        t = threading.Thread(target=join)
        t.start()
        t.join(60)
        r = result["r"]
        assert r.status_code == 200, r.text
        http_parts = {(x["topic"], x["partition"]) for x in r.json()["assignment"]}
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and (a.assignment & http_parts or len(a.assignment | http_parts) != 4):
            time.sleep(0.1)
        assert http_parts and a.assignment and not (a.assignment & http_parts)
        assert len(a.assignment | http_parts) == PARTITIONS
        http.delete(f"/v1/groups/{group}/members/{r.json()['member_id']}")
    finally:
        a.stop()
