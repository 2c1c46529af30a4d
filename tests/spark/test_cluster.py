"""``format("lakelog")`` through real ``spark-submit`` on a Spark standalone cluster (docs/spark.md, "Running on a
cluster"): batch and streaming reads run in the cluster's executor, which gets the package either installed in
its Python or shipped with the job (``--py-files``); storage settings travel with the tasks as ``storage.*``
options. Neither job calls ``spark.dataSource.register``.

Everything runs on 127.0.0.1, so the executor sees the driver's local paths and the moto S3 server. The cluster's
daemons and the jobs run without any ``AWS_*`` environment.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
import uuid
from pathlib import Path

import pytest

from lakelog import Log
from lakelog.storage.storage_root import StorageRoot

from s3_server import BUCKET, s3_options
from spark_cluster import BIN, REPO, bare_python, cluster_env, standalone  # noqa: F401  (fixtures)

pytestmark = pytest.mark.slow
TOPIC = "events"
PARTITIONS = 3

# The job, per root: a batch aggregate, and an AvailableNow stream into a parquet sink aggregated the same way.
# A UDF evaluated in the scan's tasks reports where they ran: the process's working directory, its interpreter and
# where it imports lakelog from. Prints one JSON line.
APP = r'''
import json, os, sys
from pyspark.sql import SparkSession, functions as F

spec = json.load(open(sys.argv[1]))
spark = SparkSession.builder.appName("lakelog-cluster-test").getOrCreate()


@F.udf("array<string>")
def where(_):
    import lakelog
    return [os.getcwd(), sys.executable, lakelog.__file__]


def stats(df):
    rows = df.groupBy("partition").agg(F.count("*").alias("n"), F.sum(F.length("value")).alias("bytes"),
                                       F.min("offset").alias("lo"), F.max("offset").alias("hi")).collect()
    return {str(r["partition"]): [r["n"], r["bytes"], r["lo"], r["hi"]] for r in rows}


report = {"master": spark.sparkContext.master, "app_id": spark.sparkContext.applicationId, "roots": {}}
for name, (root, storage) in spec["roots"].items():
    def lakelog(reader):
        reader = reader.format("lakelog").option("subscribe", spec["topic"])
        for k, v in storage.items():
            reader = reader.option("storage." + k, v)
        return reader

    df = lakelog(spark.read).load(root)
    out = os.path.join(spec["out"], name)
    query = (lakelog(spark.readStream).option("startingOffsets", "earliest")
             .option("maxOffsetsPerTrigger", spec["max_offsets_per_trigger"]).load(root)
             .writeStream.trigger(availableNow=True).option("checkpointLocation", out + "/checkpoint")
             .format("parquet").option("path", out + "/data").start())
    query.awaitTermination()
    report["roots"][name] = {
        "batch": stats(df),
        "stream": stats(spark.read.parquet(out + "/data")),
        "stream_batches": query.lastProgress["batchId"] + 1,
        "tasks": sorted({tuple(r[0]) for r in df.select(where("value")).collect()}),
    }
print(json.dumps(report))
'''


def write_topic(log: Log) -> dict[str, list[int]]:
    """Two appends to each partition, values of varying length; returns what the job's aggregate must report."""
    log.create_topic(TOPIC, PARTITIONS)
    expected = {}
    for p in range(PARTITIONS):
        values = [b"x" * ((i * 7 + p) % 23) for i in range(40 + 15 * p)]
        half = len(values) // 2
        for chunk in (values[:half], values[half:]):
            log.append(TOPIC, [{"key": f"k{i % 5}", "value": v} for i, v in enumerate(chunk)], partition=p)
        expected[str(p)] = [len(values), sum(map(len, values)), 0, len(values) - 1]
    return expected


def roots(tmp_path: Path, s3_endpoint: str) -> tuple[dict, dict]:
    """A local root and a moto S3 root holding the same topic: (the job's roots with their storage options,
    the expected aggregate)."""
    local = StorageRoot.resolve(str(tmp_path / "root"))
    s3 = StorageRoot.resolve(f"s3://{BUCKET}/{uuid.uuid4().hex}", s3_options(s3_endpoint))
    expected = write_topic(Log(local))
    assert write_topic(Log(s3)) == expected
    return {"local": [local.uri, {}], "s3": [s3.uri, dict(s3.options)]}, expected


def no_aws(env: dict[str, str]) -> dict[str, str]:
    """``env`` without ``AWS_*``: the S3 endpoint and keys can reach the executor only as source options."""
    return {k: v for k, v in env.items() if not k.startswith("AWS_")}


