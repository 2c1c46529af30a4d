"""Kafka's quota sensor: a rate over sampled windows, and the throttle time that brings it back under a bound.

:class:`SampledRate` is Kafka's ``Rate`` over a ``WindowedSum``
(``org.apache.kafka.common.metrics.stats``): ``samples`` windows of
``window_ms`` (the broker's ``quota.window.num`` 11 and
``quota.window.size.seconds`` 1), a sample closed when its window has passed,
samples idle for ``samples * window_ms`` reset, and the rate divided by the
elapsed span but never by less than ``samples - 1`` whole windows, so a new
client's first burst is measured over about ten seconds, not its first
millisecond.

:func:`throttle_time_ms` is Kafka's ``QuotaUtils.throttleTime``: with observed
rate O over window W and bound T, the delay X that gives ``O * W / (W + X) = T``
is ``X = (O - T) / T * W``. Pure (the caller passes the time).
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_SAMPLES = 11  # Kafka's quota.window.num
DEFAULT_WINDOW_MS = 1000  # Kafka's quota.window.size.seconds, in ms


@dataclass
class _Sample:
    start_ms: int
    last_event_ms: int
    value: float = 0.0
    events: int = 0

    def reset(self, now_ms: int) -> None:
        self.start_ms = self.last_event_ms = now_ms
        self.value, self.events = 0.0, 0


class SampledRate:
    """A per-second rate of recorded values. Not thread-safe (one owner: the front's event loop)."""

    def __init__(self, samples: int = DEFAULT_SAMPLES, window_ms: int = DEFAULT_WINDOW_MS) -> None:
        if samples < 2 or window_ms < 1:
            raise ValueError("a quota rate needs at least 2 samples of at least 1 ms")
        self.samples, self.window_ms = samples, window_ms
        self._samples: list[_Sample] = []
        self._current = 0
        self.last_record_ms: int | None = None

    def _current_sample(self, now_ms: int) -> _Sample:
        if not self._samples:
            self._samples.append(_Sample(now_ms, now_ms))
        return self._samples[self._current]

    def record(self, value: float, now_ms: int) -> None:
        sample = self._current_sample(now_ms)
        if now_ms - sample.start_ms >= self.window_ms:  # Kafka's Sample.isComplete (no event-count window)
            self._current = (self._current + 1) % (self.samples + 1)  # one extra: the overlapping sample
            if self._current >= len(self._samples):
                sample = _Sample(now_ms, now_ms)
                self._samples.append(sample)
            else:
                sample = self._samples[self._current]
                sample.reset(now_ms)
        sample.value += value
        sample.events += 1
        sample.last_event_ms = now_ms
        self.last_record_ms = now_ms

    def _purge(self, now_ms: int) -> None:
        expire = self.samples * self.window_ms
        for s in self._samples:
            if now_ms - s.last_event_ms >= expire:
                s.reset(now_ms)

    def window_size_ms(self, now_ms: int) -> int:
        """The span the rate is measured over (Kafka's ``Rate.windowSize``)."""
        self._purge(now_ms)
        oldest = min((s.start_ms for s in self._samples), default=now_ms)
        elapsed = now_ms - oldest
        full, least = elapsed // self.window_ms, self.samples - 1
        if full < least:
            elapsed += (least - full) * self.window_ms
        return max(elapsed, 1)

    def measure(self, now_ms: int) -> float:
        """Recorded values per second."""
        self._purge(now_ms)
        total = sum(s.value for s in self._samples)
        return total / (self.window_size_ms(now_ms) / 1000.0)


def throttle_time_ms(rate: float, bound: float, window_ms: int) -> int:
    """Kafka's ``QuotaUtils.throttleTime``: how long until ``rate`` measured over ``window_ms`` falls to ``bound``
    if nothing more is recorded (0 when it is within the bound). Java's ``Math.round`` (half up)."""
    if rate <= bound or bound <= 0:
        return 0
    x = (rate - bound) / bound * window_ms
    return int(x + 0.5)


def record_and_throttle(rate: SampledRate, value: float, bound: float, now_ms: int) -> int:
    """Record ``value`` and return the throttle time its rate now calls for (Kafka's ``Sensor.record`` with a
    quota, then ``ClientQuotaManager.throttleTime`` on a ``QuotaViolationException``)."""
    rate.record(value, now_ms)
    observed = rate.measure(now_ms)
    if observed <= bound:
        return 0
    return throttle_time_ms(observed, bound, rate.window_size_ms(now_ms))
