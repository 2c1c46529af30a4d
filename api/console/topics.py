"""Console topic pages: the topic list, a topic's partitions and configs, create / edit configs / delete,
the message browser and the produce form.  Same services and ACLs as ``/v1/topics``."""

from __future__ import annotations

import json
from typing import Annotated

from fastapi import APIRouter, Form, Request
from fastapi.responses import RedirectResponse, Response

from lakelog.broker import topic_admin as service
from lakelog.broker.authorizer import CLUSTER, SUBJECT, TOPIC
from lakelog.broker.public_message import public_message
from lakelog.errors import InvalidRequest, KafkaError, UnknownTopicOrPartition, error_for_code
from lakelog.storage.topic_name import is_internal

from api import produce_lane
from api.console.paths import PREFIX
from api.console.messages import browse
from api.console.render import page
from api.console.session import PrincipalDep, authorization
from api.errors import status_for

router = APIRouter(prefix=PREFIX, include_in_schema=False)
Text = Annotated[str, Form(max_length=4096)]


def _redirect(request: Request, url: str) -> Response:
    if request.headers.get("hx-request"):
        return Response(status_code=204, headers={"HX-Redirect": url})
    return RedirectResponse(url, status_code=303)


def _rows(request: Request, principal) -> list[dict]:
    state = request.app.state
    rows = []
    for name in state.log.list_topics(include_internal=True):
        if not state.authorizer.allowed(principal, "Describe", TOPIC, name):
            continue
        try:
            d = state.log.describe_topic(name)
        except UnknownTopicOrPartition:
            continue
        rows.append({"name": name, "internal": is_internal(name), "partitions": len(d.partitions),
                     "records": sum(p.records for p in d.partitions), "bytes": sum(p.bytes for p in d.partitions),
                     "high_watermark": sum(p.high_watermark for p in d.partitions),
                     "segments": sum(p.segments for p in d.partitions)})
    return rows


@router.get("")
def home(request: Request, principal: PrincipalDep) -> Response:
    return RedirectResponse(f"{PREFIX}/topics", status_code=303)


@router.get("/topics")
def topics_page(request: Request, principal: PrincipalDep) -> Response:
    """The list; the page's refresh (htmx) gets the table alone (a topic may be named ``table``)."""
    if request.headers.get("hx-request"):
        return page(request, "_topics_table.html", rows=_rows(request, principal))
    return page(request, "topics.html", principal=principal.name, rows=_rows(request, principal))


@router.post("/topics")
def create_topic(request: Request, principal: PrincipalDep, name: Text,
                 partitions: Annotated[int, Form(ge=1, le=100_000)] = 1) -> Response:
    """Create (Create on the cluster or the topic), as ``POST /v1/topics``."""
    state = request.app.state
    if not state.authorizer.allowed(principal, "Create", CLUSTER):
        state.authorizer.authorize(principal, "Create", TOPIC, name)
    service.create_topic(state.log, state.metadata, name, partitions, {})
    return _redirect(request, f"{PREFIX}/topics/{name}")


def _describe(request: Request, principal, topic: str):
    request.app.state.authorizer.authorize(principal, "Describe", TOPIC, topic)
    return request.app.state.log.describe_topic(topic)


@router.get("/topics/{topic}")
def topic_page(request: Request, topic: str, principal: PrincipalDep) -> Response:
    d = _describe(request, principal, topic)
    return page(request, "topic.html", principal=principal.name, topic=d, internal=is_internal(topic),
                subjects=_subjects(request, principal, topic))


def _subjects(request: Request, principal, topic: str) -> list[dict]:
    """The topic's Schema Registry subjects (``<topic>-key``, ``<topic>-value``, ``<topic>-<record>``) with
    their versions and compatibility levels; the subjects the caller may Describe."""
    from lakelog.schema.schema_errors import SchemaRegistryError

    state = request.app.state
    registry = state.log.schemas
    out = []
    try:
        for subject in registry.subjects(prefix=f"{topic}-"):
            if not state.authorizer.allowed(principal, "Describe", SUBJECT, subject):
                continue
            versions = [registry.version(subject, v) for v in registry.versions(subject)]
            out.append({"subject": subject, "level": registry.get_config(subject, default_to_global=True),
                        "versions": [{"version": v.version, "id": v.id, "type": v.schema_type} for v in versions]})
    except SchemaRegistryError:
        return out
    return out


