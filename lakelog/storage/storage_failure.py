"""Storage failures as clients are told of them: Kafka's retriable ``KAFKA_STORAGE_ERROR``, naming the kind of
failure but never a path, a bucket or a key (those go to the server's log only)."""

from __future__ import annotations

import logging
import os
import re
import sys

from lakelog.errors import KafkaStorageError


def is_storage_failure(e: BaseException) -> bool:
    """The store failed (I/O, network, permissions, a full or read-only disk, delta-rs I/O)."""
    if isinstance(e, OSError):
        return True
    deltalake = sys.modules.get("deltalake")
    return (deltalake is not None and isinstance(e, deltalake.exceptions.DeltaError)
            and not isinstance(e, deltalake.exceptions.TableNotFoundError))  # a missing table is no store failure


def storage_error(e: BaseException) -> KafkaStorageError:
    """A storage failure as Kafka's retriable ``KAFKA_STORAGE_ERROR``, its message naming the failure but no
    path, so it may be shown to a remote client (``No space left on device``, ``Read-only file system``)."""
    errno = getattr(e, "errno", None)
    reason = os.strerror(errno) if isinstance(errno, int) and errno > 0 else type(e).__name__
    return KafkaStorageError(f"the storage failed: {reason}")


_ANSI = re.compile(r"\x1b\[[0-9;]*m|\u21b3")


def describe(e: BaseException) -> str:
    """An error's text on one line, without delta-rs's terminal colours and arrows (for the server's log)."""
    return " ".join(_ANSI.sub(" ", str(e)).split())


def storage_failure(context: str, e: BaseException, logger: logging.Logger) -> KafkaStorageError:
    """The retriable error a client is told of ``e`` (``<context>: the storage failed: <reason>``): the failure's
    kind only (:func:`storage_error`), as its text names files or the store's URLs and keys. The text goes to
    ``logger`` (with the trace, for anything but a failing store)."""
    if is_storage_failure(e):
        logger.warning("%s: %s", context, describe(e))
    else:
        logger.error("%s", context, exc_info=e)
    return KafkaStorageError(f"{context}: {storage_error(e).message}")
