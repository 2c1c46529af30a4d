"""A Python client for lakelog's HTTP front (``lakelog serve``), over httpx.

    from lakelog.client import Producer, Admin

    with Producer("http://127.0.0.1:8080") as producer:          # idempotent by default
        meta = producer.send("orders", b"value", key=b"k").result()
    Admin("http://127.0.0.1:8080").commit_offsets("billing", [("orders", 0, 42)])
"""

from lakelog.client.admin import Admin
from lakelog.client.producer import Producer, RecordMetadata
from lakelog.client.transport import Transport

__all__ = ["Admin", "Producer", "RecordMetadata", "Transport"]
