"""Topic configuration: Kafka's keys, types, defaults and validation.

Topic configs are stored as Delta table properties under Kafka's own keys
(``retention.ms``, ``cleanup.policy`` ...).  Only keys listed in
:data:`TOPIC_CONFIGS` are accepted; values are validated and normalised to
their canonical string form before they are written.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

from lakelog.errors import InvalidConfig

LONG_MAX = 2**63 - 1

CLEANUP_POLICY = "cleanup.policy"
RETENTION_MS = "retention.ms"
RETENTION_BYTES = "retention.bytes"
SEGMENT_BYTES = "segment.bytes"
SEGMENT_MS = "segment.ms"
MAX_MESSAGE_BYTES = "max.message.bytes"
MESSAGE_TIMESTAMP_TYPE = "message.timestamp.type"
MESSAGE_TIMESTAMP_BEFORE_MAX_MS = "message.timestamp.before.max.ms"
MESSAGE_TIMESTAMP_AFTER_MAX_MS = "message.timestamp.after.max.ms"
MIN_CLEANABLE_DIRTY_RATIO = "min.cleanable.dirty.ratio"
DELETE_RETENTION_MS = "delete.retention.ms"
MIN_COMPACTION_LAG_MS = "min.compaction.lag.ms"
FILE_DELETE_DELAY_MS = "file.delete.delay.ms"
RETENTION_CHECK_INTERVAL_MS = "log.retention.check.interval.ms"
COMPRESSION_TYPE = "compression.type"

#: ``compression.type`` -> the Parquet codec a segment's pages are written in (None: the root's default,
#: :func:`lakelog.writer.segment_writer.default_codec`). Kafka's ``producer`` keeps each producer's codec; a
#: segment holds many producers' batches, decoded and re-encoded as Parquet, so here it lets the storage choose:
#: zstd on an object store, where a segment's bytes are its PUT's transfer time, its storage and every reader's
#: GETs, and zstd stores records in about half of snappy's bytes; snappy on a local disk, where bytes are cheap
#: and zstd's extra CPU would cost a CPU-bound front its throughput (BENCHMARKS.md, the append section's codec
#: table and "Produce on object storage").
SEGMENT_CODECS = {"producer": None, "zstd": "zstd", "lz4": "lz4", "snappy": "snappy", "gzip": "gzip",
                  "uncompressed": "none"}


@dataclass(frozen=True)
class ConfigDef:
    """One topic config: its Kafka key, type, default, validator and doc."""

    key: str
    type: str  # "long" | "double" | "string" | "list"
    default: str
    doc: str
    check: Callable[[object], str | None] = lambda v: None  # returns a complaint or None


def _at_least(lo: float) -> Callable[[object], str | None]:
    return lambda v: None if v >= lo else f"must be >= {lo:g}"


def _between(lo: float, hi: float) -> Callable[[object], str | None]:
    return lambda v: None if lo <= v <= hi else f"must be between {lo:g} and {hi:g}"


def _one_of(*choices: str) -> Callable[[object], str | None]:
    return lambda v: None if v in choices else f"must be one of {', '.join(choices)}"


def _policies(v: object) -> str | None:
    bad = [p for p in v if p not in ("delete", "compact")]  # type: ignore[union-attr]
    if bad or not v:
        return "must be a non-empty list of 'delete' and/or 'compact'"
    return None


TOPIC_CONFIGS: dict[str, ConfigDef] = {
    c.key: c
    for c in [
        ConfigDef(CLEANUP_POLICY, "list", "delete", "'delete', 'compact' or 'compact,delete'.", _policies),
        ConfigDef(RETENTION_MS, "long", "604800000", "Keep segments this long after their newest record; -1 = forever.", _at_least(-1)),
        ConfigDef(RETENTION_BYTES, "long", "-1", "Per-partition size above which the oldest segments are deleted; -1 = no limit.", _at_least(-1)),
        ConfigDef(SEGMENT_BYTES, "long", "1073741824", "Target size of a merged segment file.", _at_least(14)),
        ConfigDef(SEGMENT_MS, "long", "604800000", "Segments spanning less than this are merged into their neighbours.", _at_least(1)),
        ConfigDef(MAX_MESSAGE_BYTES, "long", "1048588", "Largest accepted record (key + value + headers), in bytes.", _at_least(0)),
        ConfigDef(MESSAGE_TIMESTAMP_TYPE, "string", "CreateTime", "CreateTime keeps the producer's timestamp; LogAppendTime stamps the commit time.", _one_of("CreateTime", "LogAppendTime")),
        ConfigDef(MESSAGE_TIMESTAMP_BEFORE_MAX_MS, "long", str(LONG_MAX), "Reject CreateTime timestamps older than this before the append time.", _at_least(0)),
        ConfigDef(MESSAGE_TIMESTAMP_AFTER_MAX_MS, "long", str(LONG_MAX), "Reject CreateTime timestamps newer than this after the append time.", _at_least(0)),
        ConfigDef(MIN_CLEANABLE_DIRTY_RATIO, "double", "0.5", "Compact a partition when dirty bytes / total bytes exceeds this.", _between(0, 1)),
        ConfigDef(DELETE_RETENTION_MS, "long", "86400000", "Keep tombstones this long after the cleaning pass that first reached them.", _at_least(0)),
        ConfigDef(MIN_COMPACTION_LAG_MS, "long", "0", "Records younger than this are never compacted.", _at_least(0)),
        ConfigDef(FILE_DELETE_DELAY_MS, "long", "60000", "Delay before files removed from the table are physically deleted (vacuum).", _at_least(0)),
        ConfigDef(COMPRESSION_TYPE, "string", "producer", "Parquet codec of new segments; 'producer': zstd on object stores, snappy on a local disk.", _one_of(*SEGMENT_CODECS)),
        ConfigDef(RETENTION_CHECK_INTERVAL_MS, "long", "300000", "How often the maintenance scheduler checks this topic (per-topic override of the broker default).", _at_least(1)),
    ]
}


def _parse(cdef: ConfigDef, raw: object) -> object:
    text = str(raw).strip() if not isinstance(raw, bool) else None
    if text is None:
        raise InvalidConfig(f"Invalid value {raw!r} for configuration {cdef.key}: expected {cdef.type}")
    try:
        if cdef.type == "long":
            value: object = int(text)
            if not -(2**63) <= value <= LONG_MAX:  # type: ignore[operator]
                raise ValueError
            return value
        if cdef.type == "double":
            value = float(text)
            if value != value:  # NaN
                raise ValueError
            return value
        if cdef.type == "list":
            return [p.strip() for p in text.split(",") if p.strip()]
        return text
    except ValueError:
        raise InvalidConfig(f"Invalid value {raw!r} for configuration {cdef.key}: expected {cdef.type}") from None


def _canonical(cdef: ConfigDef, value: object) -> str:
    if cdef.type == "list":
        return ",".join(value)  # type: ignore[arg-type]
    if cdef.type == "double":
        return repr(float(value))  # type: ignore[arg-type]
    return str(value)


def validate_configs(configs: Mapping[str, object]) -> dict[str, str]:
    """Validate user configs; returns their canonical string form.

    Raises :class:`InvalidConfig` naming the first unknown key or bad value.
    """
    out: dict[str, str] = {}
    for key, raw in configs.items():
        cdef = TOPIC_CONFIGS.get(key)
        if cdef is None:
            raise InvalidConfig(f"Unknown topic configuration {key!r}; valid keys: {', '.join(sorted(TOPIC_CONFIGS))}")
        value = _parse(cdef, raw)
        complaint = cdef.check(value)
        if complaint:
            raise InvalidConfig(f"Invalid value {raw!r} for configuration {key}: {complaint}")
        out[key] = _canonical(cdef, value)
    return out


class TopicConfig:
    """Typed read access to a topic's effective configs (stored values over defaults)."""

    def __init__(self, stored: Mapping[str, str] | None = None) -> None:
        self._stored = {k: v for k, v in (stored or {}).items() if k in TOPIC_CONFIGS}

    def raw(self) -> dict[str, str]:
        """Every config key with its effective value, as strings."""
        return {k: self._stored.get(k, c.default) for k, c in TOPIC_CONFIGS.items()}

    def overrides(self) -> dict[str, str]:
        """Only the keys set explicitly on the topic."""
        return dict(self._stored)

    def get(self, key: str) -> object:
        cdef = TOPIC_CONFIGS[key]
        return _parse(cdef, self._stored.get(key, cdef.default))

    def __getitem__(self, key: str) -> object:
        return self.get(key)

    @property
    def cleanup_policy(self) -> list[str]:
        return self.get(CLEANUP_POLICY)  # type: ignore[return-value]

    @property
    def compacted(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def segment_codec(self) -> str | None:
        """The Parquet codec new segments are written in (pyarrow's name; None: the root's default)."""
        return SEGMENT_CODECS[self.get(COMPRESSION_TYPE)]  # type: ignore[index]

    @property
    def log_append_time(self) -> bool:
        return self.get(MESSAGE_TIMESTAMP_TYPE) == "LogAppendTime"
