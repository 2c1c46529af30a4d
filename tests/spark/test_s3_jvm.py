"""The JVM source on ``s3://`` roots through hadoop-aws's S3A, against the moto S3 server.

The shared session has hadoop-aws on its class path (conftest), so these reads run on the JVM and the tests check
they do. The batch and stream basics on both roots and both sources are in test_batch.py and test_streaming.py;
here: offset cutting and pruning on S3 against the Python source's rows, subscribePattern, groupId commits (also two
streams committing one group at once), a topic written, compacted and merged while a stream reads it, credentials
from ``storage.*`` options and from the AWS environment with hadoop-aws added as ``--packages`` adds it
(``spark.jars``), and the fallback to the Python source when no hadoop-aws is there.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid

import pytest

from lakelog import Log
from lakelog.group.consumer_offsets import OffsetStore
from lakelog.storage.storage_root import StorageRoot

from s3_server import BUCKET, CREDS, s3_options
from spark_support import (REPO, SPARK_ENV, hadoop_aws_classpath, lakelog_reader, produce, records_of,
                           scanned_by_jvm, without_hadoop_aws)

pytestmark = pytest.mark.s3


@pytest.fixture
def s3_log(s3_endpoint):
    return Log(StorageRoot.resolve(f"s3://{BUCKET}/{uuid.uuid4().hex}", s3_options(s3_endpoint)))


def stream_description(q) -> str:
    return q.lastProgress["sources"][0]["description"]


def available_now(df, checkpoint, on_batch):
    q = (df.writeStream.trigger(availableNow=True).option("checkpointLocation", str(checkpoint))
         .foreachBatch(on_batch).start())
    assert q.awaitTermination(300), "the AvailableNow query did not finish"
    assert q.exception() is None, q.exception()
    return q


def test_offset_ranges_pruning_and_rows_equal_the_python_sources(spark, s3_log):
    log = s3_log
    log.create_topic("orders", 2)
    for p in range(2):
        for batch in range(3):  # three segments per partition
            produce(log, "orders", p, 10, t0_ms=1_700_000_000_000 + batch * 100_000, prefix=f"b{batch}-")
    cut = {"startingOffsets": json.dumps({"orders": {"0": 4, "1": 15}}),
           "endingOffsets": json.dumps({"orders": {"0": 25, "1": -1}})}

    def read(source, **options):
        spark.conf.set("spark.lakelog.jvm.enabled", str(source == "jvm").lower())
        try:
            df = lakelog_reader(spark, log.root, subscribe="orders", **options).load(log.root.uri)
            assert scanned_by_jvm(df) == (source == "jvm")
            return df, records_of(df)
        finally:
            spark.conf.set("spark.lakelog.jvm.enabled", "true")

    df, jvm_rows = read("jvm", **cut)
    _, python_rows = read("python", **cut)
    assert jvm_rows == python_rows
    assert [(p, o) for _, p, o, _, _ in jvm_rows] == [(0, o) for o in range(4, 25)] + [(1, o) for o in range(15, 30)]
    # column pruning and partition pruning reach the S3 scan
    projected = df.where("partition = 1").select("value")
    plan = projected._jdf.queryExecution().executedPlan().toString()
    assert "ReadSchema: struct<value:binary>" in plan, plan
    assert sorted(bytes(r.value) for r in projected.collect()) == sorted(v for _, p, _, _, v in jvm_rows if p == 1)
    by_time, _ = read("jvm", startingTimestamp=str(1_700_000_100_000))
    assert sorted((r.partition, r.offset) for r in by_time.select("partition", "offset").collect()) == \
        [(p, o) for p in range(2) for o in range(10, 30)]


def test_subscribe_pattern_stream_picks_up_new_topics(spark, s3_log, tmp_path):
    log = s3_log
    for name in ("metrics-a", "metrics-b", "logs"):
        log.create_topic(name, 2)
        produce(log, name, 0, 6)
        produce(log, name, 1, 4)
    seen: list[tuple[str, int, int]] = []

    def on_batch(df, _):
        seen.extend((r.topic, r.partition, r.offset) for r in df.select("topic", "partition", "offset").collect())

    df = lakelog_reader(spark, log.root, stream=True, subscribePattern="metrics-.*",
                        startingOffsets="earliest").load(log.root.uri)
    q = available_now(df, tmp_path / "ck", on_batch)
    assert "LakelogMicroBatchStream[subscribePattern=metrics-.*" in stream_description(q)
    expected = [(t, p, o) for t in ("metrics-a", "metrics-b") for p, n in ((0, 6), (1, 4)) for o in range(n)]
    assert sorted(seen) == expected
    log.create_topic("metrics-c", 1)  # a new match joins at its earliest offset
    produce(log, "metrics-c", 0, 3)
    produce(log, "metrics-a", 1, 2)
    seen.clear()
    available_now(df, tmp_path / "ck", on_batch)
    assert sorted(seen) == [("metrics-a", 1, 4), ("metrics-a", 1, 5)] + [("metrics-c", 0, o) for o in range(3)]


def test_group_id_commits_resume_a_new_query(spark, s3_log, tmp_path):
    log = s3_log
    log.create_topic("orders", 2)
    produce(log, "orders", 0, 7)
    produce(log, "orders", 1, 5)
    seen: list[tuple[int, int]] = []

    def on_batch(df, _):
        seen.extend((r.partition, r.offset) for r in df.select("partition", "offset").collect())

    def query(checkpoint):
        return lakelog_reader(spark, log.root, stream=True, subscribe="orders", startingOffsets="earliest",
                              groupId="billing", maxOffsetsPerTrigger=5).load(log.root.uri), checkpoint

    df, ck = query(tmp_path / "ck1")
    q = available_now(df, ck, on_batch)
    assert "LakelogMicroBatchStream" in stream_description(q)
    assert sorted(seen) == [(0, o) for o in range(7)] + [(1, o) for o in range(5)]
    committed = {(c.topic, c.partition): c.offset for c in OffsetStore(log).fetch("billing")}
    assert committed == {("orders", 0): 7, ("orders", 1): 5}
    produce(log, "orders", 1, 3, prefix="late")
    seen.clear()
    df, ck = query(tmp_path / "ck2")  # no checkpoint: the group's offsets, not startingOffsets, say where to start
    available_now(df, ck, on_batch)
    assert sorted(seen) == [(1, o) for o in range(5, 8)]
    assert {(c.topic, c.partition): c.offset for c in OffsetStore(log).fetch("billing")} == \
        {("orders", 0): 7, ("orders", 1): 8}


@pytest.mark.slow
def test_two_streams_commit_one_group_at_once(spark, s3_log, tmp_path):
    """Two queries with one groupId (on different topics) commit concurrently to the same partition of
    ``__consumer_offsets``: no commit is lost and the group's offsets never go backwards."""
    log = s3_log
    topics = ("x", "y")
    for t in topics:
        log.create_topic(t, 2)
    done, errors, history = threading.Event(), [], []

    def produce_rounds():
        try:
            for i in range(8):
                for t in topics:
                    produce(log, t, i % 2, 5, prefix=f"r{i}-")
                time.sleep(0.5)
        except BaseException as e:  # noqa: BLE001 -- surfaced below
            errors.append(e)

    def watch_group():
        store, last = OffsetStore(log), {}
        while not done.is_set():
            try:
                now = {(c.topic, c.partition): c.offset for c in store.fetch("shared")}
            except BaseException as e:  # noqa: BLE001
                errors.append(e)
                return
            for tp, off in now.items():
                if off < last.get(tp, -1):
                    errors.append(AssertionError(f"{tp} went back from {last[tp]} to {off}"))
            missing = set(last) - set(now)
            if missing:
                errors.append(AssertionError(f"committed offsets of {missing} disappeared"))
            last = now
            history.append(now)
            time.sleep(0.2)

    queries = []
    for t in topics:
        df = lakelog_reader(spark, log.root, stream=True, subscribe=t, startingOffsets="earliest",
                            groupId="shared").load(log.root.uri)
        queries.append(df.writeStream.format("noop").trigger(processingTime="300 milliseconds")
                       .option("checkpointLocation", str(tmp_path / f"ck-{t}")).start())
    threads = [threading.Thread(target=produce_rounds), threading.Thread(target=watch_group)]
    for th in threads:
        th.start()
    try:
        threads[0].join(300)
        ends = {(t, p): log.snapshot(t).high_watermark(p) for t in topics for p in range(2)}
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and (not history or history[-1] != ends) and not errors:
            for q in queries:
                assert q.exception() is None, q.exception()
            time.sleep(0.5)
    finally:
        done.set()
        threads[1].join(60)
        for q in queries:
            q.stop()
    assert not errors, errors
    assert history[-1] == ends == {(t, p): 20 for t in topics for p in range(2)}
    assert len({json.dumps(sorted(h.items())) for h in history}) > 2  # the watcher saw the commits go by


