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
# A handoff of a few groups' segments (a few KB of JSON) decodes in well under a millisecond: on the event loop,
# not through a hop to a thread and back, which costs more than the decoding under load and sits on every handoff's
# round trip (BENCHMARKS.md, "Several fronts on one S3 root"). Larger ones, up to MAX_HANDOFF_BYTES, still go to a
# thread.
INLINE_DECODE_BYTES = 64 * 1024


class ArrivalOrder:
    """Tickets that let a topic's handoffs into its writer in the order their requests arrived.

    A front keeps several handoffs of a topic in flight, each planned on the one before it; two threads racing
    for the topic's lock could take the later first, and the committer would refuse it (its log ends are not
    yet the log's). Event-loop only: no lock. A ticket is always finished (``finally``), taken its turn or not,
    so one request that fails never holds up the others.
    """

    def __init__(self) -> None:
        self._issued = 0
        self._next = 0  # the ticket whose turn it is
        self._finished: set[int] = set()
        self._waiting: dict[int, asyncio.Future] = {}

    def issue(self) -> int:
        self._issued += 1
        return self._issued - 1

    async def turn(self, ticket: int) -> None:
        if ticket == self._next:
            return
        self._waiting[ticket] = asyncio.get_running_loop().create_future()
        try:
            await self._waiting[ticket]
        finally:
            del self._waiting[ticket]

    def finish(self, ticket: int) -> None:
        self._finished.add(ticket)
        while self._next in self._finished:
            self._finished.remove(self._next)
            self._next += 1
        if (turn := self._waiting.get(self._next)) is not None and not turn.done():
            turn.set_result(None)


def _arrival_order(app, topic: str) -> ArrivalOrder:
    orders = getattr(app.state, "handoff_orders", None)
    if orders is None:
        orders = app.state.handoff_orders = {}
    return orders.setdefault(topic, ArrivalOrder())


@router.post(ROUTE)
async def hand_off(topic: str, request: Request) -> Response:
    secret = getattr(request.app.state, "cluster_secret", None)
    shown = request.headers.get(SECRET_HEADER, "")
    if secret is None or not hmac.compare_digest(shown.encode(), secret.encode()):
        raise SaslAuthenticationFailed("this route is for the fronts of this cluster")
    order = _arrival_order(request.app, topic)
    ticket = order.issue()
    try:
        body = await request.body()
        handoff = (decode_handoff(body) if len(body) <= INLINE_DECODE_BYTES
                   else await run_in_threadpool(decode_handoff, body))
        await order.turn(ticket)
        try:
            # at once if the topic's writer is open and free; else on a thread, which may wait for its lock
            done = request.app.state.log.try_accept_handoff(topic, handoff)
            if done is None:
                done = await run_in_threadpool(request.app.state.log.accept_handoff, topic, handoff)
        except KafkaError as e:  # refused before it was taken (no such topic, ...): never committed
            return error_response(e, status=409)
    finally:
        order.finish(ticket)
    try:
        answer = await asyncio.wrap_future(done)
    except HandoffRejected as e:
        return error_response(e.cause, status=409)
    except KafkaError as e:  # the commit that carried it failed ambiguously: the sender looks for its id
        return error_response(e, status=503)
    return Response(encode(answer), media_type="application/json")
