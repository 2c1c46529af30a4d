"""The front's settings: one frozen object, built from arguments and ``LAKELOG_*`` environment variables."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields, replace
from typing import Mapping

from lakelog.writer.accumulator import DEFAULT_BATCH_SIZE, DEFAULT_LINGER_MS

ENV_PREFIX = "LAKELOG_"


@dataclass(frozen=True)
class Settings:
    """Everything ``create_app`` needs.

    ``linger_ms`` / ``batch_size`` / ``buffer_memory`` configure the server's
    group-commit accumulator (Kafka's producer keys, applied writer-side), and
    ``eager_uploads`` lets a partition's next group upload while its last one
    does unless that one filled ``batch_size`` (object stores: lower latency
    for more PUTs; :mod:`lakelog.writer.accumulator`);
    ``max_request_bytes`` bounds a request body (413 above it);
    ``metadata_max_age_ms`` is how long topic metadata (partition count,
    configs) is cached for request validation; ``bench_endpoints`` adds the
    parse-only endpoints used by ``bench/http_produce.py``.
    """

    root: str | None = None  # None: $LAKELOG_ROOT or ./lakelog-data
    storage_options: Mapping[str, str] = field(default_factory=dict)
    host: str = "127.0.0.1"
    port: int = 8080
    auth_file: str | None = None
    linger_ms: float = DEFAULT_LINGER_MS
    batch_size: int = DEFAULT_BATCH_SIZE
    eager_uploads: bool = False
    buffer_memory: int | None = None  # None: 64 MiB on a local root, 256 MiB on an object store (Log.accumulator)
    max_request_bytes: int = 64 << 20
    retry_after_s: int = 1
    metadata_max_age_ms: int = 1000
    bench_endpoints: bool = False
    group_min_session_timeout_ms: int = 6_000
    group_max_session_timeout_ms: int = 1_800_000
    group_initial_rebalance_delay_ms: int = 3_000
    group_max_size: int = 2**31 - 1
    group_consumer_session_timeout_ms: int = 45_000
    group_consumer_heartbeat_interval_ms: int = 5_000
    group_consumer_max_size: int = 200
    group_consumer_migration_policy: str = "bidirectional"
    # Several fronts on one root (docs/storage.md): this front's Kafka node id turns partition leases on.
    node_id: int | None = None
    front_session_timeout_ms: int = 10_000
    kafka_advertised: str | None = None  # HOST:PORT other fronts and Kafka clients are told
    # Kafka's broker configs of the Kafka listener (docs/kafka-clients.md)
    auto_create_topics_enable: bool = True
    num_partitions: int = 1
    quota_window_num: int = 11
    quota_window_size_seconds: int = 1
    # the listener's limits
    fetch_max_bytes: int = 57_671_680
    sasl_server_max_receive_size: int = 524_288
    advertised_url: str | None = None  # the HTTP URL other fronts and clients are told (None: http://host:port)

    @property
    def http_url(self) -> str:
        """This front's HTTP address as other fronts and clients are given it."""
        return self.advertised_url or f"http://{self.host}:{self.port}"

    def coordinator_config(self):
        """The group coordinator's settings (Kafka's ``group.*`` broker keys)."""
        from lakelog.group.group_coordinator_config import CoordinatorConfig

        return CoordinatorConfig(group_min_session_timeout_ms=self.group_min_session_timeout_ms,
                                 group_max_session_timeout_ms=self.group_max_session_timeout_ms,
                                 group_initial_rebalance_delay_ms=self.group_initial_rebalance_delay_ms,
                                 group_max_size=self.group_max_size,
                                 group_consumer_session_timeout_ms=self.group_consumer_session_timeout_ms,
                                 group_consumer_heartbeat_interval_ms=self.group_consumer_heartbeat_interval_ms,
                                 group_consumer_max_size=self.group_consumer_max_size,
                                 group_consumer_migration_policy=self.group_consumer_migration_policy)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides) -> "Settings":
        """Defaults, overridden by ``LAKELOG_<FIELD>`` variables, overridden by non-None ``overrides``; a variable
        whose value is not of its field's type (a boolean is one of 1/0, true/false, yes/no, on/off) is an
        :class:`InvalidSetting`."""
        env = os.environ if environ is None else environ
        values: dict[str, object] = {}
        for f in fields(cls):
            if f.name in ("storage_options",):
                continue
            raw = env.get(ENV_PREFIX + f.name.upper())
            if raw is None or raw == "":
                continue
            values[f.name] = _parse(f.type, raw, f.name)
        values.update({k: v for k, v in overrides.items() if v is not None})
        return replace(cls(), **values)


class InvalidSetting(ValueError):
    """A ``LAKELOG_*`` variable whose value is not of its setting's type; the message names the variable."""


_BOOLS = {"1": True, "true": True, "yes": True, "on": True, "0": False, "false": False, "no": False, "off": False}


def _parse(type_name: object, raw: str, name: str) -> object:
    t = str(type_name)
    try:
        if t.startswith("bool"):
            return _BOOLS[raw.strip().lower()]  # a typo is refused, not read as false
        if t.startswith("int"):
            return int(raw)
        if t.startswith("float"):
            return float(raw)
    except (KeyError, ValueError):
        raise InvalidSetting(f"{ENV_PREFIX}{name.upper()}={raw!r} is not a valid {t}") from None
    return raw
