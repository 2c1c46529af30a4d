"""``spark.read.format("lakelog")`` and ``spark.readStream.format("lakelog")``: a Python Data Source.

A drop-in for Spark's Kafka source: the same output schema, option names,
precedence and messages (see :mod:`lakelog.spark.source_options`), over a
lakelog root given as the load path.  Registered automatically through the
top-level module ``pyspark_lakelog``.  Where the JVM source of the same name
(``lakelog/spark/java``) is installed it serves batch and streaming reads, and
this source is its fallback (S3 roots without hadoop-aws,
``spark.lakelog.jvm.enabled=false``); both keep the same semantics.

Where things run:

* ``LakelogDataSource.schema`` (driver, at ``load()``): validates the options
  and that subscribed topics/partitions exist -- bad options fail at analysis.
* ``reader()`` / ``streamReader()`` (driver, when the query is planned): the
  batch/streaming rules; planning resolves offsets against snapshots taken
  then (only committed data, up to their high watermarks) and packs segment
  slices into input partitions (:mod:`lakelog.spark.read_plan`).
* ``read()`` (executors): reads its slices as Arrow batches whose schema equals
  Spark's exactly (:mod:`lakelog.spark.slice_reader`).

The source and reader objects hold only options, the storage root and
schemas (small, picklable); snapshots are loaded inside planning calls and
file handles inside ``read()``.  The streaming reader that plans micro-batches
lives in one long-running Python process on the driver and caches topic
snapshots there, advancing them by the Delta log tail.

Streaming offsets are the Kafka source's JSON (``{"orders": {"0": 42}}``).
With ``groupId``, a query without a checkpoint starts from the group's
committed offsets, and the end of every completed micro-batch is committed to
the group (``GET /v1/groups/{group}/offsets`` shows it).  Spark reports a
batch as done through ``commit()`` only when it plans the next one -- for
``Trigger.AvailableNow`` the last batch's ``commit()`` comes on the next run --
so the source also commits the ``start`` of every ``latestOffset`` call: the
engine asks for it only after the previous batch completed.
"""

from __future__ import annotations

import logging
import time
from typing import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.streaming.datasource import (ReadAllAvailable, ReadLimit, ReadMaxRows, ReadMinRows,
                                              SupportsTriggerAvailableNow)
from pyspark.sql.types import (ArrayType, BinaryType, IntegerType, LongType, StringType, StructField, StructType,
                               TimestampType)

from lakelog.storage.catalog import Catalog
from lakelog.errors import OffsetOutOfRange, UnknownTopicOrPartition
from lakelog.spark.read_plan import OffsetRange, ReadTask, plan_reads
from lakelog.spark.slice_reader import read_slices
from lakelog.spark.source_offsets import (DATA_LOSS_HINT_FALSE, DATA_LOSS_HINT_TRUE, Offsets, TopicView,
                                           check_data_loss, from_json_dict, rate_limit, resolve_ending,
                                           resolve_starting, to_json_dict)
from lakelog.spark.source_options import (InvalidSourceOption, Latest, SourceOptions, check_batch, check_streaming,
                                           parse_options)
from lakelog.storage.storage_root import StorageRoot

log = logging.getLogger(__name__)

FORMAT_NAME = "lakelog"

KAFKA_SCHEMA = StructType([
    StructField("key", BinaryType()),
    StructField("value", BinaryType()),
    StructField("topic", StringType()),
    StructField("partition", IntegerType()),
    StructField("offset", LongType()),
    StructField("timestamp", TimestampType()),
    StructField("timestampType", IntegerType()),
])
HEADERS_TYPE = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))
KAFKA_SCHEMA_WITH_HEADERS = StructType([*KAFKA_SCHEMA.fields, StructField("headers", HEADERS_TYPE)])


def kafka_schema(include_headers: bool) -> StructType:
    """The Kafka source's output schema."""
    return KAFKA_SCHEMA_WITH_HEADERS if include_headers else KAFKA_SCHEMA


