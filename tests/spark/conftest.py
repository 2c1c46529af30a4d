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