@pytest.mark.slow
def test_every_offset_once_while_the_topic_is_written_compacted_and_merged(spark, s3_log, tmp_path):
    from lakelog.maintenance.cleaner import run_compaction
    from lakelog.maintenance.segment_merge import run_merge

    log = s3_log
    log.create_topic("c", 2, {"cleanup.policy": "compact", "segment.bytes": "1048576"})
    read: list[tuple[int, int, bytes]] = []
    errors: list[BaseException] = []
    writing = threading.Event()
    writing.set()

    def on_batch(df, _):
        read.extend((r.partition, r.offset, bytes(r.value)) for r in df.select("partition", "offset", "value")
                    .collect())

    def write_and_maintain():
        try:
            for i in range(6):
                for p in range(2):
                    log.append("c", [{"key": f"k{j % 4}", "value": f"{p}:{i}:{j}"} for j in range(8)], partition=p)
                if i % 2 == 1:
                    run_compaction(spark, log.root, ["c"], min_dirty_ratio=-1)
                    run_merge(spark, log.root, ["c"], segment_bytes=1 << 30)
        except BaseException as e:  # noqa: BLE001 -- surfaced below
            errors.append(e)
        finally:
            writing.clear()

    df = lakelog_reader(spark, log.root, stream=True, subscribe="c", startingOffsets="earliest",
                        maxOffsetsPerTrigger=10).load(log.root.uri)
    q = (df.writeStream.trigger(processingTime="200 milliseconds").foreachBatch(on_batch)
         .option("checkpointLocation", str(tmp_path / "ck")).start())
    writer = threading.Thread(target=write_and_maintain)
    writer.start()
    try:
        writer.join(400)
        assert not errors, errors
        ends = {p: log.snapshot("c").high_watermark(p) for p in range(2)}
        assert ends == {0: 48, 1: 48}
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and q.exception() is None:
            last = {p: max((o for pp, o, _ in read if pp == p), default=-1) for p in range(2)}
            if all(last[p] == ends[p] - 1 for p in range(2)):
                break
            time.sleep(0.5)
        assert q.exception() is None, q.exception()
        assert "LakelogMicroBatchStream" in stream_description(q)
    finally:
        q.stop()
    offsets = [(p, o) for p, o, _ in read]
    assert len(offsets) == len(set(offsets)), "an offset was read twice"
    # every record still in the topic was read, with the value written at its offset; the others were read before
    # compaction removed them (a compacted topic's consumer that lags behind skips superseded records, as in Kafka)
    survivors = {(p, o): v for p in range(2) for o, v in zip(*log.read("c", p).select(["offset", "value"])
                                                             .to_pydict().values())}
    assert set(survivors) <= set(offsets)
    written = {(p, i * 8 + j): f"{p}:{i}:{j}".encode() for p in range(2) for i in range(6) for j in range(8)}
    assert all(written[(p, o)] == v for p, o, v in read)
    for p in range(2):
        in_order = [o for pp, o, _ in read if pp == p]
        assert in_order == sorted(in_order)


