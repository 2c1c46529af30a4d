"""bench/steady_state.py: the middle of a fixed-size run and a rate over it, table-driven."""

import pytest

from bench.steady_state import rate_over, window

# one producer at 100 records/s for 10 s, samples each second
LINE = [(float(t), 100.0 * t) for t in range(11)]
# the same, with a slow first and last second (a queue filling, a partial last batch): 10 records each
EDGES = [(0.0, 0.0), (1.0, 10.0), *((1.0 + t, 10.0 + 100.0 * t) for t in range(1, 9)), (10.0, 820.0)]


@pytest.mark.parametrize(
    "curves, low, high, start, end",
    [
        ([LINE], 0.2, 0.8, 2.0, 8.0),
        ([LINE], 0.0, 1.0, 0.0, 10.0),
        # two producers side by side: the same window
        ([LINE, LINE], 0.2, 0.8, 2.0, 8.0),
        # slow edges: the whole run is 82 records/s (0 to 10 s), its middle 100 (164 to 656 records)
        ([EDGES], 0.0, 1.0, 0.0, 10.0),
        ([EDGES], 0.2, 0.8, 2.54, 7.46),
        # a producer that finishes early (at 5 s, 500 records) beside one going on to 7 s: 600 of the sum's
        # 1,200 at 3 s (200/s), 1,080 at 5.8 s (100/s since 5 s)
        ([[(0.0, 0.0), (5.0, 500.0)], [(0.0, 0.0), (7.0, 700.0)]], 0.5, 0.9, 3.0, 5.8),
        # samples at different times in each curve are interpolated, not dropped
        ([[(0.0, 0.0), (10.0, 1000.0)], [(0.0, 0.0), (2.5, 250.0), (10.0, 1000.0)]], 0.2, 0.8, 2.0, 8.0),
    ],
)
def test_window(curves, low, high, start, end):
    assert window(curves, low, high) == pytest.approx((start, end))


@pytest.mark.parametrize("curves, low, high", [
    ([], 0.2, 0.8),                              # no producer
    ([[]], 0.2, 0.8),                            # a producer without samples
    ([[(0.0, 0.0), (1.0, 0.0)]], 0.2, 0.8),      # nothing acknowledged
    ([LINE], 0.8, 0.2),                          # the window backwards
    ([LINE], -0.1, 0.8),
    ([[(0.0, 0.0), (0.0, 10.0)]], 0.2, 0.8),     # everything at one instant: no window
])
def test_window_refuses(curves, low, high):
    with pytest.raises(ValueError):
        window(curves, low, high)


@pytest.mark.parametrize(
    "curve, start, end, rate",
    [
        (LINE, 2.0, 8.0, 100.0),
        (EDGES, 2.54, 7.46, 100.0),
        (EDGES, 0.0, 10.0, 82.0),
        # between samples a curve is linear; before its first and after its last it stays put
        ([(1.0, 0.0), (3.0, 100.0)], 0.0, 2.0, 25.0),
        ([(1.0, 0.0), (3.0, 100.0)], 2.0, 4.0, 25.0),
        # a front read every half second, its rate over a window between the reads
        ([(0.0, 0.0), (0.5, 40.0), (1.0, 80.0), (1.5, 100.0)], 0.25, 1.25, 70.0),
    ],
)
def test_rate_over(curve, start, end, rate):
    assert rate_over(curve, start, end) == pytest.approx(rate)
