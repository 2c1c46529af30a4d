"""One mapping from lakelog's typed errors to HTTP statuses, and the handlers that apply it.

Every error body is ``{"error_code": <Kafka code>, "error_name": "...", "message": "..."}``.
The status depends only on the Kafka error (see :data:`STATUS_BY_CODE`); back-pressure
and retriable storage errors carry ``Retry-After``.
"""

from __future__ import annotations

from http import HTTPStatus
from typing import TYPE_CHECKING

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from lakelog import errors as E
from lakelog.broker.error_mapping import unexpected_error
from lakelog.broker.public_message import public_message

from api.v3.errors import BadRequest, error_body as v3_error_body, http_error_body as v3_http_error_body, rest_status

if TYPE_CHECKING:
    from lakelog.broker.metrics import Metrics


class UnsupportedContentType(E.InvalidRequest):
    """The request's Content-Type is not one this endpoint accepts (HTTP 415)."""


STATUS_BY_CODE: dict[int, int] = {
    E.InvalidRequest.code: 400,
    E.InvalidTopic.code: 400,
    E.InvalidConfig.code: 400,
    E.PolicyViolation.code: 400,
    E.InvalidPartitions.code: 400,
    E.InvalidTimestamp.code: 400,
    E.InvalidRecord.code: 400,
    E.CorruptRecord.code: 400,
    E.InvalidFetchSize.code: 400,
    E.InvalidGroupId.code: 400,
    E.OffsetMetadataTooLarge.code: 400,
    E.SaslAuthenticationFailed.code: 401,
    E.TopicAuthorizationFailed.code: 403,
    E.GroupAuthorizationFailed.code: 403,
    E.ClusterAuthorizationFailed.code: 403,
    E.UnknownTopicOrPartition.code: 404,
    E.UnknownTopicId.code: 404,
    E.GroupIdNotFound.code: 404,
    E.TopicAlreadyExists.code: 409,
    E.OutOfOrderSequenceNumber.code: 409,
    E.InvalidProducerEpoch.code: 409,
    E.ProducerFenced.code: 409,
    E.UnknownProducerId.code: 409,
    E.NonEmptyGroup.code: 409,
    E.IllegalGeneration.code: 409,
    E.UnknownMemberId.code: 409,
    E.RebalanceInProgress.code: 409,
    E.FencedInstanceId.code: 409,
    E.InconsistentGroupProtocol.code: 400,
    E.InvalidSessionTimeout.code: 400,
    E.MessageTooLarge.code: 413,
    E.RecordListTooLarge.code: 413,
    E.OffsetOutOfRange.code: 416,
    E.ThrottlingQuotaExceeded.code: 429,
    E.KafkaStorageError.code: 503,
    E.RequestTimedOut.code: 503,
    E.NotLeaderOrFollower.code: 503,
    E.ConcurrentTransactions.code: 503,
    E.TransactionalIdAuthorizationFailed.code: 403,
    E.TransactionalIdNotFound.code: 404,
    E.InvalidTxnState.code: 409,
    E.InvalidProducerIdMapping.code: 409,
    E.InvalidTransactionTimeout.code: 400,
    E.GroupMaxSizeReached.code: 409,
    E.FencedMemberEpoch.code: 409,
    E.UnreleasedInstanceId.code: 409,
    E.StaleMemberEpoch.code: 409,
    E.UnsupportedAssignor.code: 400,
    E.InvalidRegularExpression.code: 400,
}


def status_for(error: E.KafkaError) -> int:
    if isinstance(error, UnsupportedContentType):
        return 415
    return STATUS_BY_CODE.get(error.code, 503 if error.retriable else 500)


V3_PREFIX = "/v3/"
SCHEMA_REGISTRY_PREFIX = "/schema-registry"


def is_v3(path: str) -> bool:
    """Whether ``path`` is a Confluent REST v3 route (answered with Confluent's error bodies, ``api.v3.errors``)."""
    return path.startswith(V3_PREFIX) or path == "/v3"


