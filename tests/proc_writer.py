"""A lakelog writer run as a child process by the fencing and crash tests.

Usage: ``python proc_writer.py '<json config>'``.  Config keys:

- ``root`` {uri, options}, ``topic``, ``writer`` (an id baked into every value);
- ``appends``: how many appends (append ``i`` writes ``1 + i % 3`` records to
  partitions ``[0, 1]`` when ``i % 3 == 0``, else to ``[i % 2]``, of
  ``partitions`` (default 2));
- ``ready_file`` / ``go_file``: create the first, then wait for the second
  (so several children start hammering at the same moment);
- ``think_ms``: sleep up to this long (seeded random) before each append;
- ``idempotent``: append as an idempotent producer (id and epoch reported first);
- ``pause``: ``before_commit`` (segments written, commit not started) or
  ``after_commit`` (committed, not yet acknowledged): write ``marker`` as JSON
  and sleep until killed.  This instruments the child; storage is untouched.

Every result is one JSON line on stdout, flushed at once:
``{"event": "ack", "i", "p", "base", "n", "dup"}`` or ``{"event": "error", "i", "p", "code", "retriable"}``,
and finally ``{"event": "done", "conflicts"}`` (commits that lost a fencing race and were retried).
Retriable errors are retried (up to 5 times) with the same batch, as a Kafka client would.
"""

from __future__ import annotations

import json
import logging
import os
import random
import sys
import time
from pathlib import Path


def emit(event: dict) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def write_marker(path: str, payload: dict) -> None:
    tmp = f"{path}.tmp"
    Path(tmp).write_text(json.dumps(payload))
    os.replace(tmp, path)  # the parent never sees a half-written marker


log = logging.getLogger("proc_writer")
CONFLICTS = [0]  # commits that lost a fencing race (the committer then refreshed and retried)


def instrument_commit(kind: str | None, marker: str | None) -> None:
    """Wrap ``Committer._commit``: count lost races, and pause where ``kind`` says."""
    from lakelog.writer.commit_pipeline import CommitPipeline
    from lakelog.writer.committer import Committer

    original = Committer._commit

    def paused(self, adds, txns, producer_rows, commit_id, *rest):
        from lakelog.storage.topic_snapshot import LEO_APP

        leo = {app[len(LEO_APP):]: v for app, v in txns.items() if app.startswith(LEO_APP)}
        if kind == "before_commit":
            write_marker(marker, {"paths": [a.path for a in adds], "leo": leo})
            time.sleep(600)
        outcome = original(self, adds, txns, producer_rows, commit_id, *rest)
        if outcome is None:
            CONFLICTS[0] += 1
            log.debug("conflict %d", CONFLICTS[0])
        if kind == "after_commit" and outcome is True:
            write_marker(marker, {"paths": [a.path for a in adds], "leo": leo, "version": self.snapshot.version})
            time.sleep(600)
        return outcome

    Committer._commit = paused

    concluded = CommitPipeline._conclude

    def conclude(self, flight):  # a pipelined commit that lost its version to the other writer's
        from lakelog.storage.delta_commit import CommitConflict

        if isinstance(flight.put.exception(), CommitConflict):
            CONFLICTS[0] += 1
        return concluded(self, flight)

    CommitPipeline._conclude = conclude


