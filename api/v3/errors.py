"""Confluent REST Proxy v3's error bodies and status rules for lakelog's Kafka errors.

A v3 error body is ``{"error_code": <int>, "message": "..."}`` (Confluent's ``ErrorResponse``).
``error_code`` is either the HTTP status (``400``, ``404``, ``413``, ``415``, ``422``, ``429``, ``500``)
or Confluent's Kafka code: the HTTP status times 100 plus a number, as Confluent's
``KafkaExceptionMapper`` assigns them:

=====================================================  ======  ==========
lakelog (Kafka) error                                  status  error_code
=====================================================  ======  ==========
SASL_AUTHENTICATION_FAILED                             401     40101
TOPIC/GROUP/CLUSTER_AUTHORIZATION_FAILED               403     40301
UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_ID           404     40403
TOPIC_ALREADY_EXISTS, INVALID_TOPIC_EXCEPTION,          400     40002
INVALID_CONFIG, INVALID_PARTITIONS, INVALID_REQUEST
from the log, INVALID_TIMESTAMP, INVALID_RECORD, ...
GROUP_ID_NOT_FOUND, an unknown cluster id              404     404
MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE               413     413
a malformed request (JSON, types, base64)              400     400
an empty produce body                                  422     422
unsupported Content-Type                               415     415
THROTTLING_QUOTA_EXCEEDED                              429     429
any retriable error (KAFKA_STORAGE_ERROR, ...)         500     50003
anything else (a bug)                                  500     500
=====================================================  ======  ==========

Pure; no I/O.
"""

from __future__ import annotations

from http import HTTPStatus

from lakelog import errors as E
from lakelog.broker.public_message import public_message


class RestError(E.InvalidRequest):
    """An error of the REST layer itself, with Confluent's status and code (never a Kafka one)."""

    status: int = 400
    rest_code: int = 400

    def __init__(self, message: str, *, status: int | None = None, rest_code: int | None = None) -> None:
        super().__init__(message)
        if status is not None:
            self.status = status
        self.rest_code = rest_code if rest_code is not None else self.status


class BadRequest(RestError):
    """A malformed request: not JSON, a wrong type, bad base64 (400, error_code 400)."""


class EmptyBody(RestError):
    """A produce request without a record (422, as Confluent's "Request body is empty")."""

    status = rest_code = 422


class ClusterNotFound(RestError):
    """A cluster id other than this front's (404, "Cluster X cannot be found.")."""

    status = rest_code = 404


class UnsupportedMediaType(RestError):
    """A Content-Type other than JSON (415)."""

    status = rest_code = 415


KAFKA_BAD_REQUEST = 40002
_BY_CODE: dict[int, tuple[int, int]] = {
    E.SaslAuthenticationFailed.code: (401, 40101),
    E.TopicAuthorizationFailed.code: (403, 40301),
    E.GroupAuthorizationFailed.code: (403, 40301),
    E.ClusterAuthorizationFailed.code: (403, 40301),
    E.UnknownTopicOrPartition.code: (404, 40403),
    E.UnknownTopicId.code: (404, 40403),
    E.GroupIdNotFound.code: (404, 404),
    E.MessageTooLarge.code: (413, 413),
    E.RecordListTooLarge.code: (413, 413),
    E.ThrottlingQuotaExceeded.code: (429, 429),
    E.UnknownServerError.code: (500, 500),
}


def rest_status(error: E.KafkaError) -> tuple[int, int]:
    """``(HTTP status, Confluent error_code)`` for ``error`` (see the module's table)."""
    if isinstance(error, RestError):
        return error.status, error.rest_code
    status = getattr(error, "http_status", None)  # an HTTP refusal with no Kafka meaning (a cross-origin write)
    if status is not None:
        return status, status
    if error.__class__.__name__ == "UnsupportedContentType":  # api.errors' 415, raised by the shared produce code
        return 415, 415
    known = _BY_CODE.get(error.code)
    if known is not None:
        return known
    if error.retriable:
        return 500, 50003
    return 400, KAFKA_BAD_REQUEST


def error_body(error: E.KafkaError) -> dict:
    """Confluent's error body for ``error``: its code and the message, which names no path or trace."""
    return {"error_code": rest_status(error)[1], "message": public_message(error.message)}


def http_error_body(status: int) -> dict:
    """The body of an HTTP error with no Kafka meaning (no such route or method): ``HTTP 404 Not Found``."""
    return {"error_code": status, "message": f"HTTP {status} {HTTPStatus(status).phrase}"}
