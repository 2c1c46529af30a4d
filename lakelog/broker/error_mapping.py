"""Any exception as the Kafka error a client is told, the same answer on every front."""

from __future__ import annotations

import logging

from lakelog import errors as E
from lakelog.storage.storage_failure import is_storage_failure, storage_error

log = logging.getLogger(__name__)


def unexpected_error(exc: Exception, method: str, path: str) -> E.KafkaError:
    """What a client is told of an exception that is no KafkaError: a storage failure is the retriable
    ``KAFKA_STORAGE_ERROR``, anything else ``UNKNOWN_SERVER_ERROR``. The answer names no exception type,
    message, file path or trace: those go to the server's log only."""
    if is_storage_failure(exc):
        log.warning("storage failure on %s %s: %r", method, path, exc)
        return storage_error(exc)
    log.error("unexpected error on %s %s", method, path, exc_info=exc)
    return E.UnknownServerError("an unexpected server error; the server's log has the details")