def error_response(error: E.KafkaError, retry_after_s: int = 1, status: int | None = None, *,
                   v3: bool = False) -> JSONResponse:
    """The error's response: lakelog's body and status, or with ``v3`` Confluent's (``api.v3.errors``)."""
    if v3:
        status, body = rest_status(error)[0], v3_error_body(error)
    else:
        status, body = status or status_for(error), error.to_dict()
    body["message"] = public_message(body["message"])
    headers = {}
    if status in (429, 503) or (v3 and error.retriable):
        headers["Retry-After"] = str(retry_after_s)
    if status == 401:
        headers["WWW-Authenticate"] = "Bearer"
    return JSONResponse(body, status_code=status, headers=headers)


def install_error_handlers(app: FastAPI) -> None:
    """Map KafkaError, request validation errors, HTTP errors and anything unexpected to error bodies."""

    def metrics(request: Request) -> "Metrics | None":
        return getattr(request.app.state, "metrics", None)

    def retry_after(request: Request) -> int:
        settings = getattr(request.app.state, "settings", None)
        return settings.retry_after_s if settings is not None else 1

    async def on_kafka_error(request: Request, exc: E.KafkaError) -> JSONResponse:
        m = metrics(request)
        if m is not None:
            m.count_error(exc)
        return error_response(exc, retry_after(request), v3=is_v3(request.url.path))

    async def on_validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        error = BadRequest if is_v3(request.url.path) else E.InvalidRequest
        return await on_kafka_error(request, error(_describe_validation(exc)))

    async def on_http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        headers = getattr(exc, "headers", None)
        if is_v3(request.url.path):
            status = exc.status_code if exc.status_code in (404, 405) else 400
            return JSONResponse(v3_http_error_body(status), status_code=status, headers=headers)
        if request.url.path.startswith(SCHEMA_REGISTRY_PREFIX):  # Confluent's registry answers {error_code, message}
            return JSONResponse({"error_code": exc.status_code,
                                 "message": f"HTTP {exc.status_code} {HTTPStatus(exc.status_code).phrase}"},
                                status_code=exc.status_code, headers=headers)
        if exc.status_code in (404, 405):  # no such route or method: an HTTP error, no Kafka one (as Confluent's)
            name = HTTPStatus(exc.status_code).name
            body = {"error_code": exc.status_code, "error_name": name,
                    "message": f"{name.replace('_', ' ').lower()}: {request.method} {request.url.path}"}
            return JSONResponse(body, status_code=exc.status_code, headers=headers)
        err = E.InvalidRequest(str(exc.detail))
        return JSONResponse(err.to_dict(), status_code=exc.status_code, headers=headers)


    app.add_exception_handler(E.KafkaError, on_kafka_error)
    app.add_exception_handler(RequestValidationError, on_validation_error)
    app.add_exception_handler(StarletteHTTPException, on_http_error)
    # Anything else is answered by UnexpectedErrors (a middleware): an ``Exception`` handler runs in Starlette's
    # outermost middleware, which re-raises after answering, and the server then drops the connection.


def _describe_validation(exc: RequestValidationError) -> str:
    parts = []
    for err in exc.errors()[:5]:
        where = ".".join(str(x) for x in err.get("loc", ()))
        parts.append(f"{where}: {err.get('msg')}")
    return "malformed request: " + "; ".join(parts) if parts else "malformed request"


class UnexpectedErrors:
    """ASGI middleware answering any exception a route lets through with :func:`unexpected_error`'s Kafka error
    (503 for a storage failure, else 500), counted in the metrics, before the response has started."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started = False

        async def tracking_send(message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        except Exception as exc:
            if started:
                raise
            error = unexpected_error(exc, scope["method"], scope["path"])
            state = scope["app"].state
            if getattr(state, "metrics", None) is not None:
                state.metrics.count_error(error)
            settings = getattr(state, "settings", None)
            await error_response(error, settings.retry_after_s if settings is not None else 1,
                                 v3=is_v3(scope["path"]))(scope, receive, send)
