"""A PySpark script run as ``.venv/bin/python job.py`` reads a topic without an activated venv.

Spark starts its Python workers with ``PYSPARK_PYTHON``, else the ``python3`` on PATH, which here is the
system's, without lakelog; the install step's ``pyspark/conf/spark-env.sh`` (:mod:`lakelog.spark.spark_env`)
makes them run the venv's interpreter.
"""

from __future__ import annotations

import os
import subprocess
import sys

from lakelog import Log

JOB = """
from pyspark.sql import SparkSession
spark = SparkSession.builder.master("local[1]").getOrCreate()
df = spark.read.format("lakelog").option("subscribe", "t").option("startingOffsets", "earliest").load({root!r})
print("records:", df.count())
"""


def test_plain_python_job_reads_a_topic(tmp_path):
    root = str(tmp_path / "root")
    log = Log(root)
    log.create_topic("t", 2)
    log.append("t", [{"key": f"k{i}", "value": f"v{i}"} for i in range(7)])
    (tmp_path / "job.py").write_text(JOB.format(root=root))
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": os.environ.get("HOME", str(tmp_path))}
    if os.environ.get("JAVA_HOME"):
        env["JAVA_HOME"] = os.environ["JAVA_HOME"]
    bare = subprocess.run(["python3", "-c", "import lakelog"], cwd=tmp_path, env=env, capture_output=True)
    assert bare.returncode != 0, "the python3 on this PATH has lakelog: the test would prove nothing"
    proc = subprocess.run([sys.executable, "job.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "records: 7" in proc.stdout
