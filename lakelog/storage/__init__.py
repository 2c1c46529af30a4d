"""The log's storage core (Kafka's ``storage`` module): one Delta table per topic under a storage root.

Storage roots, the topic catalog and configs, the Delta log reader and direct commits, the topic
snapshot with its Arrow segment index, the record schema, producer state and producer ids, orphan
files. Imports run one way: ``writer``, ``reader``, ``group`` and ``compaction`` import this package;
it imports only :mod:`lakelog.errors`.
"""
