"""PySpark's entry point for the ``lakelog`` format (no registration call needed).

PySpark scans the Python path for top-level modules named ``pyspark_*`` that
define a ``DefaultSource`` subclassing :class:`pyspark.sql.datasource.DataSource`
and registers each under its ``name()``.  Installing lakelog installs this
module, so on any session::

    spark.read.format("lakelog").option("subscribe", "orders").load("s3://bucket/lake")

The implementation is :mod:`lakelog.spark.spark_source`.
"""

from lakelog.spark.spark_source import LakelogDataSource


class DefaultSource(LakelogDataSource):
    """The ``lakelog`` Python data source (see :class:`~lakelog.spark.spark_source.LakelogDataSource`)."""


__all__ = ["DefaultSource"]
