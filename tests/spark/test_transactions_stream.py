"""A Spark stream reading ``kafka.isolation.level=read_committed`` from a topic a transactional Kafka producer
writes into, committing some transactions and aborting others while the query runs: the query's output holds
every committed record once and nothing of an aborted one.  Runs on the JVM source and on the Python source."""

from __future__ import annotations

import sys
import threading
import time
import uuid
from pathlib import Path

from confluent_kafka import Producer

from lakelog import Log
from lakelog.storage.storage_root import StorageRoot

from spark_support import lakelog_reader

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "api"))

from front_process import kafka_front_process, new_topic  # noqa: E402

PARTITIONS = 3
TRANSACTIONS = 24
PER_TRANSACTION = 15


def produce_transactions(bootstrap: str, topic: str, committed: list[bytes], aborted: list[bytes]) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"spark-{uuid.uuid4().hex[:6]}",
                  "linger.ms": 5})
    p.init_transactions(30)
    for t in range(TRANSACTIONS):
        commit = t % 3 != 1
        p.begin_transaction()
        batch = [b"t%02d-%02d" % (t, i) for i in range(PER_TRANSACTION)]
        for i, v in enumerate(batch):
            p.produce(topic, value=v, partition=i % PARTITIONS)
        p.flush(30)
        if commit:
            p.commit_transaction(30)
            committed.extend(batch)
        else:
            p.abort_transaction(30)
            aborted.extend(batch)
        time.sleep(0.1)


def test_read_committed_stream_sees_committed_transactions_once(spark, lakelog_source, tmp_path):
    root = str(tmp_path / "root")
    front = kafka_front_process(root, tmp_path / "front").start()
    try:
        with front.client() as http:
            topic = new_topic(http, PARTITIONS)
        committed: list[bytes] = []
        aborted: list[bytes] = []
        seen: list[tuple[int, int, bytes]] = []
        lock = threading.Lock()

        def on_batch(df, _):
            rows = df.select("partition", "offset", "value").collect()
            with lock:
                seen.extend((r.partition, r.offset, bytes(r.value)) for r in rows)

        storage = StorageRoot.resolve(root)
        df = lakelog_reader(spark, storage, stream=True, subscribe=topic, startingOffsets="earliest",
                            **{"kafka.isolation.level": "read_committed"}).load(storage.uri)
        q = (df.writeStream.trigger(processingTime="300 milliseconds")
             .option("checkpointLocation", str(tmp_path / "ck")).foreachBatch(on_batch).start())
        try:
            producer = threading.Thread(target=produce_transactions,
                                        args=(front.bootstrap, topic, committed, aborted))
            producer.start()
            producer.join(120)
            assert not producer.is_alive()
            log = Log(root)
            end = sum(log.snapshot(topic).high_watermark(p) for p in range(PARTITIONS))
            deadline = time.monotonic() + 90
            while True:
                with lock:
                    if len(seen) >= end:
                        break
                assert time.monotonic() < deadline, f"the stream read {len(seen)} of {end} records"
                assert q.exception() is None
                time.sleep(0.3)
            time.sleep(1.0)  # a duplicate delivered late would show here
        finally:
            q.stop()
        values = [v for _, _, v in seen]
        assert len(values) == len(set(values)) == end == len(committed)  # no duplicates, nothing missing
        assert set(values) == set(committed) and not set(values) & set(aborted)
        for p in range(PARTITIONS):  # each partition in offset order, dense from 0
            offsets = [o for q_, o, _ in seen if q_ == p]
            assert offsets == list(range(len(offsets)))
        batch = lakelog_reader(spark, storage, subscribe=topic,
                               **{"kafka.isolation.level": "read_uncommitted"}).load(storage.uri)
        assert sorted(bytes(r.value) for r in batch.select("value").collect()) == sorted(committed)
    finally:
        front.stop()