def _root(opts: SourceOptions) -> StorageRoot:
    return StorageRoot.resolve(opts.root, dict(opts.storage_options))


def typed_fields(view: TopicView) -> list[StructField]:
    """The typed columns (``key_record``, ``value_record``) of the topics in ``view``, merged as lakelog merges
    schema versions; topics whose columns have no common type fail the load."""
    from pyspark.sql.pandas.types import from_arrow_type

    from lakelog.schema.typed_columns import TYPED_COLUMNS, TypeConflict, merge_types
    from lakelog.writer.typed_segments import table_types

    merged: dict[str, pa.DataType] = {}
    for topic, snap in sorted(view.snapshots.items()):
        for name, t in table_types(snap).items():
            try:
                merged[name] = merge_types(merged.get(name), t, name)
            except TypeConflict as e:
                raise InvalidSourceOption("subscribe", f"topic {topic}'s {name} and the other topics' have no common "
                                                       f"type ({e}); read them separately") from None
    return [StructField(name, from_arrow_type(merged[name]), True) for name in TYPED_COLUMNS if name in merged]


def _output_schema(schema: StructType, opts: SourceOptions) -> pa.Schema:
    """Arrow schema of the batches ``read`` yields: Spark's own conversion of the query's schema.

    A user schema (``.schema(...)``) may name a subset of the Kafka columns, in any order: only those are read.
    """
    full = {f.name: f.dataType for f in kafka_schema(True).fields}
    for f in schema.fields:
        if f.name in ("key_record", "value_record"):
            continue  # typed columns, as the table (or the user's schema) types them
        if f.name not in full or f.dataType != full[f.name]:
            raise InvalidSourceOption("schema", f"The lakelog source's columns are those of the Kafka source "
                                                f"({kafka_schema(True).simpleString()}); a user-specified schema may "
                                                f"only select some of them, but it has {f.name} "
                                                f"{f.dataType.simpleString()}")
    if "headers" in schema.fieldNames() and not opts.include_headers:
        raise InvalidSourceOption("includeheaders", "The schema has a headers column: set the option "
                                                    "'includeHeaders' to true")
    return to_arrow_schema(schema, timezone="UTC")


class LakelogInputPartition(InputPartition):
    """One Spark task: segment slices to read (picklable; see :class:`~lakelog.spark.read_plan.ReadTask`)."""

    def __init__(self, task: ReadTask) -> None:
        self.task = task


class LakelogDataSource(DataSource):
    """The ``lakelog`` format: topics under a lakelog root (the load path), read like Kafka topics."""

    @classmethod
    def name(cls) -> str:
        return FORMAT_NAME

    def schema(self) -> StructType:
        opts = parse_options(self.options)
        root = _root(opts)
        sub = opts.subscription
        if sub.kind == "subscribe":
            catalog = Catalog(root)
            for topic in sub.topics:
                if not catalog.exists(topic):
                    raise UnknownTopicOrPartition(f"topic {topic} (option 'subscribe') does not exist under "
                                                  f"{root.uri}")
        view = TopicView(root, sub).refresh()
        if sub.kind == "assign":
            view.partitions()
        return StructType([*kafka_schema(opts.include_headers).fields, *typed_fields(view)])

    def reader(self, schema: StructType) -> "LakelogBatchReader":
        return LakelogBatchReader(check_batch(parse_options(self.options)), schema)

    def streamReader(self, schema: StructType) -> "LakelogStreamReader":
        return LakelogStreamReader(check_streaming(parse_options(self.options)), schema)


