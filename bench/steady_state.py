"""The sustained rate of a fixed-size run: records per second over the middle of its acknowledgements.

A run that produces a fixed count of records starts and ends in states a continuous stream never is in: at the
start the producers fill their queues (on the cores the fronts share) and their first requests carry what was
queued by then; at the end each partition's last batch is partial and the producers finish one by one.  Both
cost a fixed-size run time that a stream does not pay, and more of it in a shorter run.  :func:`window` finds
the run's middle instead: from the moment the producers together have had ``low`` of their records
acknowledged to the moment they have had ``high``; :func:`rate_over` is a curve's rate over it.  Pure
functions.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

Curve = Sequence[tuple[float, float]]  # (time s, records acknowledged so far), in time order


def _at(curve: Curve, t):
    """The curve at *t* (a time or an array of them): linear between samples, its first value before them and
    its last after."""
    times, values = zip(*curve)
    return np.interp(t, times, values)


def _crossing(times: Sequence[float], totals: Sequence[float], level: float) -> float:
    """The first time the piecewise-linear (times, totals) reaches *level*."""
    for i, v in enumerate(totals):
        if v >= level:
            if i == 0:
                return float(times[0])
            t0, v0 = times[i - 1], totals[i - 1]
            return float(t0 + (times[i] - t0) * (level - v0) / (v - v0))
    raise ValueError(f"the curves never reach {level}")


def window(curves: Sequence[Curve], low: float = 0.2, high: float = 0.8) -> tuple[float, float]:
    """The times at which the curves' sum reaches *low* and *high* of its final value (0 <= low < high <= 1).

    Each curve is one producer's (time, acknowledged so far) samples, non-decreasing in both; between samples
    a curve is taken as linear, so the sum is linear between the union of the sample times."""
    if not 0 <= low < high <= 1 or not curves or any(not c for c in curves):
        raise ValueError("a window needs 0 <= low < high <= 1 and a sample in every curve")
    times = np.unique([t for c in curves for t, _ in c])
    totals = sum(_at(c, times) for c in curves)
    final = totals[-1]
    if final <= 0:
        raise ValueError("a window needs acknowledged records")
    start, end = _crossing(times, totals, low * final), _crossing(times, totals, high * final)
    if end <= start:
        raise ValueError("the curves reach both levels at the same time")
    return start, end


def rate_over(curve: Curve, start: float, end: float) -> float:
    """A curve's mean slope from *start* to *end* (end > start), linear between its samples."""
    at_start, at_end = _at(curve, [start, end])
    return float(at_end - at_start) / (end - start)
