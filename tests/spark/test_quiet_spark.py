"""A plain PySpark script reads ``format("lakelog")`` without an activated venv, and prints only what it asked for.

Run as a user runs it: ``.venv/bin/python job.py`` and ``.venv/bin/spark-submit job.py``, with only the
system's directories on PATH, whose ``python3`` has no lakelog. Spark starts its Python workers with
``PYSPARK_PYTHON``, else that ``python3``, and PySpark's launch scripts find Spark through it. The install step
(:mod:`lakelog.spark.spark_env`) makes both use the venv's interpreter, and points the installed PySpark at the project's
``conf/`` -- log4j2 at WARN, no progress bar, the JVM's incubator-module line dropped -- so the JVM adds
nothing below WARN to the output, and none of the warnings every local run would print (the loopback
hostname, the native Hadoop library).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from lakelog import Log

VENV_BIN = Path(sys.executable).parent
JOB = """
from pyspark.sql import SparkSession
spark = SparkSession.builder.master("local[1]").getOrCreate()
df = spark.read.format("lakelog").option("subscribe", "t").option("startingOffsets", "earliest").load({root!r})
print("records:", df.count())
spark.stop()
"""
LOG_LINE = re.compile(r"^\d\d/\d\d/\d\d \d\d:\d\d:\d\d (WARN|ERROR) ")
NOISE = ("incubator", "default log4j profile", "Setting default log level", "resolves to a loopback",
         "SPARK_LOCAL_IP", "NativeCodeLoader", "[Stage ")


@pytest.mark.parametrize("launcher", ["python", "spark-submit"])
def test_a_plain_script_prints_nothing_from_the_jvm_below_warn(tmp_path, launcher):
    root = str(tmp_path / "root")
    log = Log(root)
    log.create_topic("t", 2)
    log.append("t", [{"key": f"k{i}", "value": f"v{i}"} for i in range(5)])
    (tmp_path / "job.py").write_text(JOB.format(root=root))
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": os.environ.get("HOME", str(tmp_path))}
    if os.environ.get("JAVA_HOME"):
        env["JAVA_HOME"] = os.environ["JAVA_HOME"]
    bare = subprocess.run(["python3", "-c", "import lakelog"], cwd=tmp_path, env=env, capture_output=True)
    assert bare.returncode != 0, "the python3 on this PATH has lakelog: the test would prove nothing"
    proc = subprocess.run([str(VENV_BIN / launcher), "job.py"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=540)  # a JVM start on the loaded, shared machine (pytest stops at 600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "records: 5", proc.stdout
    unasked = [line for line in proc.stderr.splitlines() if line.strip() and not LOG_LINE.match(line)]
    assert not unasked, "printed below WARN or outside the log:\n" + "\n".join(unasked)
    noisy = [line for line in proc.stderr.splitlines() if any(n in line for n in NOISE)]
    assert not noisy, "\n".join(noisy)