def test_credentials_come_from_storage_options(spark, s3_endpoint):
    """The session has no credentials of its own (conftest: from the Hadoop configuration only): without the
    ``storage.*`` keys the read fails, with them it runs. A bucket of its own: S3A keeps one filesystem per bucket
    in a JVM, made with the settings of the bucket's first use (docs/spark.md)."""
    import boto3

    bucket = f"lakelog-keys-{uuid.uuid4().hex[:12]}"
    boto3.client("s3", endpoint_url=s3_endpoint, aws_access_key_id="testing", aws_secret_access_key="testing",
                 region_name="us-east-1").create_bucket(Bucket=bucket)
    log = Log(StorageRoot.resolve(f"s3://{bucket}/root", s3_options(s3_endpoint)))
    log.create_topic("t", 1)
    produce(log, "t", 0, 3)
    no_keys = {"storage.aws_endpoint_url": s3_endpoint, "storage.aws_region": "us-east-1",
               "storage.aws_allow_http": "true"}
    keys = {"storage.aws_access_key_id": "testing", "storage.aws_secret_access_key": "testing"}
    keyed = spark.read.format("lakelog").options(subscribe="t", **no_keys, **keys).load(log.root.uri)
    assert scanned_by_jvm(keyed) and keyed.count() == 3
    other = f"lakelog-nokeys-{uuid.uuid4().hex[:12]}"
    boto3.client("s3", endpoint_url=s3_endpoint, aws_access_key_id="testing", aws_secret_access_key="testing",
                 region_name="us-east-1").create_bucket(Bucket=other)
    Log(StorageRoot.resolve(f"s3://{other}/root", s3_options(s3_endpoint))).create_topic("t", 1)
    with pytest.raises(Exception, match="(?i)credential"):
        spark.read.format("lakelog").options(subscribe="t", **no_keys).load(f"s3://{other}/root").count()


