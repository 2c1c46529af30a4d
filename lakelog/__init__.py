"""lakelog: Apache Kafka's log on object storage, as Delta Lake tables, native to PySpark.

The public API::

    from lakelog import Log, PartitionBatch, AppendResult, KafkaError
"""

from lakelog.catalog import PartitionInfo, TopicDescription
from lakelog.errors import KafkaError, error_for_code
from lakelog.log import Log
from lakelog.producer_ids import ProducerIdentity
from lakelog.reader.log_reader import FetchResult
from lakelog.segment_index import Segment
from lakelog.storage import StorageRoot
from lakelog.topic_config import TOPIC_CONFIGS, TopicConfig
from lakelog.writer.accumulator import RecordAccumulator
from lakelog.writer.committer import AppendResult, PartitionBatch

__all__ = [
    "AppendResult", "FetchResult", "KafkaError", "Log", "PartitionBatch", "PartitionInfo", "ProducerIdentity",
    "RecordAccumulator", "Segment", "StorageRoot", "TOPIC_CONFIGS", "TopicConfig", "TopicDescription",
    "error_for_code",
]
__version__ = "0.1.0"
