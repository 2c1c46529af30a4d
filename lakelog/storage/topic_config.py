"""Topic configuration: every topic config Kafka 4.1 defines, with Kafka's types, defaults and validation.

Topic configs are stored as Delta table properties under Kafka's own keys
(``retention.ms``, ``cleanup.policy`` ...).  The keys are Kafka's ``LogConfig``
(``TopicConfig``, plus the two replication-throttle lists), Confluent Server's
schema-validation keys (``confluent.value.schema.validation`` ...), and
lakelog's own ``log.retention.check.interval.ms`` and typed-column keys
(``lakelog.value.schema.columns`` ...); any other key is ``INVALID_CONFIG``.
Values are parsed as Kafka's ``ConfigDef`` parses them (trimmed; ``int`` is
32-bit, ``long`` 64-bit, ``boolean`` is true/false in any case, a ``list`` is
comma-separated), checked by the key's validator and by Kafka's cross-key rules
(:func:`validate_configs`), and stored in canonical form.  Messages are
Kafka's: ``Invalid value soon for configuration retention.ms: Not a number of
type LONG``.

:attr:`ConfigDef.acted_on` says whether lakelog does anything with a key; the
others are accepted, stored and described so that tools written for Kafka work,
and docs/configuration.md says why each does not apply.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping, Sequence

from lakelog.errors import InvalidConfig

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1

CLEANUP_POLICY = "cleanup.policy"
RETENTION_MS = "retention.ms"
RETENTION_BYTES = "retention.bytes"
SEGMENT_BYTES = "segment.bytes"
INTERNAL_SEGMENT_BYTES = "internal.segment.bytes"
SEGMENT_MS = "segment.ms"
MAX_MESSAGE_BYTES = "max.message.bytes"
MESSAGE_TIMESTAMP_TYPE = "message.timestamp.type"
MESSAGE_TIMESTAMP_BEFORE_MAX_MS = "message.timestamp.before.max.ms"
MESSAGE_TIMESTAMP_AFTER_MAX_MS = "message.timestamp.after.max.ms"
MIN_CLEANABLE_DIRTY_RATIO = "min.cleanable.dirty.ratio"
DELETE_RETENTION_MS = "delete.retention.ms"
MIN_COMPACTION_LAG_MS = "min.compaction.lag.ms"
MAX_COMPACTION_LAG_MS = "max.compaction.lag.ms"
FILE_DELETE_DELAY_MS = "file.delete.delay.ms"
RETENTION_CHECK_INTERVAL_MS = "log.retention.check.interval.ms"
COMPRESSION_TYPE = "compression.type"
REMOTE_STORAGE_ENABLE = "remote.storage.enable"
LOCAL_RETENTION_MS = "local.retention.ms"
LOCAL_RETENTION_BYTES = "local.retention.bytes"
REMOTE_LOG_COPY_DISABLE = "remote.log.copy.disable"
REMOTE_LOG_DELETE_ON_DISABLE = "remote.log.delete.on.disable"
# Records against the Schema Registry (docs/schema-registry.md): Confluent Server's broker-side validation keys,
# and lakelog's own keys for typed columns (key_record / value_record beside the bytes; they imply validation).
KEY_SCHEMA_VALIDATION = "confluent.key.schema.validation"
VALUE_SCHEMA_VALIDATION = "confluent.value.schema.validation"
KEY_SUBJECT_NAME_STRATEGY = "confluent.key.subject.name.strategy"
VALUE_SUBJECT_NAME_STRATEGY = "confluent.value.subject.name.strategy"
KEY_SCHEMA_COLUMNS = "lakelog.key.schema.columns"
VALUE_SCHEMA_COLUMNS = "lakelog.value.schema.columns"
_STRATEGY_PACKAGE = "io.confluent.kafka.serializers.subject."
SUBJECT_NAME_STRATEGIES = tuple(_STRATEGY_PACKAGE + s
                                for s in ("TopicNameStrategy", "RecordNameStrategy", "TopicRecordNameStrategy"))

#: ``compression.type`` -> the Parquet codec a segment's pages are written in (None: the root's default,
#: :func:`lakelog.writer.segment_writer.default_codec`). Kafka's ``producer`` keeps each producer's codec; a
#: segment holds many producers' batches, decoded and re-encoded as Parquet, so here it lets the storage choose:
#: zstd on an object store, where a segment's bytes are its PUT's transfer time, its storage and every reader's
#: GETs, and zstd stores records in about half of snappy's bytes; snappy on a local disk, where bytes are cheap
#: and zstd's extra CPU would cost a CPU-bound front its throughput (BENCHMARKS.md, "Append throughput": its run
#: reports the segment codecs; and "Produce on object storage").
SEGMENT_CODECS = {"producer": None, "zstd": "zstd", "lz4": "lz4", "snappy": "snappy", "gzip": "gzip",
                  "uncompressed": "none"}

# Kafka's ConfigDef.Type, as DescribeConfigs (v3+) reports it.
CONFIG_TYPE_CODES = {"boolean": 1, "string": 2, "int": 3, "short": 4, "long": 5, "double": 6, "list": 7,
                     "class": 8, "password": 9}

Check = Callable[[object], "str | None"]  # a parsed value -> Kafka's complaint, or None


@dataclass(frozen=True)
class ConfigDef:
    """One topic config: Kafka's key, type and default, its validator, lakelog's doc of it, the broker config
    Kafka takes its default from (``server_default``, DescribeConfigs' synonym), and whether lakelog acts on it."""

    key: str
    type: str  # Kafka's ConfigDef.Type, lower-case: int, long, double, boolean, string, list
    default: str
    doc: str
    check: Check = lambda v: None
    acted_on: bool = True
    server_default: str | None = None
    internal: bool = False  # Kafka's defineInternal: accepted, described only once set

    @property
    def type_code(self) -> int:
        return CONFIG_TYPE_CODES[self.type]


def _at_least(lo: int) -> Check:
    return lambda v: None if v >= lo else f"Value must be at least {lo}"  # type: ignore[operator]


def _between(lo: int, hi: int) -> Check:
    def check(v):
        if v < lo:
            return f"Value must be at least {lo}"
        return None if v <= hi else f"Value must be no more than {hi}"
    return check


def _in(*choices: str) -> Check:
    return lambda v: None if v in choices else f"String must be one of: {', '.join(choices)}"


def _list_in(*choices: str) -> Check:
    def check(v):
        bad = next((s for s in v if s not in choices), None)  # type: ignore[union-attr]
        return None if bad is None else f"String must be one of: {', '.join(choices)}"
    return check


def _gzip_level(v) -> str | None:
    return None if v == -1 or 1 <= v <= 9 else "Value must be between 1 and 9 or equal to -1"


def _strategy(v: object) -> str | None:
    return None if v in SUBJECT_NAME_STRATEGIES else f"String must be one of: {', '.join(SUBJECT_NAME_STRATEGIES)}"


_REPLICA = re.compile(r"([0-9]+:[0-9]+)?")


def _throttled_replicas(key: str) -> Check:
    def check(v):
        items = [s.strip() for s in v]  # type: ignore[union-attr]
        if all(_REPLICA.fullmatch(s) for s in items) or "".join(items) == "*":
            return None
        return (f"{key} must be the literal '*' or a list of replicas in the following format: "
                "[partitionId]:[brokerId],[partitionId]:[brokerId],...")
    return check


_NOT_ACTED = False
_DEFS = [
    ConfigDef(CLEANUP_POLICY, "list", "delete",
              "'delete' (retention removes old segments), 'compact' (key compaction keeps the latest record per key), "
              "both, or empty (neither).", _list_in("compact", "delete"), server_default="log.cleanup.policy"),
    ConfigDef(COMPRESSION_TYPE, "string", "producer",
              "Parquet codec of new segments; 'producer': zstd on object stores, snappy on a local disk.",
              _in("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"), server_default="compression.type"),
    ConfigDef("compression.gzip.level", "int", "-1", "Kafka's gzip level for broker recompression; segments are "
              "Parquet, written at the codec's default level.", _gzip_level, _NOT_ACTED, "compression.gzip.level"),
    ConfigDef("compression.lz4.level", "int", "9", "Kafka's lz4 level for broker recompression; segments are "
              "Parquet, written at the codec's default level.", _between(1, 17), _NOT_ACTED, "compression.lz4.level"),
    ConfigDef("compression.zstd.level", "int", "3", "Kafka's zstd level for broker recompression; segments are "
              "Parquet, written at the codec's default level.", _between(-131072, 22), _NOT_ACTED,
              "compression.zstd.level"),
    ConfigDef(KEY_SCHEMA_VALIDATION, "boolean", "false", "Refuse records whose key is not in the Schema Registry "
              "wire format with a registered schema of the key subject, or does not match it (INVALID_RECORD)."),
    ConfigDef(KEY_SUBJECT_NAME_STRATEGY, "string", SUBJECT_NAME_STRATEGIES[0], "How a key's subject is named: "
              "TopicNameStrategy (<topic>-key), RecordNameStrategy (the record's full name) or "
              "TopicRecordNameStrategy (<topic>-<full name>).", _strategy),
    ConfigDef(VALUE_SCHEMA_VALIDATION, "boolean", "false", "Refuse records whose value is not in the Schema "
              "Registry wire format with a registered schema of the value subject, or does not match it "
              "(INVALID_RECORD)."),
    ConfigDef(VALUE_SUBJECT_NAME_STRATEGY, "string", SUBJECT_NAME_STRATEGIES[0], "How a value's subject is named: "
              "TopicNameStrategy (<topic>-value), RecordNameStrategy (the record's full name) or "
              "TopicRecordNameStrategy (<topic>-<full name>).", _strategy),
    ConfigDef(DELETE_RETENTION_MS, "long", "86400000",
              "Keep tombstones this long after the cleaning pass that first reached them.", _at_least(0),
              server_default="log.cleaner.delete.retention.ms"),
    ConfigDef(FILE_DELETE_DELAY_MS, "long", "60000",
              "Delay before files removed from the table are physically deleted (vacuum).", _at_least(0),
              server_default="log.segment.delete.delay.ms"),
    ConfigDef("flush.messages", "long", str(LONG_MAX), "Kafka's fsync interval in messages; every lakelog "
              "acknowledgement follows a durable Delta commit.", _at_least(1), _NOT_ACTED,
              "log.flush.interval.messages"),
    ConfigDef("flush.ms", "long", str(LONG_MAX), "Kafka's fsync interval in ms; every lakelog acknowledgement "
              "follows a durable Delta commit.", _at_least(0), _NOT_ACTED, "log.flush.interval.ms"),
    ConfigDef("follower.replication.throttled.replicas", "list", "", "Kafka's replication throttle; lakelog has no "
              "replicas (storage replicates).", _throttled_replicas("follower.replication.throttled.replicas"),
              _NOT_ACTED),
    ConfigDef("index.interval.bytes", "int", "4096", "Kafka's offset-index density; lakelog's index has one entry "
              "per segment and Parquet row-group statistics.", _at_least(0), _NOT_ACTED, "log.index.interval.bytes"),
    ConfigDef("leader.replication.throttled.replicas", "list", "", "Kafka's replication throttle; lakelog has no "
              "replicas (storage replicates).", _throttled_replicas("leader.replication.throttled.replicas"),
              _NOT_ACTED),
    ConfigDef(LOCAL_RETENTION_BYTES, "long", "-2", "Kafka's tiered-storage local size limit; every lakelog "
              "segment is in the root's storage.", _at_least(-2), _NOT_ACTED, "log.local.retention.bytes"),
    ConfigDef(LOCAL_RETENTION_MS, "long", "-2", "Kafka's tiered-storage local time limit; every lakelog "
              "segment is in the root's storage.", _at_least(-2), _NOT_ACTED, "log.local.retention.ms"),
    ConfigDef(KEY_SCHEMA_COLUMNS, "boolean", "false", "Validate keys as confluent.key.schema.validation does and "
              "write them also as the typed column key_record."),
    ConfigDef(VALUE_SCHEMA_COLUMNS, "boolean", "false", "Validate values as confluent.value.schema.validation does "
              "and write them also as the typed column value_record."),
    ConfigDef(RETENTION_CHECK_INTERVAL_MS, "long", "300000",
              "How often the maintenance scheduler checks this topic (lakelog's per-topic override of Kafka's "
              "broker config).", _at_least(1), server_default="log.retention.check.interval.ms"),
    ConfigDef(MAX_COMPACTION_LAG_MS, "long", str(LONG_MAX), "Kafka's deadline for compacting a record; lakelog "
              "compacts when a job runs.", _at_least(1), _NOT_ACTED, "log.cleaner.max.compaction.lag.ms"),
    ConfigDef(MAX_MESSAGE_BYTES, "int", "1048588", "Largest accepted record (key + value + headers), in bytes.",
              _at_least(0), server_default="message.max.bytes"),
    ConfigDef(MESSAGE_TIMESTAMP_AFTER_MAX_MS, "long", "3600000",
              "Reject CreateTime timestamps newer than this after the append time.", _at_least(0),
              server_default="log.message.timestamp.after.max.ms"),
    ConfigDef(MESSAGE_TIMESTAMP_BEFORE_MAX_MS, "long", str(LONG_MAX),
              "Reject CreateTime timestamps older than this before the append time.", _at_least(0),
              server_default="log.message.timestamp.before.max.ms"),
    ConfigDef(MESSAGE_TIMESTAMP_TYPE, "string", "CreateTime",
              "CreateTime keeps the producer's timestamp; LogAppendTime stamps the commit time.",
              _in("CreateTime", "LogAppendTime"), server_default="log.message.timestamp.type"),
    ConfigDef(MIN_CLEANABLE_DIRTY_RATIO, "double", "0.5",
              "Compact a partition when dirty bytes / total bytes exceeds this.", _between(0, 1),
              server_default="log.cleaner.min.cleanable.ratio"),
    ConfigDef(MIN_COMPACTION_LAG_MS, "long", "0", "Records younger than this are never compacted.", _at_least(0),
              server_default="log.cleaner.min.compaction.lag.ms"),
    ConfigDef("min.insync.replicas", "int", "1", "Kafka's in-sync replica minimum for acks=all; lakelog "
              "acknowledges after the durable commit (storage replicates).", _at_least(1), _NOT_ACTED,
              "min.insync.replicas"),
    ConfigDef("preallocate", "boolean", "false", "Kafka's segment file preallocation; segments are written "
              "whole.", acted_on=_NOT_ACTED, server_default="log.preallocate"),
    ConfigDef(REMOTE_LOG_COPY_DISABLE, "boolean", "false", "Kafka's tiered-storage copy switch; every lakelog "
              "segment is in the root's storage.", acted_on=_NOT_ACTED),
    ConfigDef(REMOTE_LOG_DELETE_ON_DISABLE, "boolean", "false", "Kafka's tiered-storage switch; every lakelog "
              "segment is in the root's storage.", acted_on=_NOT_ACTED),
    ConfigDef(REMOTE_STORAGE_ENABLE, "boolean", "false", "Kafka's tiered storage; every lakelog segment is in the "
              "root's storage already.", acted_on=_NOT_ACTED),
    ConfigDef(RETENTION_BYTES, "long", "-1",
              "Per-partition size above which the oldest segments are deleted; -1 = no limit.",
              server_default="log.retention.bytes"),
    ConfigDef(RETENTION_MS, "long", "604800000", "Keep segments this long after their newest record; -1 = forever.",
              _at_least(-1), server_default="log.retention.ms"),
    ConfigDef(SEGMENT_BYTES, "int", "1073741824", "Target size of a merged segment file.", _at_least(1 << 20),
              server_default="log.segment.bytes"),
    ConfigDef("segment.index.bytes", "int", "10485760", "Kafka's offset-index file size; lakelog indexes segments "
              "in an Arrow table per topic.", _at_least(4), _NOT_ACTED, "log.index.size.max.bytes"),
    ConfigDef("segment.jitter.ms", "long", "0", "Kafka's random jitter on segment.ms rolls; merges run in "
              "maintenance jobs.", _at_least(0), _NOT_ACTED, "log.roll.jitter.ms"),
    ConfigDef(SEGMENT_MS, "long", "604800000", "Segments spanning less than this are merged into their neighbours.",
              _at_least(1), server_default="log.roll.ms"),
    ConfigDef("unclean.leader.election.enable", "boolean", "false", "Kafka's out-of-sync leader election; lakelog "
              "has no replicas to elect.", acted_on=_NOT_ACTED, server_default="unclean.leader.election.enable"),
    ConfigDef(INTERNAL_SEGMENT_BYTES, "int", "", "Kafka's testing override of segment.bytes (no lower bound): the "
              "merge target when set.", internal=True),
]
TOPIC_CONFIGS: dict[str, ConfigDef] = {c.key: c for c in _DEFS}
#: Kafka 4.1's broker configs (topic defaults) whose own default is null, their value derived from another key
#: (log.retention.hours, log.roll.hours, the flush scheduler): DescribeConfigs shows no value and no synonym for them.
NULL_SERVER_DEFAULTS = frozenset({"log.flush.interval.ms", "log.retention.ms", "log.roll.jitter.ms", "log.roll.ms"})
PUBLIC_TOPIC_CONFIGS: dict[str, ConfigDef] = {k: c for k, c in TOPIC_CONFIGS.items() if not c.internal}

_INTEGER = re.compile(r"[+-]?[0-9]+")
_DOUBLE = re.compile(r"[+-]?(NaN|Infinity|([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?)[fFdD]?")


def _invalid(key: str, raw: object, why: str) -> InvalidConfig:
    return InvalidConfig(f"Invalid value {raw} for configuration {key}: {why}")


def parse_value(cdef: ConfigDef, raw: object) -> object:
    """``raw`` (a string) parsed as Kafka's ``ConfigDef.parseType`` does; ``INVALID_CONFIG`` if it does not parse."""
    if not isinstance(raw, str):
        if isinstance(raw, bool) or raw is None:
            raw = "" if raw is None else str(raw).lower()
        else:
            raw = str(raw)
    text = raw.strip()
    t = cdef.type
    if t == "boolean":
        if text.lower() in ("true", "false"):
            return text.lower() == "true"
        raise _invalid(cdef.key, raw, "Expected value to be either true or false")
    if t in ("int", "long", "short"):
        limit = {"int": INT_MAX, "long": LONG_MAX, "short": 2**15 - 1}[t]
        if not _INTEGER.fullmatch(text) or not -limit - 1 <= int(text) <= limit:
            raise _invalid(cdef.key, raw, f"Not a number of type {t.upper()}")
        return int(text)
    if t == "double":
        if not _DOUBLE.fullmatch(text) or math.isnan(value := float(text.rstrip("fFdD"))):
            raise _invalid(cdef.key, raw, "Not a number of type DOUBLE")
        return value
    if t == "list":
        return [] if not text else [s.strip() for s in text.split(",")]
    if cdef.key in (KEY_SUBJECT_NAME_STRATEGY, VALUE_SUBJECT_NAME_STRATEGY):  # a short name stands for Confluent's
        return _STRATEGY_PACKAGE + text.rsplit(".", 1)[-1]
    return text


def canonical(cdef: ConfigDef, value: object) -> str:
    """The stored (and described) string of a parsed value."""
    if cdef.type == "list":
        return ",".join(value)  # type: ignore[arg-type]
    if cdef.type == "double":
        return repr(float(value))  # type: ignore[arg-type]
    if cdef.type == "boolean":
        return "true" if value else "false"
    return str(value)


def check_value(key: str, raw: object) -> str:
    """The canonical form of one config's value; ``INVALID_CONFIG`` for an unknown key or a bad value."""
    cdef = TOPIC_CONFIGS.get(key)
    if cdef is None:
        raise InvalidConfig(f"Unknown topic config name: {key}")
    value = parse_value(cdef, raw)
    complaint = cdef.check(value)
    if complaint:
        raise _invalid(key, raw, complaint)
    return canonical(cdef, value)


def validate_configs(configs: Mapping[str, object], existing: Mapping[str, str] | None = None) -> dict[str, str]:
    """Validate configs set on a topic whose stored overrides are ``existing``; returns their canonical strings.

    Raises :class:`InvalidConfig` naming the first unknown key or bad value, or the first of Kafka's cross-key
    rules the resulting topic would break (``LogConfig.validate``: compaction lags, and the tiered-storage
    rules, checked as on a cluster with tiered storage enabled). A value of None removes the key.
    """
    out: dict[str, str] = {}
    for key, raw in configs.items():
        if raw is None:
            if key not in TOPIC_CONFIGS:
                raise InvalidConfig(f"Unknown topic config name: {key}")
            continue
        out[key] = check_value(key, raw)
    merged = {k: v for k, v in {**(existing or {}), **out}.items() if k in TOPIC_CONFIGS}
    for key, raw in configs.items():
        if raw is None:
            merged.pop(key, None)
    _cross_check(TopicConfig(merged), TopicConfig(existing or {}))
    return out


def _cross_check(new: "TopicConfig", old: "TopicConfig") -> None:
    """Kafka's ``LogConfig.validateValues`` and ``validateTopicLogConfigValues`` on the effective configs."""
    if new[MIN_COMPACTION_LAG_MS] > new[MAX_COMPACTION_LAG_MS]:  # type: ignore[operator]
        raise InvalidConfig(f"conflict topic config setting {MIN_COMPACTION_LAG_MS} ({new[MIN_COMPACTION_LAG_MS]}) > "
                            f"{MAX_COMPACTION_LAG_MS} ({new[MAX_COMPACTION_LAG_MS]})")
    if new[REMOTE_STORAGE_ENABLE]:
        if set(new.cleanup_policy) != {"delete"}:
            raise InvalidConfig("Remote log storage only supports topics with cleanup.policy=delete")
        for local, total in ((LOCAL_RETENTION_BYTES, RETENTION_BYTES), (LOCAL_RETENTION_MS, RETENTION_MS)):
            lv, tv = new[local], new[total]
            limited = tv > -1 if total == RETENTION_BYTES else tv != -1  # type: ignore[operator]
            if limited and lv != -2:
                if lv == -1:
                    raise _invalid(local, lv, f"Value must not be -1 as {total} value is set as {tv}.")
                if lv > tv:  # type: ignore[operator]
                    raise _invalid(local, lv, f"Value must not be more than {total} property value: {tv}")
        if new[REMOTE_LOG_COPY_DISABLE]:
            for local, total in ((LOCAL_RETENTION_BYTES, RETENTION_BYTES), (LOCAL_RETENTION_MS, RETENTION_MS)):
                if new[local] != -2 and new[local] != new[total]:
                    raise InvalidConfig(f"When `remote.log.copy.disable` is set to true, the `{local}` and `{total}` "
                                        "must be set to the identical value because there will be no more logs "
                                        "copied to the remote storage.")
    elif old[REMOTE_STORAGE_ENABLE] and not new[REMOTE_LOG_DELETE_ON_DISABLE]:
        raise InvalidConfig("It is invalid to disable remote storage without deleting remote data. If you want to "
                            "keep the remote data and turn to read only, please set "
                            "`remote.storage.enable=true,remote.log.copy.disable=true`. If you want to disable remote "
                            "storage and delete all remote data, please set "
                            "`remote.storage.enable=false,remote.log.delete.on.disable=true`.")


# IncrementalAlterConfigs' operations (Kafka's AlterConfigOp.OpType ids).
OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3


@dataclass(frozen=True)
class ConfigOp:
    """One IncrementalAlterConfigs operation on a topic config."""

    op: int
    key: str
    value: str | None = None


def apply_ops(overrides: Mapping[str, str], ops: Sequence[ConfigOp]) -> dict[str, str | None]:
    """The changes ``ops`` make to a topic whose stored overrides are ``overrides``: key -> new raw value, None for
    a key that goes back to its default. APPEND and SUBTRACT work on list keys only and start from the effective
    value (the default when not set), as Kafka's controller does. Pure."""
    current: dict[str, str | None] = dict(overrides)
    for o in ops:
        if o.op == OP_SET:
            current[o.key] = o.value
        elif o.op == OP_DELETE:  # of a key that is no topic config: nothing to remove, as in Kafka
            if o.key in TOPIC_CONFIGS:
                current[o.key] = None
        elif o.op in (OP_APPEND, OP_SUBTRACT):
            cdef = TOPIC_CONFIGS.get(o.key)
            if cdef is None or cdef.type != "list":
                name = "APPEND" if o.op == OP_APPEND else "SUBTRACT"
                raise InvalidConfig(f"Can't {name} to key {o.key} because its type is not LIST.")
            current[o.key] = list_op(o, current.get(o.key), cdef.default)
        else:
            raise InvalidConfig(f"Unknown config operation {o.op}")
    return {k: v for k, v in current.items() if overrides.get(k) != v or k not in overrides}


def list_op(o: ConfigOp, value: str | None, default: str) -> str:
    """A list config's value after APPEND (items not there yet, at the end) or SUBTRACT (each item's first
    occurrence removed) of ``o.value``'s items, starting from ``value``, or ``default`` when it is not set, as
    Kafka's controller does. Pure."""
    parts = [p for p in (default if value is None else value).split(",") if p]
    for item in (o.value or "").split(","):
        if o.op == OP_APPEND and item not in parts:
            parts.append(item)
        elif o.op == OP_SUBTRACT and item in parts:
            parts.remove(item)
    return ",".join(parts)


def replacement_ops(configs: Mapping[str, str | None]) -> list[ConfigOp]:
    """Kafka's (legacy) AlterConfigs as operations: ``configs`` set, every other topic config deleted (back to
    its default), so ``configs`` become the topic's whole set of overrides. Pure."""
    return [*(ConfigOp(OP_DELETE, k) for k in TOPIC_CONFIGS if k not in configs),
            *(ConfigOp(OP_SET, k, v) for k, v in configs.items())]


class TopicConfig:
    """Typed read access to a topic's effective configs (stored values over defaults)."""

    def __init__(self, stored: Mapping[str, str] | None = None) -> None:
        self._stored = {k: v for k, v in (stored or {}).items() if k in TOPIC_CONFIGS}

    def raw(self) -> dict[str, str]:
        """Every public config key with its effective value, as strings (an internal key only once set)."""
        out = {k: self._stored.get(k, c.default) for k, c in PUBLIC_TOPIC_CONFIGS.items()}
        out.update({k: v for k, v in self._stored.items() if TOPIC_CONFIGS[k].internal})
        return out

    def overrides(self) -> dict[str, str]:
        """Only the keys set explicitly on the topic."""
        return dict(self._stored)

    def get(self, key: str) -> object:
        cdef = TOPIC_CONFIGS[key]
        return parse_value(cdef, self._stored.get(key, cdef.default))

    def __getitem__(self, key: str) -> object:
        return self.get(key)

    @property
    def cleanup_policy(self) -> list[str]:
        return self.get(CLEANUP_POLICY)  # type: ignore[return-value]

    @property
    def compacted(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def segment_bytes(self) -> int:
        """The merge target: ``internal.segment.bytes`` when set (Kafka's testing override), else segment.bytes."""
        internal = self._stored.get(INTERNAL_SEGMENT_BYTES)
        return int(internal) if internal else int(self.get(SEGMENT_BYTES))  # type: ignore[call-overload]

    @property
    def segment_codec(self) -> str | None:
        """The Parquet codec new segments are written in (pyarrow's name; None: the root's default)."""
        return SEGMENT_CODECS[self.get(COMPRESSION_TYPE)]  # type: ignore[index]

    def schema_validation(self, side: str) -> bool:
        """Whether ``side`` ("key" or "value") must hold a registered schema's record (typed columns imply it)."""
        keys = (KEY_SCHEMA_VALIDATION, KEY_SCHEMA_COLUMNS) if side == "key" else \
            (VALUE_SCHEMA_VALIDATION, VALUE_SCHEMA_COLUMNS)
        return any(self.get(k) is True for k in keys)

    def schema_columns(self, side: str) -> bool:
        """Whether ``side`` is written also as its typed column."""
        return self.get(KEY_SCHEMA_COLUMNS if side == "key" else VALUE_SCHEMA_COLUMNS) is True

    def subject_name_strategy(self, side: str) -> str:
        """``TopicNameStrategy``, ``RecordNameStrategy`` or ``TopicRecordNameStrategy``."""
        key = KEY_SUBJECT_NAME_STRATEGY if side == "key" else VALUE_SUBJECT_NAME_STRATEGY
        return str(self.get(key)).rsplit(".", 1)[-1]

    @property
    def log_append_time(self) -> bool:
        return self.get(MESSAGE_TIMESTAMP_TYPE) == "LogAppendTime"


def keys_named(names: Iterable[str] | None) -> list[str]:
    """The described keys: ``names`` that are topic configs (all public ones for None), sorted."""
    if names is None:
        return sorted(PUBLIC_TOPIC_CONFIGS)
    return sorted(n for n in set(names) if n in TOPIC_CONFIGS)
