"""Helpers of the consumer-group tests: child consumer processes, their logs, waiting on the coordinator.

Test modules import from here (``conftest`` names are ambiguous across ``tests/``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Callable

import httpx

CONSUMER_SCRIPT = str(Path(__file__).with_name("consumer_proc.py"))
REPO = Path(__file__).resolve().parents[2]
WAIT_S = 90.0  # generous: the machine is small and shared


def wait_until(predicate: Callable[[], object], timeout: float = WAIT_S, what: str = "condition",
               interval: float = 0.1):
    """Poll ``predicate`` until it returns something truthy (returned); fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})")


def describe(http: httpx.Client, group: str) -> dict | None:
    r = http.get(f"/v1/groups/{group}")
    return r.json() if r.status_code == 200 else None


def owners(desc: dict) -> dict[tuple[str, int], str]:
    """(topic, partition) -> member id, from a describe answer."""
    return {(a["topic"], a["partition"]): m["member_id"] for m in desc["members"] for a in m["assignment"]}


def stable_with(http: httpx.Client, group: str, members: int, partitions: int) -> dict | None:
    """The group's description once it is Stable with ``members`` members owning ``partitions`` partitions."""
    d = describe(http, group)
    if d and d["state"] == "Stable" and len(d["members"]) == members and len(owners(d)) == partitions:
        return d
    return None


class ConsumerProcess:
    """``consumer_proc.py`` as a child process; its JSON-lines log is ``log``."""

    def __init__(self, workdir: Path, name: str, **config) -> None:
        self.name = name
        self.log = workdir / f"{name}.jsonl"
        self.stop_file = workdir / f"{name}.stop"
        self.config = {"log": str(self.log), "stop": str(self.stop_file), **config}
        self.stderr = open(workdir / f"{name}.stderr", "wb")
        self.proc = subprocess.Popen([sys.executable, CONSUMER_SCRIPT, json.dumps(self.config)], cwd=str(REPO),
                                     env={**os.environ, "PYTHONPATH": str(REPO)}, stderr=self.stderr,
                                     stdout=subprocess.DEVNULL)

    def entries(self) -> list[dict]:
        if not self.log.exists():
            return []
        out = []
        for line in self.log.read_text().splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                pass  # a line cut short by SIGKILL
        return out

    def events(self, kind: str) -> list[dict]:
        return [e for e in self.entries() if e.get("event") == kind]

    def wait_ready(self) -> dict:
        def ready():
            if self.proc.poll() is not None:
                raise AssertionError(f"{self.name} exited with {self.proc.returncode}: {self.stderr_text()}")
            return next(iter(self.events("ready")), None)
        return wait_until(ready, what=f"{self.name} to get an assignment")

    def stderr_text(self) -> str:
        self.stderr.flush()
        return Path(self.stderr.name).read_text()[-3000:]

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=30)

    def stop(self, timeout: float = 60) -> int:
        """Ask the child to close its consumer (commit + leave) and wait for it."""
        self.stop_file.touch()
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"{self.name} did not stop: {self.stderr_text()}")

    def close(self) -> None:
        self.kill()
        self.stderr.close()


def consumed_ranges(procs: list[ConsumerProcess]) -> list[dict]:
    """Every processed batch of every child: member, generation, topic, partition, [first, last] offsets."""
    return [e for p in procs for e in p.entries() if "o" in e]


def overlapping_owners(procs: list["ConsumerProcess"]) -> list[tuple]:
    """Pairs of members that owned one partition at the same time, from each child's assign/revoke events (a
    partition is owned from its ``assign`` to its ``revoke``, or to the child's last log line): must be empty."""
    intervals: dict[tuple, list[tuple[float, float, str]]] = defaultdict(list)
    for proc in procs:
        entries = proc.entries()
        if not entries:
            continue
        end_of_life = entries[-1]["time"]
        held: dict[tuple, float] = {}
        for e in entries:
            for tp in map(tuple, e.get("tps", [])):
                if e.get("event") == "assign":
                    held[tp] = e["time"]
                elif e.get("event") == "revoke" and tp in held:
                    intervals[tp].append((held.pop(tp), e["time"], proc.name))
        for tp, start in held.items():
            intervals[tp].append((start, end_of_life, proc.name))
    out = []
    for tp, spans in intervals.items():
        spans.sort()
        for (s1, e1, n1), (s2, e2, n2) in zip(spans, spans[1:]):
            if n1 != n2 and s2 < e1:
                out.append((tp, n1, (s1, e1), n2, (s2, e2)))
    return out


def missing_offsets(batches: list[dict], topic: str, high_watermarks: dict[int, int]) -> dict[int, list[int]]:
    """Per partition, offsets below the high watermark that no batch covered (must be empty: at-least-once)."""
    seen: dict[int, set[int]] = defaultdict(set)
    for b in batches:
        if b["t"] == topic:
            seen[b["p"]].update(range(b["o"][0], b["o"][1] + 1))
    return {p: sorted(set(range(hw)) - seen[p])[:10] for p, hw in high_watermarks.items()
            if set(range(hw)) - seen[p]}


class ProducerThread(threading.Thread):
    """Appends small batches to every partition of ``topic`` through the library until stopped."""

    def __init__(self, root: str, topic: str, partitions: int, interval_s: float = 0.05, batch: int = 5) -> None:
        super().__init__(daemon=True)
        from lakelog import Log

        self.log = Log(root)
        self.topic, self.partitions, self.interval_s, self.batch = topic, partitions, interval_s, batch
        self.halt = threading.Event()
        self.appended = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        i = 0
        try:
            while not self.halt.is_set():
                p = i % self.partitions
                self.log.append(self.topic, [{"value": f"r{i}-{j}".encode()} for j in range(self.batch)],
                                partition=p)
                self.appended += self.batch
                i += 1
                self.halt.wait(self.interval_s)
        except BaseException as e:  # reported by the test
            self.error = e

    def stop(self) -> None:
        self.halt.set()
        self.join(timeout=60)
        if self.error is not None:
            raise AssertionError(f"the producer failed: {self.error!r}")


def high_watermarks(http: httpx.Client, topic: str) -> dict[int, int]:
    return {p["partition"]: p["high_watermark"] for p in http.get(f"/v1/topics/{topic}").json()["partitions"]}