JOB = r'''
import json, sys
from pyspark.sql import SparkSession

root, jars, checkpoint = sys.argv[1], sys.argv[2], sys.argv[3]
builder = SparkSession.builder.master("local[2]")
if jars:
    builder = builder.config("spark.jars", jars)  # what --packages org.apache.hadoop:hadoop-aws:3.5.0 sets
spark = builder.getOrCreate()
df = spark.read.format("lakelog").option("subscribe", "t").load(root)
plan = df._jdf.queryExecution().executedPlan().toString()
count = df.count()
df = spark.read.format("lakelog").option("subscribe", "t").load(root)  # a second read: the driver says why once
rows = []
q = (spark.readStream.format("lakelog").option("subscribe", "t").option("startingOffsets", "earliest").load(root)
     .writeStream.trigger(availableNow=True).option("checkpointLocation", checkpoint)
     .foreachBatch(lambda b, _: rows.extend(r.offset for r in b.select("offset").collect())).start())
q.awaitTermination()
print("RESULT " + json.dumps({"plan": plan, "count": count, "stream": sorted(rows),
                              "stream_source": q.lastProgress["sources"][0]["description"]}))
'''


def run_job(tmp_path, env, root, jars=""):
    (tmp_path / "job.py").write_text(JOB)
    proc = subprocess.run([sys.executable, "job.py", root, jars, str(tmp_path / "ck")], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    line = next(line for line in proc.stdout.splitlines() if line.startswith("RESULT "))
    return json.loads(line[len("RESULT "):]), proc.stderr


def job_env(**extra):
    env = {k: v for k, v in without_hadoop_aws(os.environ).items() if not k.startswith("AWS_")}
    return {**env, **SPARK_ENV, "PYTHONPATH": str(REPO), **extra}


@pytest.mark.slow
def test_aws_environment_and_spark_jars_as_packages_add_them(s3_endpoint, s3_log, tmp_path):
    """A job with hadoop-aws in ``spark.jars`` (as ``--packages`` puts it) and only the AWS environment variables
    (no ``storage.*`` options) reads an S3 root on the JVM, batch and AvailableNow."""
    log = s3_log
    log.create_topic("t", 2)
    produce(log, "t", 0, 4)
    produce(log, "t", 1, 3)
    jars = ",".join(hadoop_aws_classpath().split(os.pathsep))
    env = job_env(**CREDS, AWS_ENDPOINT_URL=s3_endpoint, AWS_ALLOW_HTTP="true")
    result, _ = run_job(tmp_path, env, log.root.uri, jars)
    assert "LakelogFileIndex" in result["plan"], result["plan"]
    assert result["count"] == 7
    assert result["stream"] == [0, 0, 1, 1, 2, 2, 3]
    assert "LakelogMicroBatchStream" in result["stream_source"]


@pytest.mark.slow
def test_without_hadoop_aws_the_python_source_reads_and_the_driver_says_why_once(s3_endpoint, s3_log, tmp_path):
    log = s3_log
    log.create_topic("t", 1)
    produce(log, "t", 0, 5)
    env = job_env(**CREDS, AWS_ENDPOINT_URL=s3_endpoint, AWS_ALLOW_HTTP="true")
    result, stderr = run_job(tmp_path, env, log.root.uri)
    assert "(Python)" in result["plan"] and "LakelogFileIndex" not in result["plan"], result["plan"]
    assert result["count"] == 5 and result["stream"] == [0, 1, 2, 3, 4]
    assert "LakelogMicroBatchStream" not in result["stream_source"]
    why = [line for line in stderr.splitlines() if "reading through the Python data source because" in line]
    assert len(why) == 1, stderr[-4000:]
    assert "hadoop-aws (org.apache.hadoop.fs.s3a.S3AFileSystem) is not on the classpath" in why[0]
