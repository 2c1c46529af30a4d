"""Kafka's quota sensor and throttle formula (lakelog.quota.rate), against values worked out from Kafka's
Rate/SampledStat code: 11 samples of 1 s, the window never shorter than 10 s."""

from __future__ import annotations

import pytest

from lakelog.quota.rate import SampledRate, record_and_throttle, throttle_time_ms


@pytest.mark.parametrize("rate,bound,window,expected", [
    (2000.0, 1000.0, 10_000, 10_000),  # twice the quota over 10 s: wait 10 s
    (1500.0, 1000.0, 10_000, 5000),
    (1000.0, 1000.0, 10_000, 0),
    (999.0, 1000.0, 10_000, 0),
    (1000.5, 1000.0, 1000, 1),  # Java's Math.round: half up
])
def test_throttle_time_formula(rate, bound, window, expected):
    assert throttle_time_ms(rate, bound, window) == expected


def test_a_new_clients_burst_is_measured_over_ten_windows():
    r = SampledRate()
    r.record(5000, 0)
    assert r.window_size_ms(0) == 10_000 and r.measure(0) == 500.0
    assert r.window_size_ms(3500) == 10_500  # 3.5 s elapsed: 3 full windows, topped up to the 10 it needs


def test_rate_over_time_and_throttle():
    r = SampledRate()
    out = [record_and_throttle(r, 500_000, 1_000_000, t) for t in range(0, 3000, 100)]
    assert out[:20] == [0] * 20  # 10 MB fits the first ten seconds' budget at 1 MB/s
    assert out[20] == 500 and out[21] == 900 and out == sorted(out)


def test_idle_samples_expire():
    r = SampledRate()
    r.record(1000, 0)
    assert r.measure(10_999) > 0
    assert r.measure(11_000) == 0.0  # a sample idle for samples * window is reset
