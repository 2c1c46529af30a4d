"""Spark fixtures: one real ``local[2]`` session for the whole test session, configured by conf/.

The session loads ``conf/spark-defaults.conf`` (``SPARK_CONF_DIR``) like every
Spark entry point of the project, and its Python workers run this interpreter.
``format("lakelog")`` is found by PySpark's own lookup of ``pyspark_*`` modules:
no test registers the source.

hadoop-aws (the ``hadoop-aws`` reference set: hadoop-aws 3.5.0 and the AWS SDK v2 bundle, fetched by ``make
test``) is on the class path of every PySpark session this process starts, as on managed Spark, where it sits in
Spark's own jars: ``s3://`` roots are read by the JVM source. It goes in through ``PYSPARK_SUBMIT_ARGS``
(``--driver-class-path``), set when this module is imported, before any test starts a session -- also the
sessions of other directories' fixtures, which a worker may start first. A missing set fails every test that
takes the ``spark`` fixture, naming the fetch command.
"""

from __future__ import annotations

import os

import pytest

from spark_support import SPARK_ENV, s3a_loadable, with_hadoop_aws

HADOOP_AWS_MISSING = with_hadoop_aws(os.environ)


@pytest.fixture(scope="session")
def spark():
    """The shared ``local[2]`` SparkSession (stopped at the end of the test session), hadoop-aws on its class path."""
    if HADOOP_AWS_MISSING is not None:
        raise HADOOP_AWS_MISSING
    os.environ.update(SPARK_ENV)
    from pyspark.sql import SparkSession

    session = SparkSession.builder.master("local[2]").appName("lakelog-tests").getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    assert s3a_loadable(session), "hadoop-aws is not on the session's class path (PYSPARK_SUBMIT_ARGS was not applied)"
    yield session
    session.stop()



#: Test modules that run twice: on the JVM source and on the Python source it falls back to (S3 roots without
#: hadoop-aws, a machine without javac, ``spark.lakelog.jvm.enabled=false``). The others run on the JVM source.
#: Their tests that take the ``root`` fixture run on a local root and on the moto S3 server each.
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
