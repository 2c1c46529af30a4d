"""bench/commit_floor.py: the acknowledgement-latency floor under strictly ordered commits, table-driven."""

import random

import pytest

from bench import percentile
from bench.commit_floor import serial_commit_floor
from bench.s3_proxy import PROFILES

SLOW_TAIL = [10.0] * 95 + [1000.0] * 5  # 5% of PUTs take a second


@pytest.mark.parametrize(
    "upload, commit, rate, hedge, p50, p99, puts",
    [
        # one request a second: every commit finds the committer idle, so upload + commit exactly
        ([10.0], [10.0], 1.0, None, (20.0, 20.0), (20.0, 20.0), (1.99, 2.0)),
        # 10,000 a second: the committer is never idle, each request also waits out the commit ahead (0-10 ms),
        # and about a hundred requests share each commit
        ([10.0], [10.0], 10_000.0, None, (23.0, 27.0), (29.0, 30.0), (1.0, 1.05)),
        # a slow tail of 5% of segment PUTs is the p99 ...
        (SLOW_TAIL, [10.0], 1.0, None, (20.0, 20.0), (1010.0, 1010.0), (1.99, 2.0)),
        # ... until a PUT slower than 20 ms is sent again: 20 + 10 + the commit, for 5% more PUTs
        (SLOW_TAIL, [10.0], 1.0, (20.0, 20.0), (20.0, 20.0), (40.0, 40.0), (2.02, 2.07)),
        # two commit PUTs in three take 30 ms, so the median request takes 40 ms and some wait for the commit ahead ...
        ([10.0], [10.0, 30.0, 30.0], 1.0, None, (40.0, 40.0), (45.0, 60.0), (1.99, 2.0)),
        # ... until every commit PUT is sent twice at once (a hedge at 0 ms): the earlier of two draws is 30 ms
        # only when both are (4 in 9), for twice the commit PUTs
        ([10.0], [10.0, 30.0, 30.0], 1.0, (1e9, 0.0), (20.0, 20.0), (40.0, 40.5), (2.98, 3.0)),
        # slow commits (every commit takes 50 ms) at 100 requests a second: the wait for the commit ahead
        ([10.0], [50.0], 100.0, None, (75.0, 95.0), (100.0, 110.0), (1.1, 1.5)),
    ],
)
def test_serial_commit_floor(upload, commit, rate, hedge, p50, p99, puts):
    floor = serial_commit_floor(upload, commit, rate, hedge_ms=hedge, requests=5_000)
    assert p50[0] <= floor.p50_ms <= p50[1], floor
    assert p99[0] <= floor.p99_ms <= p99[1], floor
    assert puts[0] <= floor.puts_per_request <= puts[1], floor


def test_serial_commit_floor_is_deterministic_per_seed():
    samples = [5.0, 10.0, 40.0, 80.0]
    assert serial_commit_floor(samples, samples, 50.0, seed=3) == serial_commit_floor(samples, samples, 50.0, seed=3)


@pytest.mark.parametrize("upload, commit, rate", [([], [1.0], 1.0), ([1.0], [], 1.0), ([1.0], [1.0], 0.0)])
def test_serial_commit_floor_rejects_what_it_cannot_simulate(upload, commit, rate):
    with pytest.raises(ValueError):
        serial_commit_floor(upload, commit, rate)


@pytest.mark.parametrize("values, q, expected", [([3.0, 1.0, 2.0], 50, 2.0), ([1.0] * 99 + [50.0], 99, 50.0),
                                                 ([1.0] * 100 + [50.0], 50, 1.0), ([7.0], 100, 7.0)])
def test_percentile_the_floor_reads_its_quantiles_with(values, q, expected):
    assert percentile(values, q) == expected


def test_the_s3_standard_profile_puts_the_unhedged_floor_above_150_ms():
    """docs/storage.md's arithmetic: with PUTs drawn from the s3-standard profile alone (no moto, no CPU), at
    the half-rate JSON load's request rate, no front reaches a 150 ms p99 without hedging; hedging each PUT
    at the profile's p90 (47 ms) would, in this model."""
    rng = random.Random(0)
    draws = [1000 * PROFILES["s3-standard"].draw_s("PUT", rng) for _ in range(20_000)]
    assert 150 < serial_commit_floor(draws, draws, 112.0).p99_ms < 170
    assert 130 < serial_commit_floor(draws, draws, 112.0, hedge_ms=(47.0, 47.0)).p99_ms < 150


def test_a_commit_put_sent_twice_puts_the_floor_well_under_150_ms():
    """docs/storage.md: every commit PUT sent twice at once (segment PUTs hedged at the profile's p90) takes the
    floor's p99 to about 125 ms, and its p50 well under the floor's with both kinds hedged at the p90."""
    rng = random.Random(0)
    draws = [1000 * PROFILES["s3-standard"].draw_s("PUT", rng) for _ in range(20_000)]
    twice = serial_commit_floor(draws, draws, 112.0, hedge_ms=(47.0, 0.0))
    assert 110 < twice.p99_ms < 135, twice
    assert twice.p50_ms < serial_commit_floor(draws, draws, 112.0, hedge_ms=(47.0, 47.0)).p50_ms - 5
