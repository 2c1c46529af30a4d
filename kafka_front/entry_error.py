"""What one entry of a Kafka answer (a partition, a topic, a resource) says of any exception.

Most Kafka responses carry errors per entry and have no top-level error code, so an exception let out of a
handler would leave the client an empty response. A KafkaError is answered as it is; a failing store as the
retriable ``KAFKA_STORAGE_ERROR``; anything else as ``UNKNOWN_SERVER_ERROR`` -- as the HTTP front answers
(:func:`lakelog.broker.error_mapping.unexpected_error`: the exception's text and trace go to the server's log only).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lakelog.broker.error_mapping import unexpected_error
from lakelog.errors import KafkaError

if TYPE_CHECKING:
    from kafka_front.context import FrontContext


def entry_error(ctx: "FrontContext", e: Exception, api: str, what: object) -> KafkaError:
    """``e`` as the error of the entry ``what`` of a Kafka ``api`` request, counted in the front's metrics."""
    error = e if isinstance(e, KafkaError) else unexpected_error(e, f"Kafka {api}", str(what))
    ctx.metrics.count_error(error)
    return error
