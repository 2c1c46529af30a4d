"""Group members for the Kafka group tests: librdkafka consumers as child processes (``kafka_consumer_proc.py``)
reporting their rebalance callbacks, the ownership checker that reads them (and the Java tools' events, in the
same shape), and a producer that keeps records flowing while groups rebalance."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

from confluent_kafka import Producer

CHILD = str(Path(__file__).with_name("kafka_consumer_proc.py"))
PARTITIONS = 4


class Member:
    """A child consumer and what it reported."""

    def __init__(self, bootstrap: str, topic: str, group: str, strategy: str, name: str = "",
                 protocol: str = "classic") -> None:
        cfg = {"bootstrap": bootstrap, "topic": topic, "group": group, "strategy": strategy, "session_ms": 3000,
               "protocol": protocol}
        self.name = name or uuid.uuid4().hex[:6]
        self.proc = subprocess.Popen([sys.executable, CHILD, json.dumps(cfg)], stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True)
        self.history: list[list] = []
        self.events: list[dict] = []  # rebalance callbacks, with their time
        self.ended: float | None = None  # when it was killed or closed
        self.consumed = 0
        self.closed = False
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            ev = json.loads(line)
            if "event" in ev:
                self.events.append(ev)
            elif "assigned" in ev:
                self.history.append([tuple(x) for x in ev["assigned"]])
            elif "consumed" in ev:
                self.consumed = ev["consumed"]
            elif "closed" in ev:
                self.closed = True
                self.ended = time.time()

    @property
    def assignment(self) -> set:
        return set(self.history[-1]) if self.history else set()

    def kill(self) -> None:
        self.ended = time.time()
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(30)


def two_owners(members: list) -> list[tuple]:
    """Every pair of members that owned one partition at the same time, from their rebalance callbacks: a
    partition is owned from its assign to its revoke (or lost), or to the member's kill or close. Must be empty."""
    spans: dict[tuple, list] = {}
    for m in members:
        held: dict[tuple, float] = {}
        for ev in m.events:
            for tp in map(tuple, ev["tps"]):
                if ev["event"] == "assign":
                    held[tp] = ev["time"]
                elif tp in held:
                    spans.setdefault(tp, []).append((held.pop(tp), ev["time"], m.name))
        for tp, start in held.items():
            spans.setdefault(tp, []).append((start, m.ended or time.time(), m.name))
    out = []
    for tp, ss in spans.items():
        for i, (s1, e1, n1) in enumerate(ss):
            for s2, e2, n2 in ss[i + 1:]:
                if n1 != n2 and s1 < e2 and s2 < e1:
                    out.append((tp, n1, n2, round(min(e1, e2) - max(s1, s2), 3)))
    return out


def wait_for(members: list, timeout: float = 60.0, partitions: int = PARTITIONS) -> None:
    """Until ``members`` (anything with an ``assignment`` set) own every one of ``partitions`` between them, each
    at least one, none twice."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        sets = [m.assignment for m in members]
        union = set().union(*sets)
        if all(sets) and len(union) == partitions and sum(map(len, sets)) == partitions:
            return
        time.sleep(0.1)
    raise AssertionError(f"no settled assignment: {[sorted(m.assignment) for m in members]}")


def produce(bootstrap: str, topic: str, n: int, partitions: int = PARTITIONS) -> None:
    p = Producer({"bootstrap.servers": bootstrap})
    for i in range(n):
        p.produce(topic, f"v{i}".encode(), partition=i % partitions)
    assert p.flush(30) == 0


class LoadProducer(threading.Thread):
    """Produces to every partition until stopped (so rebalances happen under load)."""

    def __init__(self, bootstrap: str, topic: str, partitions: int = PARTITIONS) -> None:
        super().__init__(daemon=True)
        self.partitions = partitions
        # idempotent: a retried batch (a slow front under load) is written once, so every record is counted once
        self.p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})
        self.topic, self.halt, self.sent = topic, threading.Event(), 0

    def run(self) -> None:
        while not self.halt.is_set():
            for i in range(20):
                self.p.produce(self.topic, f"r{self.sent + i}".encode(), partition=(self.sent + i) % self.partitions)
            self.sent += 20
            self.p.poll(0)
            time.sleep(0.1)

    def stop(self) -> int:
        self.halt.set()
        self.join(30)
        assert self.p.flush(60) == 0
        return self.sent
