"""The Spark source (``format("lakelog")``): Spark's Kafka source over lakelog's topic tables.

Options and their validation (:mod:`.source_options`), offset resolution and the Kafka source's offsets
JSON (:mod:`.source_offsets`), planning read tasks on the driver (:mod:`.read_plan`), reading them in the
tasks (:mod:`.slice_reader`), and the PySpark data source itself (:mod:`.spark_source`). Only
:mod:`.spark_source` imports pyspark. This package sits above :mod:`lakelog.log` and :mod:`lakelog.group`
(a streaming query's ``groupId`` commits); the library below never imports it.
"""
