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

from bench.moto_server import S3Server
from s3_server import BUCKET, CREDS, s3_options  # noqa: F401  (re-exported for fixtures)

# The suite's JVMs (PySpark sessions, spark-submit, spark-shell, the standalone daemons and their executors) live
# seconds on small data, where their start-up is most of their CPU and the JIT's optimising tier (C2), G1's
# concurrent threads and the verification of some 18,000 classes from pyspark's jars (built by javac, as ours)
# only compete with the tests for the 2 cores: the first tier alone ran the Spark-heavy test files in 174 s against
# 243 s (2026-11-27); the serial collector and no verification as well took a local session's start and first
# query from 16.3 to 12.8 CPU-s (medians of 3), and tests/spark with tests/compaction from 351-354 s (681-685
# CPU-s) to 311-315 s (607-610) (2026-11-28, two runs each, interleaved). Tests only: `make bench` and users' jobs
# keep the JVM's default. A value already set in the environment wins.
TEST_JVM_OPTS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:+UnlockDiagnosticVMOptions -XX:-BytecodeVerificationRemote"
os.environ.setdefault("SPARK_SUBMIT_OPTS", f'{TEST_JVM_OPTS} "-Dspark.executor.extraJavaOptions={TEST_JVM_OPTS}"')
os.environ.setdefault("SPARK_DAEMON_JAVA_OPTS", TEST_JVM_OPTS)

# The suite starts hundreds of Python processes (fronts, CLI runs, Spark's workers, benchmarks) that import the
# checkout's packages, and each xdist worker imports every test module: with PYTHONDONTWRITEBYTECODE set (as on
# this machine) each of them compiles those sources again, and pytest rewrites every test module's assertions
# again: a collection of the suite took 11.4-11.9 CPU-s with it set, 4.9 without once the caches were written;
# tests/kafka, tests/api and tests/groups (`-n 3`, from no caches) 768 busy CPU-s with it set (three of their
# files then failed to collect and did not run), 734 without, all of them run (2026-11-28, by hand, one run each;
# the machine's noise is about as large). The caches go to __pycache__
# directories, which git ignores.
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
