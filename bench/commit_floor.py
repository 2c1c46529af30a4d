"""The lowest acknowledgement latency any front could reach with the PUT latencies a run measured.

A Delta commit file must not be visible before the segment files it adds, and a table's commits are strictly
ordered (version N+1 only after N), so on an object store every acknowledgement waits for one segment PUT,
then for the commit ahead of it, then for the commit PUT that carries it.  :func:`serial_commit_floor`
simulates the best case of that rule: no queue (each request's segment upload starts the moment it arrives,
as one object of its own), no CPU (no parsing, no encoding, no scheduling delay), and a committer that
launches the next commit, carrying every segment landed by then, the moment the one ahead of it returns.
Each PUT's time is drawn from the times the latency proxy measured in the run (bootstrap), so the floor is the
arithmetic of the measured latencies rather than of the profile's parameters.

Optionally each PUT is hedged: one slower than ``hedge_ms`` is sent a second time at ``hedge_ms`` and the
earlier answer wins (as AWS suggests for S3's latency tail), at the cost of the extra PUTs, which the result
counts; a hedge at 0 ms sends every PUT of that kind twice at once.  Pure functions; deterministic for a given seed.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Sequence

from bench import percentile


@dataclass(frozen=True)
class Floor:
    """p50 and p99 acknowledgement latency in ms, and PUTs per request (segment and commit PUTs, hedges
    included; a commit shared by k requests counts 1/k to each)."""

    p50_ms: float
    p99_ms: float
    puts_per_request: float


def serial_commit_floor(upload_ms: Sequence[float], commit_ms: Sequence[float], requests_per_s: float, *,
                        hedge_ms: tuple[float, float] | None = None, requests: int = 20_000,
                        seed: int = 0) -> Floor:
    """The floor for *requests* Poisson arrivals at *requests_per_s*, segment PUTs drawn from *upload_ms* and
    commit PUTs from *commit_ms* (both non-empty, ms); *hedge_ms* is ``(segment hedge, commit hedge)``."""
    if not upload_ms or not commit_ms or requests_per_s <= 0 or requests < 1:
        raise ValueError("serial_commit_floor needs PUT samples of both kinds, a positive rate and requests")
    rng = random.Random(seed)
    puts = 0

    def put(samples: Sequence[float], hedge: float | None) -> float:
        nonlocal puts
        first = rng.choice(samples)
        puts += 1
        if hedge is None or first <= hedge:
            return first
        puts += 1
        return min(first, hedge + rng.choice(samples))

    upload_hedge, commit_hedge = hedge_ms if hedge_ms is not None else (None, None)
    arrived, landed = 0.0, []
    for _ in range(requests):
        arrived += rng.expovariate(requests_per_s / 1000.0)
        landed.append((arrived + put(upload_ms, upload_hedge), arrived))
    landed.sort()
    latencies, i, committer_free = [], 0, 0.0
    while i < len(landed):
        launched = max(committer_free, landed[i][0])
        j = i
        while j < len(landed) and landed[j][0] <= launched:
            j += 1
        committer_free = launched + put(commit_ms, commit_hedge)
        latencies.extend(committer_free - arrival for _, arrival in landed[i:j])
        i = j
    return Floor(percentile(latencies, 50), percentile(latencies, 99), puts / requests)
