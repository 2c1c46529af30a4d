"""One front's client quota enforcement: a sensor per (quota key, user, client id) as Kafka's quota managers
keep them, and the throttle time each recorded value calls for.

Quotas are per front, as Kafka's are per broker: a client producing through two
fronts gets its byte rate from each.  A sensor exists for a key only once some
entity has a quota of that key (Kafka's ``quotasEnabled``); it is dropped after
an hour without records (``InactiveSensorExpirationTimeSeconds``).
"""

from __future__ import annotations

import threading
import time
from typing import Callable

from lakelog.quota.client_quota import REQUEST_PERCENTAGE, Quotas, enabled_keys, resolve
from lakelog.quota.rate import DEFAULT_SAMPLES, DEFAULT_WINDOW_MS, SampledRate, record_and_throttle

INACTIVE_SENSOR_MS = 3_600_000


class QuotaManager:
    """Thread-safe. ``quotas()`` returns the quotas in force (the root's cluster metadata)."""

    def __init__(self, quotas: Callable[[], Quotas], *, samples: int = DEFAULT_SAMPLES,
                 window_ms: int = DEFAULT_WINDOW_MS, clock: Callable[[], float] = time.monotonic) -> None:
        self._quotas = quotas
        self.samples, self.window_ms = samples, window_ms
        self._clock = clock
        self._lock = threading.Lock()
        self._sensors: dict[tuple[str, str, str], SampledRate] = {}
        self._enabled: tuple[object, frozenset[str]] = (None, frozenset())
        self._records = 0

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    def enabled(self, key: str) -> bool:
        """Whether any entity has a quota of ``key`` (else nothing is recorded for it)."""
        quotas = self._quotas()
        if self._enabled[0] is not quotas:
            self._enabled = (quotas, enabled_keys(quotas))
        return key in self._enabled[1]

    def record(self, key: str, user: str, client_id: str, value: float) -> int:
        """Record ``value`` (bytes, or percent-seconds of request time) for the client; the throttle time in ms
        (0 within quota). Request-time throttles are capped at one window, as Kafka's
        ``ClientRequestQuotaManager`` caps them; byte-rate throttles are not."""
        if not self.enabled(key):
            return 0
        bound, tags = resolve(self._quotas(), key, user, client_id)
        now = self._now_ms()
        with self._lock:
            sensor = self._sensor(key, tags, now)
            if bound is None:
                sensor.record(value, now)
                return 0
            throttle = record_and_throttle(sensor, value, bound, now)
        return min(throttle, self.window_ms) if key == REQUEST_PERCENTAGE else throttle

    def unrecord(self, key: str, user: str, client_id: str, value: float) -> None:
        """Take back a recorded value (a throttled Fetch answers empty, so its bytes do not count)."""
        if not self.enabled(key):
            return
        _, tags = resolve(self._quotas(), key, user, client_id)
        now = self._now_ms()
        with self._lock:
            self._sensor(key, tags, now).record(-value, now)

    def max_value_in_window(self, key: str, user: str, client_id: str) -> float | None:
        """The most one request may carry without being throttled whatever came before (Kafka's
        ``getMaxValueInQuotaWindow``: the quota times ``samples - 1`` windows); None without a quota."""
        if not self.enabled(key):
            return None
        bound, _ = resolve(self._quotas(), key, user, client_id)
        return None if bound is None else bound * (self.samples - 1) * self.window_ms / 1000.0

    def _sensor(self, key: str, tags: tuple[str, str], now: int) -> SampledRate:
        self._records += 1
        if self._records % 1024 == 0:
            self._sensors = {k: s for k, s in self._sensors.items()
                             if s.last_record_ms is None or now - s.last_record_ms < INACTIVE_SENSOR_MS}
        sensor = self._sensors.get((key, *tags))
        if sensor is None:
            sensor = self._sensors[(key, *tags)] = SampledRate(self.samples, self.window_ms)
        return sensor