def main() -> None:
    cfg = json.loads(sys.argv[1])
    if cfg.get("log_level"):  # diagnostics on stderr
        logging.basicConfig(level=cfg["log_level"], format="%(relativeCreated)d %(name)s %(message)s")
    from lakelog import Log, PartitionBatch
    from lakelog.errors import KafkaError
    from lakelog.storage.storage_root import StorageRoot
    from lakelog.writer.records import normalize_records

    sys.path.insert(0, str(Path(__file__).parent))
    from proc_support import value_of

    root = StorageRoot.resolve(cfg["root"]["uri"], cfg["root"]["options"])
    log = Log(root)
    topic, writer, nparts = cfg["topic"], cfg["writer"], cfg.get("partitions", 2)
    producer = None
    if cfg.get("idempotent"):
        producer = log.init_producer()
        emit({"event": "producer", "producer_id": producer.producer_id, "epoch": producer.producer_epoch})
    instrument_commit(cfg.get("pause"), cfg.get("marker"))
    log.append_batches(topic, [])  # open the topic's committer (commits nothing) before the barrier
    if cfg.get("ready_file"):
        Path(cfg["ready_file"]).touch()
        while not Path(cfg["go_file"]).exists():
            time.sleep(0.005)
    next_seq = {p: 0 for p in range(nparts)}
    think = random.Random(writer)
    if cfg.get("accumulator"):  # group commits, pipelined on object stores: several appends in flight
        pipelined(log, topic, writer, nparts, cfg["appends"])
        emit({"event": "done", "conflicts": CONFLICTS[0]})
        return
    for i in range(cfg["appends"]):
        if cfg.get("think_ms"):  # a producer's pause between sends, so writers interleave rather than starve
            time.sleep(think.uniform(0, cfg["think_ms"]) / 1000)
        parts = [0, 1] if i % 3 == 0 else [i % 2]
        parts = [p % nparts for p in parts]
        n = 1 + i % 3
        batches = []
        for p in dict.fromkeys(parts):
            recs = normalize_records([{"key": f"k{j}", "value": value_of(writer, i, p, j)} for j in range(n)])
            if producer is not None:
                batches.append(PartitionBatch(p, recs, producer.producer_id, producer.producer_epoch, next_seq[p]))
            else:
                batches.append(PartitionBatch(p, recs))
        for attempt in range(6):
            results = log.append_batches(topic, batches)
            retry = []
            for b, r in zip(batches, results):
                if isinstance(r, KafkaError):
                    if r.retriable and attempt < 5:
                        retry.append(b)
                    else:
                        emit({"event": "error", "i": i, "p": b.partition, "code": r.code, "retriable": r.retriable,
                              "message": r.message[:300]})
                else:
                    emit({"event": "ack", "i": i, "p": b.partition, "base": r.base_offset, "n": r.record_count,
                          "dup": r.duplicate, "t": round(time.time(), 3), "attempt": attempt})
                    next_seq[b.partition] += b.records.num_rows
            if not retry:
                break
            batches = retry
            time.sleep(0.05)
    emit({"event": "done", "conflicts": CONFLICTS[0]})


def pipelined(log, topic: str, writer: int, nparts: int, appends: int, in_flight: int = 8) -> None:
    """Appends through ``Log.accumulator()`` with up to ``in_flight`` waiting, each reported (in the order they
    were sent) once its future resolves; no retries: an error is reported as such."""
    from collections import deque

    from lakelog import PartitionBatch
    from lakelog.errors import KafkaError
    from lakelog.writer.records import normalize_records
    from proc_support import value_of

    acc = log.accumulator(linger_ms=2)
    waiting: deque = deque()

    def report(block: bool) -> None:
        while waiting and (block or waiting[0][2].done()):
            i, batches, fut = waiting.popleft()
            for b, r in zip(batches, fut.result()):
                if isinstance(r, KafkaError):
                    emit({"event": "error", "i": i, "p": b.partition, "code": r.code, "retriable": r.retriable,
                          "message": r.message[:300]})
                else:
                    emit({"event": "ack", "i": i, "p": b.partition, "base": r.base_offset, "n": r.record_count,
                          "dup": r.duplicate, "t": round(time.time(), 3), "attempt": 0})
            block = False

    for i in range(appends):
        parts = [p % nparts for p in ([0, 1] if i % 3 == 0 else [i % 2])]
        batches = [PartitionBatch(p, normalize_records([{"key": f"k{j}", "value": value_of(writer, i, p, j)}
                                                        for j in range(1 + i % 3)]))
                   for p in dict.fromkeys(parts)]
        waiting.append((i, batches, acc.append(topic, batches)))
        report(block=len(waiting) >= in_flight)
    report(block=True)
    while waiting:
        report(block=True)
    acc.close()


if __name__ == "__main__":
    main()
