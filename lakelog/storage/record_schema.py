"""The record schema: Kafka's fields with the Spark Kafka source's names and types.

A topic table's Delta schema is :data:`TABLE_SCHEMA`; its Parquet segment files
hold :data:`FILE_SCHEMA` (Delta keeps the partition column out of the files).
Rows in a file are in offset order.
"""

from __future__ import annotations

import pyarrow as pa

TIMESTAMP_TYPE = pa.timestamp("us", tz="UTC")
HEADER_TYPE = pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))

CREATE_TIME = 0
LOG_APPEND_TIME = 1

PARTITION_COLUMN = "partition"

FILE_SCHEMA = pa.schema(
    [
        pa.field("offset", pa.int64(), nullable=False),
        pa.field("timestamp", TIMESTAMP_TYPE, nullable=False),
        pa.field("timestampType", pa.int32(), nullable=False),
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("headers", HEADER_TYPE),
        pa.field("producerId", pa.int64(), nullable=False),
        pa.field("producerEpoch", pa.int16(), nullable=False),
        pa.field("sequence", pa.int32(), nullable=False),
    ]
)

TABLE_SCHEMA = pa.schema([pa.field(PARTITION_COLUMN, pa.int32(), nullable=False), *FILE_SCHEMA])

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
