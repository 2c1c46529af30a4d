"""Consume-transform-produce exactly once through kill -9: a confluent-kafka service (``ctp_loop.py``) that
commits its input offsets inside its output transactions is killed at random points 20 times -- itself, the
front, or both -- and restarted.  Afterwards every input record is in the output exactly once, in its partition's
order, and the group's committed offsets are the input's high watermarks: both or neither, at every crash.
"""

from __future__ import annotations

import random
import subprocess
import sys
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

from front_process import kafka_front_process, new_topic

pytestmark = __import__("pytest").mark.slow
LOOP = Path(__file__).with_name("ctp_loop.py")
PARTITIONS = 4
RECORDS = 12000
KILLS = 20


def committed_output(bootstrap: str, topic: str) -> dict[int, list[bytes]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False, "isolation.level": "read_committed"})
    tps = [TopicPartition(topic, p, 0) for p in range(PARTITIONS)]
    ends = {p: c.get_watermark_offsets(TopicPartition(topic, p), 20)[1] for p in range(PARTITIONS)}
    c.assign(tps)
    out: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    deadline = time.monotonic() + 60
    while sum(len(v) for v in out.values()) < sum(ends.values()) and time.monotonic() < deadline:
        for m in c.consume(500, 0.5):
            if not m.error():
                out[m.partition()].append(m.value())
    c.close()
    return out


def test_consume_transform_produce_is_exactly_once_through_kill_9(tmp_path):
    front = kafka_front_process(str(tmp_path / "root"), tmp_path / "front").start()
    try:
        with front.client() as http:
            src, dst = new_topic(http, PARTITIONS), new_topic(http, PARTITIONS)
        p = Producer({"bootstrap.servers": front.bootstrap, "enable.idempotence": True, "linger.ms": 5})
        expected: dict[int, list[bytes]] = {q: [] for q in range(PARTITIONS)}
        for i in range(RECORDS):
            v = b"r%05d" % i
            p.produce(src, value=v, partition=i % PARTITIONS)
            expected[i % PARTITIONS].append(b"out:" + v)
        assert p.flush(30) == 0
        group, tid = f"ctp-{uuid.uuid4().hex[:6]}", f"ctp-{uuid.uuid4().hex[:6]}"
        args = [sys.executable, str(LOOP), front.bootstrap, src, dst, group, tid, str(PARTITIONS), "0.05"]
        rng = random.Random(16)
        log = open(tmp_path / "loop.log", "ab")
        victims, mid_stream = [], 0
        for kill in range(KILLS):
            loop = subprocess.Popen(args, stdout=log, stderr=log)
            time.sleep(rng.uniform(0.5, 3.0))
            victim = "front" if kill % 5 == 2 else "both" if kill % 5 == 4 else "loop"
            victims.append(victim)
            mid_stream += loop.poll() is None  # still working (not done, not failed) when killed
            if victim in ("loop", "both"):
                loop.kill()
            if victim in ("front", "both"):
                front.kill()
                front.start()
            try:
                loop.wait(5)  # a loop that lost its front works on with the restarted one, fails (exit 3) or ends
            except subprocess.TimeoutExpired:
                loop.kill()
                loop.wait()
        assert mid_stream >= KILLS - 3, f"only {mid_stream} of {KILLS} kills hit a running service"
        args[-1] = "0"
        codes = []
        for _ in range(5):  # a fresh instance may meet a retriable error (exit 3) and is restarted
            codes.append(subprocess.run(args, stdout=log, stderr=log, timeout=180).returncode)
            if codes[-1] == 0:
                break
        lines = [s for s in (tmp_path / "loop.log").read_text().splitlines() if not s.startswith("%")]
        assert codes[-1] == 0, (codes, lines[-20:])
        assert victims.count("loop") >= 8 and victims.count("front") >= 4 and victims.count("both") >= 4
        got = committed_output(front.bootstrap, dst)
        assert {q: len(v) for q, v in got.items()} == {q: len(v) for q, v in expected.items()}
        assert got == expected  # every input once, in order: no loss, no duplicate, no aborted record
        c = Consumer({"bootstrap.servers": front.bootstrap, "group.id": group})
        committed = c.committed([TopicPartition(src, q) for q in range(PARTITIONS)], 20)
        c.close()
        assert [tp.offset for tp in committed] == [RECORDS // PARTITIONS] * PARTITIONS
    finally:
        front.stop()