class _Reading:
    """What batch and stream readers share: options, root, output schema, and ``read``."""

    def __init__(self, opts: SourceOptions, schema: StructType) -> None:
        self.opts = opts
        self.root = _root(opts)
        self.arrow_schema = _output_schema(schema, opts)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        task = getattr(partition, "task", None)
        if task is None:  # Spark plans one empty partition when there is nothing to read
            return iter(())
        return read_slices(self.root, task.slices, self.arrow_schema, fail_on_data_loss=self.opts.fail_on_data_loss)

    def _plan(self, view: TopicView, ranges: list[OffsetRange]) -> list[LakelogInputPartition]:
        tasks = plan_reads(view.snapshots, ranges, min_partitions=self.opts.min_partitions)
        return [LakelogInputPartition(t) for t in tasks]


class LakelogBatchReader(_Reading, DataSourceReader):
    """A batch read: offsets resolved once, against the snapshots taken at planning."""

    def partitions(self) -> list[LakelogInputPartition]:
        opts = self.opts
        view = TopicView(self.root, opts.subscription).refresh()
        tps = view.partitions()
        starts = resolve_starting(view, opts.starting, tps, strategy=opts.strategy)
        ends = resolve_ending(view, opts.ending, tps)
        ranges = []
        for tp in tps:
            start = check_data_loss(view, tp, starts[tp], fail_on_data_loss=opts.fail_on_data_loss, warn=log.warning)
            end = ends[tp]
            if end < start:
                raise InvalidSourceOption(
                    "endingoffsets", f"The ending offset of {tp[0]}-{tp[1]} ({end}) is before its starting offset "
                                     f"({start}): check the options 'startingOffsets'/'startingTimestamp' and "
                                     f"'endingOffsets'/'endingTimestamp'")
            ranges.append(OffsetRange(tp[0], tp[1], start, end))
        return self._plan(view, ranges)


