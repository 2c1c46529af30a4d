"""The JVM source alone on a cluster: ``spark-submit --jars "$(lakelog spark-jar)"`` (docs/spark.md, "On a
cluster") on a Spark whose ``jars/`` lacks lakelog's jar, with a Python that cannot import lakelog on the driver
and the executor. A batch read and an AvailableNow stream of a local root return the topic's rows: no part of
either read needs lakelog's Python package, and nothing falls back to the Python source (it could not run).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from lakelog import Log
from lakelog.spark import jvm
from lakelog.storage.storage_root import StorageRoot

from spark_cluster import bare_python, cluster_env, run_standalone  # noqa: F401  (bare_python: the fixture)

pytestmark = pytest.mark.slow
TOPIC = "events"

# Batch rows, AvailableNow rows (parquet sink), the stream's source description, and whether a task's Python
# could import lakelog. Prints one JSON line.
APP = r'''
import json, sys
from pyspark.sql import SparkSession, functions as F

root, out = sys.argv[1], sys.argv[2]
spark = SparkSession.builder.appName("lakelog-jar-test").getOrCreate()


@F.udf("boolean")
def lakelog_importable(_):
    try:
        import lakelog  # noqa: F401
        return True
    except ImportError:
        return False


batch = spark.read.format("lakelog").option("subscribe", "events").load(root)
query = (spark.readStream.format("lakelog").option("subscribe", "events").option("startingOffsets", "earliest")
         .option("maxOffsetsPerTrigger", 50).load(root)
         .writeStream.trigger(availableNow=True).option("checkpointLocation", out + "/checkpoint")
         .format("parquet").option("path", out + "/data").start())
query.awaitTermination()
rows = lambda df: sorted([r.partition, r.offset, bytes(r.value).decode()] for r in df.collect())
print(json.dumps({
    "app_id": spark.sparkContext.applicationId,
    "batch": rows(batch.select("partition", "offset", "value")),
    "stream": rows(spark.read.parquet(out + "/data")),
    "stream_batches": query.lastProgress["batchId"] + 1,
    "source": query.lastProgress["sources"][0]["description"],
    "importable": sorted({r[0] for r in batch.select(lakelog_importable("value")).collect()}),
}))
'''


@pytest.fixture(scope="module")
def spark_home_without_jar(tmp_path_factory) -> Path:
    """A SPARK_HOME like this environment's PySpark (its files linked) whose ``jars/`` lacks lakelog-spark.jar."""
    src = jvm.pyspark_jars().parent
    home = tmp_path_factory.mktemp("spark-home")
    for entry in src.iterdir():
        if entry.name != "jars":
            (home / entry.name).symlink_to(entry)
    (home / "jars").mkdir()
    for jar in (src / "jars").iterdir():
        if jar.name != jvm.INSTALLED_NAME:
            (home / "jars" / jar.name).symlink_to(jar)
    assert not (home / "jars" / jvm.INSTALLED_NAME).exists()
    return home


@pytest.fixture(scope="module")
def jarless_cluster(tmp_path_factory, spark_home_without_jar, bare_python):
    env = cluster_env(SPARK_HOME=str(spark_home_without_jar), PYSPARK_PYTHON=bare_python,
                      PYSPARK_DRIVER_PYTHON=bare_python)
    env.pop("PYTHONPATH", None)
    yield from run_standalone(tmp_path_factory.mktemp("jar-cluster"), env, spark_home_without_jar / "bin")


def test_jvm_source_with_jars_only(jarless_cluster, spark_home_without_jar, bare_python, tmp_path):
    master, logs = jarless_cluster
    log = Log(StorageRoot.resolve(str(tmp_path / "root")))
    log.create_topic(TOPIC, 2)
    expected = []
    for p, n in ((0, 70), (1, 45)):
        log.append(TOPIC, [{"key": "k", "value": f"p{p}-{i}"} for i in range(n)], partition=p)
        expected += [[p, i, f"p{p}-{i}"] for i in range(n)]
    jar = subprocess.run([str(Path(os.sys.executable).parent / "lakelog"), "spark-jar"], capture_output=True,
                         text=True, check=True).stdout.strip()
    assert Path(jar).is_file()
    (tmp_path / "app.py").write_text(APP)
    env = cluster_env(SPARK_HOME=str(spark_home_without_jar), PYSPARK_PYTHON=bare_python,
                      PYSPARK_DRIVER_PYTHON=bare_python)
    env.pop("PYTHONPATH", None)
    cmd = [str(spark_home_without_jar / "bin" / "spark-submit"), "--master", master, "--jars", jar,
           "--conf", f"spark.pyspark.python={bare_python}", str(tmp_path / "app.py"), str(tmp_path / "root"),
           str(tmp_path / "out")]
    done = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{done.stdout[-6000:]}\n--- stderr ---\n{done.stderr[-3000:]}"
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["batch"] == expected
    assert report["stream"] == expected
    assert report["stream_batches"] == 3  # 115 records at maxOffsetsPerTrigger=50
    assert report["source"].startswith("LakelogMicroBatchStream[subscribe=events")
    assert report["importable"] == [False]  # the executor's Python has no lakelog
    assert [p.name for p in (logs / "work" / report["app_id"]).iterdir()] == ["0"]  # it ran in the executor
