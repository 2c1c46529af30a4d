"""Python clients of a lakelog front (``lakelog serve``), shaped like Kafka's.

The :class:`Producer` and :class:`Admin` talk to the front over HTTP (httpx). The :class:`Consumer` keeps its group
membership and offsets through the front and reads records from storage itself, through
:class:`lakelog.reader.fetcher.Fetcher`: data never flows through the front.

    from lakelog.client import Producer, Admin

    with Producer("http://127.0.0.1:8080") as producer:          # idempotent by default
        meta = producer.send("orders", b"value", key=b"k").result()
    Admin("http://127.0.0.1:8080").commit_offsets("billing", [("orders", 0, 42)])

    with Consumer("http://127.0.0.1:8080", group_id="billing") as consumer:   # records read from storage
        consumer.subscribe(["orders"])
        records = consumer.poll(timeout_ms=1000)
"""

from lakelog.group.assignors import TopicPartition
from lakelog.client.admin import Admin
from lakelog.client.consumer import (Consumer, ConsumerGroupMetadata, ConsumerRecord, OffsetAndMetadata,
                                     OffsetAndTimestamp)
from lakelog.client.producer import Producer, RecordMetadata
from lakelog.client.transport import Transport

__all__ = ["Admin", "Consumer", "ConsumerGroupMetadata", "ConsumerRecord", "OffsetAndMetadata", "OffsetAndTimestamp", "Producer",
           "RecordMetadata", "TopicPartition", "Transport"]
