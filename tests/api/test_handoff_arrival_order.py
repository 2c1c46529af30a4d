"""The handoff route lets a topic's handoffs into its writer in the order their requests arrived
(api/routers/handoffs.py, ArrivalOrder): whatever order their bodies finish decoding in, and past requests that
fail or are cancelled while they wait."""

from __future__ import annotations

import asyncio

import pytest

from api.routers.handoffs import ArrivalOrder


async def _request(order: ArrivalOrder, taken: list[int], decode_s: float, outcome: str) -> None:
    ticket = order.issue()
    try:
        await asyncio.sleep(decode_s)
        if outcome == "bad body":
            raise ValueError("refused before its turn")
        await order.turn(ticket)
        taken.append(ticket)
    except ValueError:
        pass
    finally:
        order.finish(ticket)


@pytest.mark.parametrize("requests, expected", [
    # (decode seconds, outcome) per request, in arrival order -> the tickets let in, in order
    ([(0.0, "ok"), (0.0, "ok"), (0.0, "ok")], [0, 1, 2]),
    ([(0.05, "ok"), (0.01, "ok"), (0.0, "ok")], [0, 1, 2]),  # later bodies decoded first still wait
    ([(0.05, "ok"), (0.01, "ok"), (0.03, "bad body"), (0.0, "ok"), (0.02, "ok")], [0, 1, 3, 4]),
    ([(0.03, "bad body"), (0.0, "ok")], [1]),  # a failed first request does not hold up the next
])
def test_requests_are_let_in_in_arrival_order(requests, expected):
    async def run() -> list[int]:
        order, taken = ArrivalOrder(), []
        # started one after another, as their requests arrived on the event loop
        await asyncio.gather(*(_request(order, taken, s, outcome) for s, outcome in requests))
        return taken
    assert asyncio.run(run()) == expected


def test_a_request_cancelled_while_it_waits_does_not_hold_up_the_next():
    async def run() -> list[int]:
        order, taken = ArrivalOrder(), []
        first = asyncio.ensure_future(_request(order, taken, 0.2, "ok"))
        cancelled = asyncio.ensure_future(_request(order, taken, 0.0, "ok"))
        last = asyncio.ensure_future(_request(order, taken, 0.0, "ok"))
        await asyncio.sleep(0.05)
        cancelled.cancel()
        await asyncio.gather(first, cancelled, last, return_exceptions=True)
        return taken
    assert asyncio.run(run()) == [0, 2]
