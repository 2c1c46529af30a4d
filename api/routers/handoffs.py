"""Commits handed over by the other fronts on this root (lakelog/writer/commit_handoff.py).

Not for clients: a request must show the root's cluster secret (lakelog/cluster/cluster_secret.py), and its
body is checked in full before anything is committed.  Answers: 200 with the version it landed in; 409 (with
the Kafka error) when it was not and will not be committed; 503 when its outcome is unknown.
"""

from __future__ import annotations

import asyncio
import hmac

from fastapi import APIRouter, Request, Response
from starlette.concurrency import run_in_threadpool

from api.errors import error_response
from lakelog.cluster.cluster_secret import SECRET_HEADER
from lakelog.cluster.commit_forwarder import ROUTE
from lakelog.errors import KafkaError, SaslAuthenticationFailed
from lakelog.writer.commit_handoff import HandoffRejected, decode_handoff, encode

router = APIRouter(include_in_schema=False)


@router.post(ROUTE)
async def hand_off(topic: str, request: Request) -> Response:
    secret = getattr(request.app.state, "cluster_secret", None)
    shown = request.headers.get(SECRET_HEADER, "")
    if secret is None or not hmac.compare_digest(shown.encode(), secret.encode()):
        raise SaslAuthenticationFailed("this route is for the fronts of this cluster")
    # off the event loop: up to MAX_HANDOFF_BYTES of JSON and a stats parse per segment
    handoff = await run_in_threadpool(decode_handoff, await request.body())
    try:
        done = await run_in_threadpool(request.app.state.log.accept_handoff, topic, handoff)
    except KafkaError as e:  # refused before it was taken (no such topic, ...): never committed
        return error_response(e, status=409)
    try:
        answer = await asyncio.wrap_future(done)
    except HandoffRejected as e:
        return error_response(e.cause, status=409)
    except KafkaError as e:  # the commit that carried it failed ambiguously: the sender looks for its id
        return error_response(e, status=503)
    return Response(encode(answer), media_type="application/json")
