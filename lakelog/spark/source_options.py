"""The Spark source's options: Kafka source names, precedence, defaults and messages.

Parsing is pure (no Spark, no I/O) so every rule is table-testable.  Keys arrive
lower-cased from Spark; messages name options the way users spell them
(``startingOffsets``).  :func:`parse_options` checks what both batch and
streaming queries share; :func:`check_batch` / :func:`check_streaming` add the
mode rules (a streaming-only option in a batch query and vice versa fail,
where the Kafka source only warns: silently ignoring a rate limit hides bugs).

Offset specs follow the Kafka source: for each side the preference is
``*Timestamp`` (one timestamp for every partition) > ``*OffsetsByTimestamp``
(JSON per partition) > ``*Offsets`` (``earliest``, ``latest`` or JSON with -2 =
earliest and -1 = latest).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Literal, Mapping

from lakelog.errors import InvalidConfig

EARLIEST = -2
LATEST = -1

# canonical spelling of every option, by its lower-cased key
_NAMES = [
    "path", "subscribe", "subscribePattern", "assign",
    "startingOffsets", "endingOffsets", "startingTimestamp", "endingTimestamp",
    "startingOffsetsByTimestamp", "endingOffsetsByTimestamp", "startingOffsetsByTimestampStrategy",
    "failOnDataLoss", "maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay",
    "minPartitions", "includeHeaders", "groupId",
]
OPTION_NAMES: dict[str, str] = {n.lower(): n for n in _NAMES}
STORAGE_PREFIX = "storage."
# Kafka source options with no meaning here: accepted (so pipelines switch by format name) and ignored.
IGNORED_KAFKA_OPTIONS = frozenset(k.lower() for k in (
    "groupIdPrefix", "kafkaConsumer.pollTimeoutMs", "fetchOffset.numRetries", "fetchOffset.retryIntervalMs",
    "maxOffsetsPerTriggerCompat", "startingOffsetsByTimestampStrategy.compat"))
STRATEGY_KEYS = ("subscribe", "subscribepattern", "assign")
STREAMING_ONLY = ("maxoffsetspertrigger", "minoffsetspertrigger", "maxtriggerdelay", "groupid")
BATCH_ONLY = ("endingoffsets", "endingtimestamp", "endingoffsetsbytimestamp")
DEFAULT_MAX_TRIGGER_DELAY_MS = 15 * 60 * 1000


class InvalidSourceOption(InvalidConfig):
    """A lakelog source option is missing, malformed or not allowed here; ``option`` names it."""

    def __init__(self, option: str, message: str) -> None:
        super().__init__(message)
        self.option = option


def display(key: str) -> str:
    """The user-facing spelling of a lower-cased option key."""
    return OPTION_NAMES.get(key, key)


# -- offset specs -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Earliest:
    """Every partition from its log start offset."""


@dataclass(frozen=True)
class Latest:
    """Every partition from its high watermark."""


@dataclass(frozen=True)
class SpecificOffsets:
    """Per (topic, partition): an offset, or -2 (earliest) / -1 (latest)."""

    offsets: tuple[tuple[str, int, int], ...]

    def as_dict(self) -> dict[tuple[str, int], int]:
        return {(t, p): o for t, p, o in self.offsets}


@dataclass(frozen=True)
class GlobalTimestamp:
    """Every partition from its first offset with timestamp >= ``timestamp_ms``."""

    timestamp_ms: int


@dataclass(frozen=True)
class SpecificTimestamps:
    """Per (topic, partition): the first offset with timestamp >= the given epoch ms."""

    timestamps: tuple[tuple[str, int, int], ...]

    def as_dict(self) -> dict[tuple[str, int], int]:
        return {(t, p): ts for t, p, ts in self.timestamps}


OffsetSpec = Earliest | Latest | SpecificOffsets | GlobalTimestamp | SpecificTimestamps


@dataclass(frozen=True)
class Subscription:
    """Which topics (and partitions) a query reads: exactly one of the three Kafka strategies."""

    kind: Literal["subscribe", "subscribePattern", "assign"]
    topics: tuple[str, ...] = ()
    pattern: str = ""
    assignment: tuple[tuple[str, tuple[int, ...]], ...] = ()

    def matches(self, topic: str) -> bool:
        if self.kind == "subscribePattern":
            return re.fullmatch(self.pattern, topic) is not None
        if self.kind == "assign":
            return any(t == topic for t, _ in self.assignment)
        return topic in self.topics


@dataclass(frozen=True)
class SourceOptions:
    """Validated options of one ``format("lakelog")`` read; picklable and immutable."""

    root: str | None
    storage_options: tuple[tuple[str, str], ...]
    subscription: Subscription
    starting: OffsetSpec
    ending: OffsetSpec
    strategy: Literal["error", "latest"] = "error"
    fail_on_data_loss: bool = True
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = DEFAULT_MAX_TRIGGER_DELAY_MS
    min_partitions: int | None = None
    include_headers: bool = False
    group_id: str | None = None
    given: frozenset[str] = field(default=frozenset())  # lower-cased keys the user set


# -- parsing --------------------------------------------------------------------------------------
def _json(key: str, text: str, example: str):
    try:
        return json.loads(text)
    except ValueError:
        raise InvalidSourceOption(key, f"Invalid value for option '{display(key)}': expected e.g. {example}, "
                                       f"got {text}") from None


def _int_value(key: str, value: object, text: str, example: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidSourceOption(key, f"Invalid value for option '{display(key)}': expected e.g. {example}, "
                                       f"got {text}")
    return value


def _partition_map(key: str, text: str, example: str) -> tuple[tuple[str, int, int], ...]:
    """``{"topicA":{"0":23,"1":-1}}`` as sorted (topic, partition, value) triples."""
    obj = _json(key, text, example)
    if not isinstance(obj, dict) or not obj:
        raise InvalidSourceOption(key, f"Invalid value for option '{display(key)}': expected e.g. {example}, "
                                       f"got {text}")
    out = []
    for topic, parts in obj.items():
        if not isinstance(parts, dict):
            raise InvalidSourceOption(key, f"Invalid value for option '{display(key)}': expected e.g. {example}, "
                                           f"got {text}")
        for p, v in parts.items():
            try:
                partition = int(p)
            except ValueError:
                raise InvalidSourceOption(
                    key, f"Invalid value for option '{display(key)}': partition {p!r} of topic {topic!r} "
                         f"is not an integer") from None
            if partition < 0:
                raise InvalidSourceOption(key, f"Invalid value for option '{display(key)}': partition {partition} "
                                               f"of topic {topic!r} is negative")
            out.append((topic, partition, _int_value(key, v, text, example)))
    return tuple(sorted(out))


OFFSETS_EXAMPLE = '{"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}'
TIMESTAMPS_EXAMPLE = '{"topicA":{"0":1700000000000,"1":1700000000000}}'
ASSIGN_EXAMPLE = '{"topicA":[0,1],"topicB":[2,4]}'


def _parse_subscription(opts: Mapping[str, str]) -> Subscription:
    given = [k for k in STRATEGY_KEYS if k in opts]
    names = ", ".join(display(k) for k in STRATEGY_KEYS)
    if not given:
        raise InvalidSourceOption("subscribe", f"One of the following options must be specified for the lakelog "
                                               f"source: {names}. See docs/spark.md for details.")
    if len(given) > 1:
        raise InvalidSourceOption(given[1], f"Only one of the following options can be specified for the lakelog "
                                            f"source: {names} (got {', '.join(display(k) for k in given)}).")
    key = given[0]
    value = opts[key]
    if key == "subscribe":
        topics = tuple(dict.fromkeys(t.strip() for t in value.split(",") if t.strip()))
        if not topics:
            raise InvalidSourceOption(key, f"No topics to subscribe to as specified value for option "
                                           f"'subscribe' is '{value}'")
        return Subscription("subscribe", topics=topics)
    if key == "subscribepattern":
        pattern = value.strip()
        if not pattern:
            raise InvalidSourceOption(key, f"Pattern to subscribe is empty as specified value for option "
                                           f"'subscribePattern' is '{value}'")
        try:
            re.compile(pattern)
        except re.error as e:
            raise InvalidSourceOption(key, f"Invalid value for option 'subscribePattern': {pattern!r} is not a "
                                           f"regular expression ({e})") from None
        return Subscription("subscribePattern", pattern=pattern)
    if not value.strip().startswith("{"):
        raise InvalidSourceOption(key, f"No topicpartitions to assign as specified value for option "
                                       f"'assign' is '{value}'")
    obj = _json(key, value, ASSIGN_EXAMPLE)
    if not isinstance(obj, dict) or not obj:
        raise InvalidSourceOption(key, f"Invalid value for option 'assign': expected e.g. {ASSIGN_EXAMPLE}, "
                                       f"got {value}")
    assignment = []
    for topic, parts in obj.items():
        if (not isinstance(parts, list) or not parts
                or any(isinstance(p, bool) or not isinstance(p, int) or p < 0 for p in parts)):
            raise InvalidSourceOption(key, f"Invalid value for option 'assign': expected e.g. {ASSIGN_EXAMPLE}, "
                                           f"got {value}")
        assignment.append((topic, tuple(sorted(set(parts)))))
    return Subscription("assign", assignment=tuple(sorted(assignment)))


def _parse_offset_spec(opts: Mapping[str, str], side: Literal["starting", "ending"]) -> OffsetSpec | None:
    ts_key, by_ts_key, off_key = f"{side}timestamp", f"{side}offsetsbytimestamp", f"{side}offsets"
    if ts_key in opts:
        text = opts[ts_key].strip()
        try:
            ts = int(text)
        except ValueError:
            raise InvalidSourceOption(ts_key, f"Invalid value for option '{display(ts_key)}': expected a single "
                                              f"long value (epoch milliseconds), got {text}") from None
        if ts < 0:
            raise InvalidSourceOption(ts_key, f"Invalid value for option '{display(ts_key)}': a timestamp must be "
                                              f">= 0, got {ts}")
        return GlobalTimestamp(ts)
    if by_ts_key in opts:
        triples = _partition_map(by_ts_key, opts[by_ts_key].strip(), TIMESTAMPS_EXAMPLE)
        for t, p, ts in triples:
            if ts < 0:
                raise InvalidSourceOption(by_ts_key, f"Invalid value for option '{display(by_ts_key)}': timestamp "
                                                     f"{ts} for {t}-{p} is negative")
        return SpecificTimestamps(triples)
    if off_key in opts:
        text = opts[off_key].strip()
        if text.lower() == "earliest":
            return Earliest()
        if text.lower() == "latest":
            return Latest()
        triples = _partition_map(off_key, text, OFFSETS_EXAMPLE)
        for t, p, o in triples:
            if o < EARLIEST:
                raise InvalidSourceOption(off_key, f"Invalid value for option '{display(off_key)}': offset {o} for "
                                                   f"{t}-{p} is not an offset, -1 (latest) or -2 (earliest)")
        return SpecificOffsets(triples)
    return None


def _bool(opts: Mapping[str, str], key: str, default: bool) -> bool:
    if key not in opts:
        return default
    v = opts[key].strip().lower()
    if v not in ("true", "false"):
        raise InvalidSourceOption(key, f"Invalid value for option '{display(key)}': expected true or false, "
                                       f"got {opts[key]}")
    return v == "true"


def _positive_int(opts: Mapping[str, str], key: str) -> int | None:
    if key not in opts:
        return None
    try:
        n = int(opts[key].strip())
    except ValueError:
        raise InvalidSourceOption(key, f"Invalid value for option '{display(key)}': expected a positive integer, "
                                       f"got {opts[key]}") from None
    if n <= 0:
        raise InvalidSourceOption(key, f"{display(key)} must be positive, got {n}")
    return n


_DURATION = re.compile(r"^\s*(\d+)\s*(ms|s|m|min|h|d)?\s*$", re.IGNORECASE)
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000, None: 1}


def parse_duration_ms(key: str, text: str) -> int:
    """``15m``, ``30s``, ``500ms`` or plain milliseconds, as milliseconds (Spark's time strings)."""
    m = _DURATION.match(text)
    if not m:
        raise InvalidSourceOption(key, f"Invalid value for option '{display(key)}': expected a duration such as "
                                       f"15m, 30s or 500ms, got {text}")
    unit = m.group(2).lower() if m.group(2) else None
    return int(m.group(1)) * _UNIT_MS[unit]


def parse_options(options: Mapping[str, str]) -> SourceOptions:
    """Validate the options common to batch and streaming queries (raises :class:`InvalidSourceOption`)."""
    opts = {str(k).lower(): str(v) for k, v in options.items()}
    storage = tuple(sorted((k[len(STORAGE_PREFIX):], v) for k, v in opts.items() if k.startswith(STORAGE_PREFIX)))
    for k in opts:
        if k in OPTION_NAMES or k.startswith(STORAGE_PREFIX) or k.startswith("kafka.") or k in IGNORED_KAFKA_OPTIONS:
            continue
        raise InvalidSourceOption(k, f"Unknown option '{k}' for the lakelog source; known options: "
                                     f"{', '.join(_NAMES)}, storage.<key>")
    if "kafka.auto.offset.reset" in opts:
        raise InvalidSourceOption("kafka.auto.offset.reset", "Kafka option 'auto.offset.reset' is not supported. "
                                  "Instead set the source option 'startingOffsets' to 'earliest' or 'latest'.")
    isolation = opts.get("kafka.isolation.level")
    if isolation is not None and isolation.strip().lower() not in ("read_committed", "read_uncommitted"):
        # both levels read the same rows: a topic table never holds uncommitted or aborted transactional data
        raise InvalidSourceOption("kafka.isolation.level", f"Invalid value for option 'kafka.isolation.level': "
                                                           f"expected read_committed or read_uncommitted, got "
                                                           f"{isolation}")
    subscription = _parse_subscription(opts)
    strategy = opts.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise InvalidSourceOption("startingoffsetsbytimestampstrategy",
                                  f"Invalid value for option 'startingOffsetsByTimestampStrategy': expected error or "
                                  f"latest, got {opts['startingoffsetsbytimestampstrategy']}")
    starting = _parse_offset_spec(opts, "starting")
    ending = _parse_offset_spec(opts, "ending")
    if isinstance(starting, SpecificOffsets) and isinstance(ending, SpecificOffsets):
        ends = ending.as_dict()
        for (t, p), s in starting.as_dict().items():
            e = ends.get((t, p))
            if e is not None and s >= 0 and e >= 0 and e < s:
                raise InvalidSourceOption("endingoffsets", f"endingOffsets for {t}-{p} ({e}) is before "
                                                           f"startingOffsets ({s})")
    if isinstance(starting, GlobalTimestamp) and isinstance(ending, GlobalTimestamp) \
            and ending.timestamp_ms < starting.timestamp_ms:
        raise InvalidSourceOption("endingtimestamp", f"endingTimestamp ({ending.timestamp_ms}) is before "
                                                     f"startingTimestamp ({starting.timestamp_ms})")
    group_id = opts.get("groupid")
    if group_id is not None and not group_id.strip():
        raise InvalidSourceOption("groupid", "Invalid value for option 'groupId': the group id must not be empty")
    max_delay = DEFAULT_MAX_TRIGGER_DELAY_MS
    if "maxtriggerdelay" in opts:
        max_delay = parse_duration_ms("maxtriggerdelay", opts["maxtriggerdelay"])
    max_per = _positive_int(opts, "maxoffsetspertrigger")
    min_per = _positive_int(opts, "minoffsetspertrigger")
    if max_per is not None and min_per is not None and min_per > max_per:
        raise InvalidSourceOption("minoffsetspertrigger", f"minOffsetsPerTrigger ({min_per}) is greater than "
                                                          f"maxOffsetsPerTrigger ({max_per})")
    return SourceOptions(
        root=opts.get("path") or None,
        storage_options=storage,
        subscription=subscription,
        starting=starting or Earliest(),  # batch default; streaming defaults to Latest (see check_streaming)
        ending=ending or Latest(),
        strategy=strategy,  # type: ignore[arg-type]
        fail_on_data_loss=_bool(opts, "failondataloss", True),
        max_offsets_per_trigger=max_per,
        min_offsets_per_trigger=min_per,
        max_trigger_delay_ms=max_delay,
        min_partitions=_positive_int(opts, "minpartitions"),
        include_headers=_bool(opts, "includeheaders", False),
        group_id=group_id.strip() if group_id is not None else None,
        given=frozenset(opts),
    )


def check_batch(opts: SourceOptions) -> SourceOptions:
    """Batch rules: no streaming-only options; starting can't be latest, ending can't be earliest."""
    for key in STREAMING_ONLY:
        if key in opts.given:
            raise InvalidSourceOption(key, f"Option '{display(key)}' is only valid in streaming queries "
                                           f"(spark.readStream), not in batch queries")
    if isinstance(opts.starting, Latest):
        raise InvalidSourceOption("startingoffsets", "starting offset can't be latest for batch queries on lakelog "
                                                     "(option 'startingOffsets')")
    if isinstance(opts.starting, SpecificOffsets):
        for t, p, o in opts.starting.offsets:
            if o == LATEST:
                raise InvalidSourceOption("startingoffsets", f"startingOffsets for {t}-{p} can't be latest (-1) "
                                                             f"for batch queries on lakelog")
    if isinstance(opts.ending, Earliest):
        raise InvalidSourceOption("endingoffsets", "ending offset can't be earliest for batch queries on lakelog "
                                                   "(option 'endingOffsets')")
    if isinstance(opts.ending, SpecificOffsets):
        for t, p, o in opts.ending.offsets:
            if o == EARLIEST:
                raise InvalidSourceOption("endingoffsets", f"ending offset for {t}-{p} can't be earliest (-2) for "
                                                           f"batch queries on lakelog (option 'endingOffsets')")
    return opts


def check_streaming(opts: SourceOptions) -> SourceOptions:
    """Streaming rules: no ending options; the starting default is ``latest``, as in the Kafka source."""
    for key in BATCH_ONLY:
        if key in opts.given:
            raise InvalidSourceOption(key, f"Option '{display(key)}' is not valid in streaming queries "
                                           f"(ending offsets apply to batch queries only)")
    if not ({"startingoffsets", "startingtimestamp", "startingoffsetsbytimestamp"} & opts.given):
        from dataclasses import replace

        return replace(opts, starting=Latest())
    return opts
