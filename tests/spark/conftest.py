"""Spark fixtures: one real ``local[2]`` session for the whole test session, configured by conf/.

The session loads ``conf/spark-defaults.conf`` (``SPARK_CONF_DIR``) like every
Spark entry point of the project, and its Python workers run this interpreter.
``format("lakelog")`` is found by PySpark's own lookup of ``pyspark_*`` modules:
no test registers the source.
"""

from __future__ import annotations

import os

import pytest

from spark_support import SPARK_ENV


@pytest.fixture(scope="session")
def spark():
    """The shared ``local[2]`` SparkSession (stopped at the end of the test session)."""
    os.environ.update(SPARK_ENV)
    from pyspark.sql import SparkSession

    session = SparkSession.builder.master("local[2]").appName("lakelog-tests").getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()



#: Test modules that run twice: on the JVM source and on the Python source it falls back to (S3 roots without
#: hadoop-aws, a machine without javac, ``spark.lakelog.jvm.enabled=false``). The others run on the JVM source.
BOTH_SOURCES = {"test_batch", "test_sql", "test_equivalence", "test_streaming", "test_transactions_stream"}


def pytest_generate_tests(metafunc):
    if metafunc.module.__name__.rsplit(".", 1)[-1] in BOTH_SOURCES and "spark" in metafunc.fixturenames:
        metafunc.fixturenames.append("lakelog_source")
        metafunc.parametrize("lakelog_source", ["jvm", "python"], indirect=True)


@pytest.fixture
def lakelog_source(request, spark):
    """Which implementation ``format("lakelog")`` resolves to in this test (``spark.lakelog.jvm.enabled``)."""
    source = getattr(request, "param", "jvm")
    spark.conf.set("spark.lakelog.jvm.enabled", "true" if source == "jvm" else "false")
    yield source
    spark.conf.set("spark.lakelog.jvm.enabled", "true")
