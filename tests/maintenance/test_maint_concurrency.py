"""Jobs running while producers append (separate Log instances, fenced against each other) and a streaming query
reads: no acknowledged record lost or duplicated, and the stream's output is exactly what was acknowledged."""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from lakelog import Log
from lakelog.maintenance.cleaner import run_compaction
from lakelog.maintenance.segment_merge import run_merge
from lakelog.maintenance.retention import run_retention
from lakelog.maintenance.vacuum import run_vacuum

from maint_support import T0, check_contiguous, table_rows

pytestmark = pytest.mark.slow


class Producers:
    """Threads appending 3-record batches with unique keys to ``topics`` until stopped; every ack is kept."""

    def __init__(self, root, topics, partitions, n=2, max_appends=80):
        self.root, self.topics, self.partitions, self.n, self.max_appends = root, topics, partitions, n, max_appends
        self.stop = threading.Event()
        self.acked: list[tuple[str, int, int, bytes, bytes]] = []
        self.errors: list[BaseException] = []
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._run, args=(i,), daemon=True) for i in range(n)]

    def _run(self, w: int) -> None:
        log = Log(self.root)
        try:
            for a in range(self.max_appends):
                if self.stop.is_set():
                    return
                topic = self.topics[a % len(self.topics)]
                p = (a // len(self.topics) + w) % self.partitions
                recs = [(f"w{w}-a{a}-r{r}".encode(), f"v{w}-{a}-{r}".encode()) for r in range(3)]
                res = log.append(topic, [{"key": k, "value": v} for k, v in recs], partition=p)[0]
                with self._lock:
                    self.acked.extend((topic, p, res.base_offset + i, k, v) for i, (k, v) in enumerate(recs))
                time.sleep(0.03)
        except BaseException as e:  # surfaced by finish()
            self.errors.append(e)

    def start(self) -> "Producers":
        for t in self._threads:
            t.start()
        return self

    def finish(self) -> None:
        self.stop.set()
        for t in self._threads:
            t.join(timeout=300)
        assert not self.errors, self.errors


def test_jobs_while_producers_append_and_a_stream_reads(spark, local_root):
    log = Log(local_root)
    log.create_topic("c", 2, {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01"})
    log.create_topic("d", 2, {"retention.ms": "86400000"})
    for i in range(4):  # history: repeated keys in c, long-expired records in d
        for p in range(2):
            log.append("c", [{"key": f"old{j}", "value": f"{i}"} for j in range(3)], partition=p)
            log.append("d", [{"key": "old", "value": f"{i}", "timestamp": T0}], partition=p)
    name = f"maint_{uuid.uuid4().hex[:8]}"
    df = spark.readStream.format("lakelog").option("subscribe", "c,d").option("startingOffsets", "latest") \
        .load(local_root.uri)
    q = df.writeStream.format("memory").queryName(name).trigger(processingTime="500 milliseconds").start()
    try:
        q.processAllAvailable()  # "latest" resolved before anything new is produced
        producers = Producers(local_root, ["c", "d"], 2).start()
        try:
            deadline = time.monotonic() + 120
            while len({(t, p) for t, p, *_ in list(producers.acked)}) < 4 and time.monotonic() < deadline:
                time.sleep(0.1)  # every partition has new data: the history is no longer the newest segment
            assert run_compaction(spark, local_root, ["c"]).topics[0].segments_removed > 0
            assert run_merge(spark, local_root, ["c", "d"]).topics[0].segments_removed > 0
            assert run_retention(local_root, ["d"]).topics[0].segments_removed > 0
        finally:
            producers.finish()
        q.processAllAvailable()
        streamed = [(r.topic, r.partition, r.offset, bytes(r.key), bytes(r.value))
                    for r in spark.sql(f"select topic, partition, offset, key, value from {name}").collect()]
        assert q.exception() is None
    finally:
        q.stop()
    assert producers.acked and len(streamed) == len(set(streamed))
    assert sorted(streamed) == sorted(producers.acked)  # everything acknowledged, once, nothing else
    final = {(t, p, o, k, v) for t in ("c", "d") for p in range(2) for o, k, v in table_rows(log, t, p)}
    assert set(producers.acked) <= final  # compaction kept every (unique-key) ack; retention only old segments
    for p in range(2):
        assert [k for _, k, _ in table_rows(log, "c", p) if k.startswith(b"old")] == [b"old0", b"old1", b"old2"]
        assert [v for _, k, v in table_rows(log, "d", p) if k == b"old"] == []
    check_contiguous(log.snapshot("c"))
    check_contiguous(log.snapshot("d"))


def test_vacuum_while_producers_append(local_root):
    log = Log(local_root)
    log.create_topic("v", 2, {"retention.ms": "1000", "file.delete.delay.ms": "0"})
    for i in range(3):
        for p in range(2):
            log.append("v", [{"key": "old", "value": f"{i}", "timestamp": T0}], partition=p)
    producers = Producers(local_root, ["v"], 2, max_appends=40).start()
    try:
        for _ in range(4):
            run_retention(local_root, ["v"], now_ms=T0 + 10_000)  # the new records are recent: never expired
            run_vacuum(local_root, ["v"])  # removed files go at once; in-flight appends are younger than an hour
            time.sleep(0.2)
    finally:
        producers.finish()
    final = {("v", p, o, k, v) for p in range(2) for o, k, v in table_rows(log, "v", p)}
    assert producers.acked, "no append was acknowledged while the jobs ran"
    assert set(producers.acked) <= final
    check_contiguous(log.snapshot("v"))
