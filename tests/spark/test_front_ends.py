"""``format("lakelog")`` from Spark's other front ends -- spark-shell (Scala), a Java application under
spark-submit, the spark-sql CLI -- with no setup: the install step put the jar in the environment's Spark.
None of them has a Python interpreter reading, so the rows come from the JVM source."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pyspark

from lakelog import Log

from spark_support import SPARK_ENV

SPARK_HOME = Path(pyspark.__file__).resolve().parent
EXPECTED = "rows=12 offsets=30 keys=12"  # 12 records over 2 partitions: offsets 0..5 twice


def topic(tmp_path) -> str:
    root = str(tmp_path / "root")
    log = Log(root)
    log.create_topic("orders", 2)
    for p in (0, 1):
        log.append("orders", [{"key": f"k{i}", "value": f"v{i}"} for i in range(6)], partition=p)
    return root


def run(cmd: list[str], tmp_path, stdin: str | None = None) -> str:
    env = {**os.environ, **SPARK_ENV, "SPARK_HOME": str(SPARK_HOME)}
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, input=stdin, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_spark_shell_reads_a_topic(tmp_path):
    root = topic(tmp_path)
    script = f"""
val df = spark.read.format("lakelog").option("subscribe", "orders").load("{root}")
val r = df.selectExpr("count(*)", "sum(offset)", "count(key)").first
println(s"rows=${{r.getLong(0)}} offsets=${{r.getLong(1)}} keys=${{r.getLong(2)}}")
:quit
"""
    out = run([str(SPARK_HOME / "bin" / "spark-shell"), "--master", "local[1]"], tmp_path, stdin=script)
    assert EXPECTED in out, out[-2000:]


JAVA = """
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;

public final class ReadTopic {
    public static void main(String[] args) {
        SparkSession spark = SparkSession.builder().getOrCreate();
        Row r = spark.read().format("lakelog").option("subscribe", "orders").load(args[0])
            .selectExpr("count(*)", "sum(offset)", "count(key)").first();
        System.out.println("rows=" + r.getLong(0) + " offsets=" + r.getLong(1) + " keys=" + r.getLong(2));
        spark.stop();
    }
}
"""


def test_a_java_application_reads_a_topic(tmp_path):
    root = topic(tmp_path)
    javac, jar = shutil.which("javac"), shutil.which("jar")
    assert javac and jar, "the JDK's javac and jar are needed (the install step compiles the source with them)"
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "ReadTopic.java").write_text(JAVA)
    (tmp_path / "classes").mkdir()
    subprocess.run([javac, "--release", "17", "-cp", str(SPARK_HOME / "jars" / "*"), "-d", "classes",
                    "src/ReadTopic.java"], cwd=tmp_path, check=True, timeout=300)
    subprocess.run([jar, "cf", "app.jar", "-C", "classes", "."], cwd=tmp_path, check=True, timeout=60)
    out = run([str(SPARK_HOME / "bin" / "spark-submit"), "--master", "local[1]", "--class", "ReadTopic",
               "app.jar", root], tmp_path)
    assert EXPECTED in out, out[-2000:]


def test_the_spark_sql_cli_reads_a_topic(tmp_path):
    root = topic(tmp_path)
    sql = (f"CREATE TEMPORARY VIEW orders USING lakelog OPTIONS (path '{root}', subscribe 'orders'); "
           "SELECT concat('rows=', count(*), ' offsets=', sum(offset), ' keys=', count(key)) FROM orders;")
    out = run([str(SPARK_HOME / "bin" / "spark-sql"), "--master", "local[1]", "-e", sql], tmp_path)
    assert EXPECTED in out, out[-2000:]