def submit(master: str, tmp_path: Path, roots_spec: dict, *, env: dict[str, str], args: tuple[str, ...] = ()) -> dict:
    """``spark-submit`` the job from ``tmp_path`` (not the checkout: nothing is importable from the cwd)."""
    (tmp_path / "app.py").write_text(APP)
    (tmp_path / "spec.json").write_text(json.dumps({"out": str(tmp_path / "out"), "topic": TOPIC,
                                                    "roots": roots_spec, "max_offsets_per_trigger": 100}))
    cmd = [str(BIN / "spark-submit"), "--master", master, *args, str(tmp_path / "app.py"), str(tmp_path / "spec.json")]
    done = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    (tmp_path / "spark-submit.log").write_text(done.stderr)
    # the driver's Python traceback goes to stdout; stderr is Spark's log
    assert done.returncode == 0, f"{done.stdout[-6000:]}\n--- stderr ---\n{done.stderr[-3000:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])


def check_report(report: dict, master: str, logs: Path, expected: dict, *, python: str, shipped: bool) -> None:
    """The aggregates, and that every scan task ran in the cluster's executor with ``python``, importing lakelog
    from the checkout (installed) or from the archive Spark fetched into the executor's directory (shipped)."""
    assert report["master"] == master
    executor_dirs = logs / "work" / report["app_id"]  # the standalone worker's directory for this application
    assert [p.name for p in executor_dirs.iterdir()] == ["0"]  # it ran one executor
    lakelog_from = executor_dirs / "0" / "lakelog.zip" / "lakelog" if shipped else REPO / "lakelog"
    for name in ("local", "s3"):
        got = report["roots"][name]
        assert got["batch"] == expected, name
        assert got["stream"] == expected, name
        assert got["stream_batches"] == 2, name  # 165 records at maxOffsetsPerTrigger=100
        assert got["tasks"], name
        for cwd, executable, lakelog_file in got["tasks"]:
            assert Path(cwd) == executor_dirs / "0", (name, cwd)  # the scan ran in the executor, not the driver
            assert executable == python, name
            assert Path(os.path.normpath(Path(cwd) / lakelog_file)).parent == lakelog_from, (name, lakelog_file)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """``pip wheel --no-deps`` of the project, built from a copy of its sources (the checkout stays untouched)."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    src.mkdir()
    setuptools = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    for name in ("pyproject.toml", "README.md", *(f"{m}.py" for m in setuptools["py-modules"])):
        shutil.copy2(REPO / name, src / name)
    for pattern in setuptools["packages"]["find"]["include"]:
        for pkg in REPO.glob(pattern):
            if (pkg / "__init__.py").is_file():
                shutil.copytree(pkg, src / pkg.name, ignore=shutil.ignore_patterns("__pycache__"))
    assert (src / "lakelog").is_dir() and (src / "pyspark_lakelog.py").is_file()
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp / "dist"), str(src)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    [whl] = (tmp / "dist").glob("lakelog-*-py3-none-any.whl")
    return whl


def test_installed_package(standalone, tmp_path, s3_endpoint):
    """The executor runs this venv's Python, where lakelog is installed: nothing shipped, nothing registered."""
    master, logs = standalone
    roots_spec, expected = roots(tmp_path, s3_endpoint)
    report = submit(master, tmp_path, roots_spec, env=no_aws(cluster_env()))
    check_report(report, master, logs, expected, python=sys.executable, shipped=False)


def test_shipped_with_py_files(standalone, tmp_path, s3_endpoint, wheel, bare_python):
    """Driver and executor run a Python without lakelog; the wheel, as a ``.zip``, goes to the executor through
    ``--py-files`` and to the driver's Python processes through ``PYTHONPATH`` (docs/spark.md)."""
    master, logs = standalone
    missing = subprocess.run([bare_python, "-c", "import lakelog"], cwd=tmp_path, capture_output=True, text=True)
    assert missing.returncode != 0 and "No module named 'lakelog'" in missing.stderr
    deps = subprocess.run([bare_python, "-c", "import pyspark, deltalake, pyarrow, pandas, obstore"], cwd=tmp_path)
    assert deps.returncode == 0
    # PySpark puts only these suffixes from --py-files on its workers' path: a .whl would be shipped but never
    # importable (the planner fails with "No module named 'pyspark_lakelog'"). A wheel is a zip archive.
    from pyspark import SparkContext

    assert ".whl" not in SparkContext.PACKAGE_EXTENSIONS and ".zip" in SparkContext.PACKAGE_EXTENSIONS, \
        "PySpark now takes wheels on --py-files: simplify docs/spark.md and this test"
    archive = shutil.copy(wheel, tmp_path / "lakelog.zip")
    roots_spec, expected = roots(tmp_path, s3_endpoint)
    env = no_aws(cluster_env(PYSPARK_PYTHON=bare_python, PYSPARK_DRIVER_PYTHON=bare_python, PYTHONPATH=str(archive)))
    report = submit(master, tmp_path, roots_spec, env=env,
                    args=("--conf", f"spark.pyspark.python={bare_python}", "--py-files", str(archive)))
    check_report(report, master, logs, expected, python=bare_python, shipped=True)
