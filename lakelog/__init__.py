"""lakelog: Apache Kafka's log on object storage, as Delta Lake tables, native to PySpark.

The public API::

    from lakelog import Log, PartitionBatch, AppendResult, KafkaError
"""

# Names resolve lazily (PEP 562) so ``import lakelog.errors`` or ``lakelog --help`` do not pay for pyarrow/deltalake.
_EXPORTS = {
    "PartitionInfo": "lakelog.storage.catalog", "TopicDescription": "lakelog.storage.catalog",
    "KafkaError": "lakelog.errors", "error_for_code": "lakelog.errors",
    "Log": "lakelog.log",
    "ProducerIdentity": "lakelog.storage.producer_ids",
    "FetchResult": "lakelog.reader.log_reader",
    "Segment": "lakelog.storage.segment_index",
    "StorageRoot": "lakelog.storage.storage_root",
    "TOPIC_CONFIGS": "lakelog.storage.topic_config", "TopicConfig": "lakelog.storage.topic_config",
    "RecordAccumulator": "lakelog.writer.accumulator",
    "AppendResult": "lakelog.writer.records", "PartitionBatch": "lakelog.writer.records",
}


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'lakelog' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_EXPORTS))


__all__ = [
    "AppendResult", "FetchResult", "KafkaError", "Log", "PartitionBatch", "PartitionInfo", "ProducerIdentity",
    "RecordAccumulator", "Segment", "StorageRoot", "TOPIC_CONFIGS", "TopicConfig", "TopicDescription",
    "error_for_code",
]
__version__ = "0.1.0"