class LakelogStreamReader(_Reading, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches over the subscribed partitions; offsets are ``{topic: {partition: next offset}}``."""

    def __init__(self, opts: SourceOptions, schema: StructType) -> None:
        super().__init__(opts, schema)
        # planner state, built lazily in the driver's long-lived source process (never pickled with data)
        self._view: TopicView | None = None
        self._target: Offsets | None = None  # AvailableNow: the high watermarks when the query started
        self._latest: Offsets | None = None
        self._last_trigger_ms = 0
        self._committed: Offsets | None = None
        self._store = None

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        for k in ("_view", "_store", "_target", "_latest", "_committed"):
            state[k] = None
        return state

    def _refreshed(self) -> TopicView:
        if self._view is None:
            self._view = TopicView(self.root, self.opts.subscription)
        return self._view.refresh()

    # -- offsets ------------------------------------------------------------------------------
    def initialOffset(self) -> dict:
        view = self._refreshed()
        tps = view.partitions()
        committed = self._group_offsets() if self.opts.group_id else {}
        missing = [tp for tp in tps if tp not in committed]
        starts = resolve_starting(view, self.opts.starting, missing, strategy=self.opts.strategy,
                                  covers=tps) if missing else {}
        if isinstance(self.opts.starting, Latest):
            skipped = sum(starts[tp] - view.log_start_offset(tp) for tp in missing)
            if skipped:
                # Kafka's default, kept; but an AvailableNow query on an existing topic then reads nothing.
                log.info("the stream starts at latest (startingOffsets' default for streams, as in Kafka's source): "
                         "%d records already in %s are not read; set startingOffsets=earliest to read them",
                         skipped, ", ".join(sorted({tp[0] for tp in missing})))
        starts.update({tp: committed[tp] for tp in tps if tp in committed})
        return to_json_dict(starts)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        if self.opts.min_offsets_per_trigger is not None:
            return ReadMinRows(self.opts.min_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        view = self._refreshed()
        self._target = view.latest(view.partitions())

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin_given = from_json_dict(start)
        if self.opts.group_id:
            self._commit_group(begin_given)  # the engine asks only once the batch ending at `start` completed
        view = self._refreshed()
        tps = view.partitions()
        latest = view.latest(tps)
        self._latest = dict(latest)
        if self._target is not None:  # AvailableNow: nothing that arrived after the query started
            latest = {tp: min(o, self._target[tp]) for tp, o in latest.items() if tp in self._target}
        begin = {tp: begin_given[tp] if tp in begin_given else view.log_start_offset(tp) for tp in latest}
        latest = {tp: max(o, begin[tp]) for tp, o in latest.items()}  # never move a partition backwards
        uses_options = limit == self.getDefaultReadLimit()
        available = sum(latest[tp] - begin[tp] for tp in latest)
        now_ms = int(time.time() * 1000)
        min_rows = self.opts.min_offsets_per_trigger if uses_options else (
            limit.min_rows if isinstance(limit, ReadMinRows) else None)
        if min_rows is not None and self._target is None and available < min_rows \
                and now_ms - self._last_trigger_ms < self.opts.max_trigger_delay_ms:
            return start
        max_rows = self.opts.max_offsets_per_trigger if uses_options else (
            limit.max_rows if isinstance(limit, ReadMaxRows) else None)
        end = rate_limit(begin, latest, max_rows) if max_rows is not None else latest
        for tp, o in begin_given.items():  # partitions no longer subscribed keep their position
            end.setdefault(tp, o)
        if end == begin_given:
            return start
        self._last_trigger_ms = now_ms
        return to_json_dict(end)

    def reportLatestOffset(self) -> dict | None:
        return to_json_dict(self._latest) if self._latest else None

    # -- planning -------------------------------------------------------------------------------
    def partitions(self, start: dict, end: dict) -> list[LakelogInputPartition]:
        begin, until = from_json_dict(start), from_json_dict(end)
        if not until or begin == until:
            return []
        view = self._view
        if view is None or any(tp[0] not in view.snapshots or view.high_watermark(tp) < o
                               for tp, o in until.items() if o > begin.get(tp, 0)):
            view = self._refreshed()  # a restarted query replays a batch planned by an earlier process
        ranges = []
        for tp, e in sorted(until.items()):
            if tp in begin:
                s = begin[tp]
            elif tp[0] in view.snapshots:
                s = view.log_start_offset(tp)  # a partition new in this batch starts at its earliest offset
            else:
                s = e
            if s >= e:
                continue
            if tp[0] not in view.snapshots or view.high_watermark(tp) < e:
                self._data_loss(f"Offsets [{s}, {e}) of {tp[0]}-{tp[1]} are no longer available: the topic was "
                                f"deleted or recreated.")
                continue
            s = check_data_loss(view, tp, s, fail_on_data_loss=self.opts.fail_on_data_loss, warn=log.warning)
            if s < e:
                ranges.append(OffsetRange(tp[0], tp[1], s, e))
        return self._plan(view, ranges)

    def _data_loss(self, message: str) -> None:
        if self.opts.fail_on_data_loss:
            raise OffsetOutOfRange(f"{message} {DATA_LOSS_HINT_TRUE}")
        log.warning("%s %s", message, DATA_LOSS_HINT_FALSE)

    def commit(self, end: dict) -> None:
        if self.opts.group_id:
            self._commit_group(from_json_dict(end))

    def stop(self) -> None:
        self._view = None
        self._store = None

    # -- consumer group -------------------------------------------------------------------------
    def _offset_store(self):
        if self._store is None:
            from lakelog.group.consumer_offsets import OffsetStore
            from lakelog.log import Log

            self._store = OffsetStore(Log(self.root))
        return self._store

    def _group_offsets(self) -> Offsets:
        return {(c.topic, c.partition): c.offset for c in self._offset_store().fetch(self.opts.group_id)}

    def _commit_group(self, offsets: Offsets) -> None:
        if not offsets or offsets == self._committed:
            return
        self._offset_store().commit(self.opts.group_id, [(t, p, o, "spark") for (t, p), o in sorted(offsets.items())])
        self._committed = dict(offsets)

