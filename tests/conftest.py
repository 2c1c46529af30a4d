"""Shared fixtures: a real moto S3 server on loopback, and storage roots (local and S3).

Storage-level tests take the ``root`` fixture, parametrised over a local
directory and an ``s3://`` prefix on the moto server, so every such test runs
against both.
"""

from __future__ import annotations

import logging
import os
import sys
import uuid

import pytest

import schedule
from bench.moto_server import S3Server
from s3_server import BUCKET, CREDS, s3_options  # noqa: F401  (re-exported for fixtures)

# The suite's JVMs (PySpark sessions, spark-submit, spark-shell, the standalone daemons and their executors) live
# seconds on small data, where their start-up is most of their CPU: the JIT's optimising tier (C2), G1's concurrent
# threads and the verification of pyspark's ~18,000 classes only compete with the tests for the 2 cores, so the
# tests' JVMs run the first tier alone, the serial collector and no remote bytecode verification (the Spark-heavy
# test files take about a tenth less CPU). Tests only: `make bench` and users' jobs keep the JVM's defaults. A value
# already set in the environment wins.
TEST_JVM_OPTS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:+UnlockDiagnosticVMOptions -XX:-BytecodeVerificationRemote"
os.environ.setdefault("SPARK_SUBMIT_OPTS", f'{TEST_JVM_OPTS} "-Dspark.executor.extraJavaOptions={TEST_JVM_OPTS}"')
os.environ.setdefault("SPARK_DAEMON_JAVA_OPTS", TEST_JVM_OPTS)

# The suite starts hundreds of Python processes (fronts, CLI runs, Spark's workers, benchmarks) that import the
# checkout's packages, and each xdist worker imports every test module: with PYTHONDONTWRITEBYTECODE set (as on
# this machine) each of them would compile those sources and rewrite every test module's assertions again (a
# collection costs more than twice the CPU without the caches). The caches go to __pycache__ directories, which git
# ignores.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False


@pytest.fixture(scope="session")
def s3_endpoint():
    """A moto S3 server on a random loopback port (atomic conditional writes, as S3), with bucket ``lakelog-test``."""
    import boto3

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = S3Server().start()
    endpoint = server.endpoint
    boto3.client("s3", endpoint_url=endpoint, **{k.lower(): v for k, v in CREDS.items()
                                                  if k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")},
                 region_name="us-east-1").create_bucket(Bucket=BUCKET)
    yield endpoint
    server.stop()


@pytest.fixture
def proxy(s3_endpoint):
    """:class:`bench.s3_proxy.S3FaultProxy` in front of the moto server: counts and logs requests, injects faults."""
    from bench.s3_proxy import S3FaultProxy

    p = S3FaultProxy(s3_endpoint).start()
    yield p
    p.stop()


@pytest.fixture(params=["local", "s3"])
def root(request, tmp_path):
    """A fresh :class:`StorageRoot`: a temp directory, or a fresh prefix on the moto S3 server."""
    from lakelog.storage.storage_root import StorageRoot

    if request.param == "local":
        return StorageRoot.resolve(str(tmp_path / "root"))
    endpoint = request.getfixturevalue("s3_endpoint")
    return StorageRoot.resolve(f"s3://{BUCKET}/{uuid.uuid4().hex}", s3_options(endpoint))


@pytest.fixture
def log(root):
    from lakelog import Log

    return Log(root)


@pytest.fixture
def s3_env(s3_endpoint, monkeypatch):
    """The standard AWS environment pointing at the moto server (for subprocesses and env-based config)."""
    env = dict(CREDS, AWS_ENDPOINT_URL=s3_endpoint, AWS_ALLOW_HTTP="true")
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    return env


@pytest.fixture(scope="session")
def kafka_reference(tmp_path_factory):
    """Apache Kafka, one KRaft node on loopback with Kafka's defaults (reference/kafka.py): the reference that
    differential tests compare lakelog against. One broker per test run: xdist's workers share it (the first
    starts it under a lock in the run's base directory; it stops when the run's controller exits), so every test
    uses its own topic, group and transactional ids. Fails (never skips) when its jars are not fetched."""
    from reference.kafka import shared_broker

    basetemp = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        # a worker's base directory is <the run's>/popen-gwN; the worker's parent is the run's controller
        broker = shared_broker(basetemp.parent, os.getppid())
        yield broker
    else:
        broker = shared_broker(basetemp, os.getpid())
        yield broker
        broker.stop()


def pytest_collection_modifyitems(items):
    """Test files longest first (tests/schedule.py), each file's tests in their order."""
    rank = {path: i for i, path in enumerate(schedule.order([item.location[0] for item in items],
                                                             schedule.durations()))}
    items.sort(key=lambda item: rank[item.location[0]])


def pytest_xdist_make_scheduler(config, log):
    """Under ``--dist loadfile``: a file per worker as xdist's, except tests/schedule.py's SPLIT files, whose tests
    are handed out one by one; with ``--no-loadscope-reorder``, in the order collected."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class FileScheduling(LoadScopeScheduling):  # xdist's LoadFileScheduling is this with the file alone
        def _split_scope(self, nodeid: str) -> str:
            return schedule.scope(nodeid)

    return FileScheduling(config, log)