@router.get("/topics/{topic}/partitions")
def partitions_fragment(request: Request, topic: str, principal: PrincipalDep) -> Response:
    return page(request, "_partitions.html", topic=_describe(request, principal, topic))


@router.post("/topics/{topic}/configs")
def set_config(request: Request, topic: str, principal: PrincipalDep, name: Text, value: Text) -> Response:
    """Set one config (Alter on the topic), validated as ``PATCH /v1/topics/{topic}``.  A refused value is
    answered with the configs as stored (the box shows the stored value again) and the error."""
    state = request.app.state
    state.authorizer.authorize(principal, "Alter", TOPIC, topic)
    try:
        d = service.alter_topic(state.log, state.metadata, topic, {name: value}, None)
    except KafkaError as e:
        if not request.headers.get("hx-request"):
            raise
        state.metrics.count_error(e)
        return page(request, "_configs.html", status_for(e), topic=_describe(request, principal, topic),
                    error=e, error_message=public_message(e.message))
    return page(request, "_configs.html", topic=d, flash=f"{name} = {value} saved")


@router.post("/topics/{topic}/delete")
def delete_topic(request: Request, topic: str, principal: PrincipalDep, confirm: Text = "") -> Response:
    """Delete (Delete on the topic) once the topic's name was typed to confirm."""
    state = request.app.state
    state.authorizer.authorize(principal, "Delete", TOPIC, topic)
    if confirm != topic:
        raise InvalidRequest(f"type the topic's name ({topic}) to confirm its deletion")
    service.delete_topic(state.log, state.metadata, topic)
    return _redirect(request, f"{PREFIX}/topics")


@router.post("/topics/{topic}/produce")
async def produce(request: Request, topic: str, principal: PrincipalDep, value: Text = "", key: Text = "",
                  partition: Text = "", header_key: Text = "", header_value: Text = "") -> Response:
    """Produce one record through the produce lane (Write on the topic, the same validation and commit)."""
    record: dict = {"value": value}
    if key:
        record["key"] = key
    if partition.strip():
        try:
            record["partition"] = int(partition)
        except ValueError:
            raise InvalidRequest(f"partition {partition!r} is not a number") from None
    if header_key:
        record["headers"] = [{"key": header_key, "value": header_value}]
    body = json.dumps({"records": [record]}).encode()
    response = await produce_lane.produce(request.app.state, topic, {}, authorization(request), "application/json",
                                          body)
    result = json.loads(response.body)["results"][0]
    if result["error_code"]:
        raise error_for_code(result["error_code"], result["message"] or result["error_name"])
    return page(request, "_flash.html", message=f"Produced to partition {result['partition']} at offset "
                                                f"{result['base_offset']}")


@router.get("/topics/{topic}/messages")
def messages(request: Request, topic: str, principal: PrincipalDep, partition: int = 0, start: str = "latest",
             offset: int = 0, timestamp: str = "", fmt: str = "text", key: str = "", limit: int = 50) -> Response:
    """The message browser's results (Read on the topic): the results alone for the page's form (htmx), the
    topic page with them for an address typed, bookmarked or reloaded."""
    request.app.state.authorizer.authorize(principal, "Read", TOPIC, topic)
    view = browse(request.app.state.log, topic, partition, start=start, offset=offset, timestamp=timestamp,
                  fmt=fmt, key=key, limit=limit)
    q = {"partition": partition, "start": start, "offset": offset, "timestamp": timestamp, "fmt": fmt, "key": key,
         "limit": view.limit}
    if request.headers.get("hx-request"):
        return page(request, "_messages.html", view=view, q=q, topic_name=topic)
    d = _describe(request, principal, topic)
    return page(request, "topic.html", principal=principal.name, topic=d, internal=is_internal(topic), view=view,
                q=q, topic_name=topic)
