"""Openness: Delta readers nobody here wrote read lakelog's topic tables, and see what lakelog serves.

delta-spark (the PyPI package with its own Spark, in ``.venv-delta``, and its jars from reference/: no Delta
release runs on pyspark 4.3 yet, see the Makefile) reads a topic's table with ``format("delta")`` and through
``DeltaTable.forPath``, on a local root and, through hadoop-aws's S3A, on the moto S3 server; DuckDB (with its
delta extension from PyPI) reads the local one. The topics carry what lakelog's tables carry: keyed records with
and without headers, tombstones, several commits, a delta-rs checkpoint, a log start offset moved by delete-records, a
compacted partition. Their rows equal each other, and equal ``spark.read.format("lakelog")``'s above each
partition's log start offset (a plain Delta reader also sees the records below it until retention removes their
segments, as docs/storage.md says).
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid

import pytest

from lakelog import Log
from lakelog.storage.storage_root import StorageRoot

from s3_server import BUCKET, s3_options
from spark_support import REPO, SPARK_ENV, lakelog_reader, scanned_by_jvm, without_hadoop_aws

pytestmark = pytest.mark.slow
DELTA_PYTHON = REPO / ".venv-delta" / "bin" / "python"

JOB = r'''
import json, sys
from pyspark.sql import SparkSession
from delta.tables import DeltaTable

spec = json.load(open(sys.argv[1]))
builder = (SparkSession.builder.master("local[2]").config("spark.driver.extraClassPath", spec["classpath"])
           .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
           .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog"))
for k, v in spec["hadoop"].items():
    builder = builder.config("spark.hadoop." + k, v)
spark = builder.getOrCreate()


def rows(df):
    return sorted([r.partition, r.offset, None if r.key is None else r.key.hex(), None if r.value is None else
                   r.value.hex(), [[h.key, h.value.hex()] for h in r.headers or []]]
                  for r in df.select("partition", "offset", "key", "value", "headers").collect())


out = {}
for name, path in spec["tables"].items():
    out[name] = {"format": rows(spark.read.format("delta").load(path)),
                 "api": rows(DeltaTable.forPath(spark, path).toDF()),
                 "version": DeltaTable.forPath(spark, path).history(1).collect()[0].version,
                 "spark": spark.version}
print("RESULT " + json.dumps(out))
'''


def write_topic(log: Log, spark) -> None:
    from deltalake import DeltaTable

    from lakelog.maintenance.cleaner import run_compaction

    log.create_topic("orders", 3, {"cleanup.policy": "compact,delete"})
    for i in range(4):
        log.append("orders", [{"key": f"k{j % 5}" if j % 7 else f"u{i}-{j}", "value": None if j == 14 else f"r{i}-{j}",
                               "headers": [{"key": "trace", "value": f"{i}.{j}".encode()}] if j % 3 else [],
                               "timestamp": 1_700_000_000_000 + 1000 * j} for j in range(30)])
        if i == 1:
            DeltaTable(log.root.uri_for("topics", "orders"), storage_options=log.root.storage_options) \
                .create_checkpoint()
    log.delete_records("orders", 0, 4)
    run_compaction(spark, log.root, ["orders"], min_dirty_ratio=-1)


def lakelog_rows(spark, log) -> list:
    df = lakelog_reader(spark, log.root, subscribe="orders", includeHeaders="true").load(log.root.uri)
    assert scanned_by_jvm(df)
    return sorted([r.partition, r.offset, None if r.key is None else bytes(r.key).hex(),
                   None if r.value is None else bytes(r.value).hex(),
                   [[h.key, bytes(h.value).hex()] for h in r.headers or []]]
                  for r in df.select("partition", "offset", "key", "value", "headers").collect())


def duckdb_rows(table: str) -> list:
    import duckdb_delta

    out = duckdb_delta.connect().execute(f"SELECT partition, \"offset\", key, value, headers FROM delta_scan('{table}')").fetchall()
    return sorted([p, o, None if k is None else bytes(k).hex(), None if v is None else bytes(v).hex(),
                   [[h["key"], bytes(h["value"]).hex()] for h in hs or []]] for p, o, k, v, hs in out)


def test_delta_spark_and_duckdb_read_what_lakelog_serves(spark, s3_endpoint, tmp_path):
    from reference import maven

    assert DELTA_PYTHON.exists(), f"{DELTA_PYTHON} is missing: `make test` installs it (target .venv-delta)"
    local = Log(StorageRoot.resolve(str(tmp_path / "root")))
    s3 = Log(StorageRoot.resolve(f"s3://{BUCKET}/{uuid.uuid4().hex}", s3_options(s3_endpoint)))
    for log in (local, s3):
        write_topic(log, spark)
    spec = {"classpath": maven.classpath("delta-spark", "hadoop-aws"),
            "hadoop": {"fs.s3a.endpoint": s3_endpoint, "fs.s3a.path.style.access": "true",
                       "fs.s3a.connection.ssl.enabled": "false", "fs.s3a.endpoint.region": "us-east-1",
                       "fs.s3a.access.key": "testing", "fs.s3a.secret.key": "testing",
                       "fs.s3a.aws.credentials.provider": "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"},
            "tables": {"local": local.root.uri_for("topics", "orders"),
                       "s3": s3.root.uri_for("topics", "orders").replace("s3://", "s3a://")}}
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    (tmp_path / "job.py").write_text(JOB)
    env = {**without_hadoop_aws(os.environ), **SPARK_ENV, "PYSPARK_PYTHON": str(DELTA_PYTHON),
           "PYSPARK_DRIVER_PYTHON": str(DELTA_PYTHON)}
    env.pop("PYTHONPATH", None)
    proc = subprocess.run([str(DELTA_PYTHON), "job.py", "spec.json"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    result = json.loads(next(line for line in proc.stdout.splitlines() if line.startswith("RESULT "))[7:])
    for name, log in (("local", local), ("s3", s3)):
        delta = result[name]
        assert delta["spark"].startswith("4.2."), delta["spark"]
        assert delta["version"] == log.snapshot("orders").version
        assert delta["format"] == delta["api"]
        floors = {p: log.snapshot("orders").log_start_offset(p) for p in range(3)}
        assert floors[0] == 4
        above_floor = [r for r in delta["format"] if r[1] >= floors[r[0]]]
        assert above_floor == lakelog_rows(spark, log), name
        assert len(delta["format"]) > len(above_floor)  # the records below partition 0's log start offset
    assert result["local"]["format"] == duckdb_rows(spec["tables"]["local"])
