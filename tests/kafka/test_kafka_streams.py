"""Kafka Streams against a real ``lakelog serve --kafka-listener``, from the reference jars (``reference/``, sets
``kafka`` and ``kafka-streams``, Kafka 4.1.1): a word count (classic protocol, ``StreamsPartitionAssignor`` with task
state in ``userData``, internal topics created through CreateTopics, exactly-once v2 transactions), killed with
SIGKILL halfway and restarted, gives exactly the input's counts. Its two JVM runs are the test: no other test here
starts one.
"""

from __future__ import annotations

import collections
import signal
import struct
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer

from front_process import new_topic
from java_programs import java_command


@pytest.fixture
def logs(tmp_path) -> Path:
    return tmp_path


def _words(line: str) -> list[str]:
    return [w for w in line.lower().split() if w]


class WordCountApp:
    """The Streams word count as a child JVM (stdin closed: it closes and exits)."""

    def __init__(self, classes: Path, bootstrap: str, app_id: str, source: str, sink: str, state: Path,
                 logs: Path, name: str) -> None:
        self.proc = subprocess.Popen(java_command(classes, "WordCount", bootstrap, app_id, source, sink, str(state),
                                                  log_dir=logs, name=name),
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True)
        self.log = logs / f"{name}.log"

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)

    def close(self) -> str:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(90)
            except subprocess.TimeoutExpired:
                self.kill()
        return self.proc.stdout.read()


def test_kafka_streams_word_count_exactly_once(bootstrap, http, java_classes, logs):
    """Streams' word count with processing.guarantee=exactly_once_v2: the input's first half is counted, the
    application is killed with SIGKILL (no close, a transaction possibly open), the second half is produced, the
    application restarts on its state directory: every word's last count equals its number in the input, and the
    counts read with read_committed never go down and never pass that number (no update counted twice)."""
    source, sink = new_topic(http, 2), new_topic(http, 2)
    app_id = f"wc-{uuid.uuid4().hex[:8]}"
    lines = [f"the quick brown fox {i % 7} jumps over the lazy dog {i % 3} line{i % 11}" for i in range(400)]
    expected = collections.Counter(w for line in lines for w in _words(line))
    producer = Producer({"bootstrap.servers": bootstrap})

    def produce(part: list[str]) -> None:
        for line in part:
            producer.produce(source, line.encode())
        assert producer.flush(30) == 0

    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{app_id}",
                       "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    reader.subscribe([sink])
    seen: dict[str, list[int]] = collections.defaultdict(list)

    def read_until(done, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not done() and time.monotonic() < deadline:
            m = reader.poll(0.5)
            if m is not None and m.error() is None:
                seen[m.key().decode()].append(struct.unpack(">q", m.value())[0])

    state = logs / "state"
    produce(lines[:200])
    app = WordCountApp(java_classes, bootstrap, app_id, source, sink, state, logs, "streams-1")
    try:
        read_until(lambda: sum(len(v) for v in seen.values()) >= 10, 240)
        assert seen, f"no counts from the first run:\n{app.log.read_text()[-3000:]}"
        app.kill()
        produce(lines[200:])
        app = WordCountApp(java_classes, bootstrap, app_id, source, sink, state, logs, "streams-2")
        final = lambda: {w: c[-1] for w, c in seen.items()}  # noqa: E731
        read_until(lambda: final() == dict(expected), 240)
        out = app.close()
    finally:
        app.kill() if app.proc.poll() is None else None
        reader.close()
    assert final() == dict(expected), {w: (final().get(w), n) for w, n in expected.items() if final().get(w) != n}
    for word, counts in seen.items():
        assert counts == sorted(counts) and counts[-1] <= expected[word], (word, counts)
    assert "RUNNING" in out
    # the group ran Streams' own assignor, the leader reading every member's userData
    d = http.get(f"/v1/groups/{app_id}").json()
    assert (d["type"], d["protocol"]) == ("classic", "stream"), d


def test_create_topics_answers_a_config_list(bootstrap):
    """CreateTopics v5+ answers each created topic's configs as a list, never null: the Java AdminClient reads the
    list unchecked, and Kafka Streams' InternalTopicManager failed on the NullPointerException, so Streams could
    not create its repartition and changelog topics."""
    from wire_client import WireClient

    name = f"t-{uuid.uuid4().hex[:10]}"
    with WireClient(bootstrap) as c:
        r = c.request(19, 7, {"topics": [{"name": name, "num_partitions": 2, "replication_factor": -1}],
                              "timeout": 30000})
    t = r.topics[0]
    assert (t.error_code, t.num_partitions, t.replication_factor) == (0, 2, 1)
    assert t.configs is not None
