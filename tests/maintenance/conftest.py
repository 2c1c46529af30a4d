"""Fixtures of the maintenance-job tests: one shared ``local[2]`` Spark session, configured by conf/.

The session is process-wide (``getOrCreate``): the Spark tests elsewhere in
the suite share it.  Its Python workers run this interpreter; the lakelog
source is found through ``pyspark_lakelog``.
"""

from __future__ import annotations

import os

import pytest

from maint_support import SPARK_ENV


@pytest.fixture(scope="session")
def spark():
    """The shared ``local[2]`` SparkSession."""
    os.environ.update(SPARK_ENV)
    from pyspark.sql import SparkSession

    session = SparkSession.builder.master("local[2]").appName("lakelog-tests").getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture
def local_root(tmp_path):
    from lakelog.storage.storage_root import StorageRoot

    return StorageRoot.resolve(str(tmp_path / "root"))
