"""Typed dependencies: the app's shared objects (created in the lifespan) and the caller's principal.

All are ``async def``: they do microseconds of in-memory work, and FastAPI runs a plain ``def``
dependency in the thread pool -- a thread hop each, on every request.
"""

from __future__ import annotations

from typing import Annotated, Awaitable, Callable

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from lakelog import Log
from lakelog.broker.authorizer import GROUP, TOPIC, Authorizer, Principal
from lakelog.broker.metrics import Metrics
from lakelog.broker.topic_metadata import TopicMetadata
from lakelog.group.consumer_offsets import OffsetStore

from api.produce_request import ProduceService

_bearer = HTTPBearer(auto_error=False, description="A token from the front's auth file (absent: open front)")


async def get_log(request: Request) -> Log:
    return request.app.state.log


async def get_offsets(request: Request) -> OffsetStore:
    return request.app.state.offsets


async def get_metadata(request: Request) -> TopicMetadata:
    return request.app.state.metadata


async def get_authorizer(request: Request) -> Authorizer:
    return request.app.state.authorizer


async def get_metrics(request: Request) -> Metrics:
    return request.app.state.metrics


async def get_produce(request: Request) -> ProduceService:
    return request.app.state.produce


LogDep = Annotated[Log, Depends(get_log)]
OffsetStoreDep = Annotated[OffsetStore, Depends(get_offsets)]
MetadataDep = Annotated[TopicMetadata, Depends(get_metadata)]
AuthorizerDep = Annotated[Authorizer, Depends(get_authorizer)]
MetricsDep = Annotated[Metrics, Depends(get_metrics)]
ProduceDep = Annotated[ProduceService, Depends(get_produce)]


async def authenticate(authorizer: AuthorizerDep,
                 credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]) -> Principal:
    """The caller's principal; 401 ``SASL_AUTHENTICATION_FAILED`` without a known bearer token."""
    header = f"{credentials.scheme} {credentials.credentials}" if credentials is not None else None
    return authorizer.authenticate(header)


PrincipalDep = Annotated[Principal, Depends(authenticate)]


def topic_acl(operation: str) -> Callable[..., Awaitable[Principal]]:
    """A dependency requiring ``operation`` on the path's ``{topic}`` (403 ``TOPIC_AUTHORIZATION_FAILED``)."""

    async def check(topic: str, principal: PrincipalDep, authorizer: AuthorizerDep) -> Principal:
        authorizer.authorize(principal, operation, TOPIC, topic)
        return principal

    return check


def group_acl(operation: str) -> Callable[..., Awaitable[Principal]]:
    """A dependency requiring ``operation`` on the path's ``{group}`` (403 ``GROUP_AUTHORIZATION_FAILED``)."""

    async def check(group: str, principal: PrincipalDep, authorizer: AuthorizerDep) -> Principal:
        authorizer.authorize(principal, operation, GROUP, group)
        return principal

    return check
