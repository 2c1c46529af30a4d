"""The HTTP front's produce requests: a body decoded into partition batches over the broker's produce pipeline
(``lakelog.broker.produce``), and the answer per batch.

Three body forms (see docs/http.md): the simple JSON form (the server
partitions: explicit partition → murmur2(key) → sticky), the idempotent JSON
form (batches with producer id, epoch and base sequence) and an Arrow IPC
stream (``application/vnd.apache.arrow.stream``; idempotence fields as query
parameters or schema metadata).

Everything that can be checked before the commit is checked before anything
is queued -- the pipeline's stages: partitions exist, records fit the topic's
limits, the producer id is known and not fenced -- so a rejected request writes
nothing.  Sequence and
epoch checks against producer state happen inside the commit (they must be
atomic with it); their failures are reported per partition batch, as in
Kafka's ProduceResponse.
"""

from __future__ import annotations

import binascii
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from lakelog.broker.produce import StaleMetadata
from lakelog.broker.public_message import public_message
from lakelog.errors import InvalidRequest, KafkaError
from lakelog.storage.record_schema import HEADER_TYPE
from lakelog.writer.records import AppendResult, PartitionBatch
from lakelog.writer.records import normalize_records

from api.arrow_body import read_arrow_body
from api.errors import UnsupportedContentType
from api.produce_body import IdempotentProduce, MalformedBody, RecordIn, decode_produce
from api.schemas import INT32_MAX, INT64_MAX

if TYPE_CHECKING:
    from lakelog.broker.produce import ProducePipeline
    from lakelog.storage.topic_snapshot import TopicSnapshot

__all__ = ["ARROW_STREAM", "JSON", "ArrowParams", "Prepared", "ProduceService", "StaleMetadata", "media_type"]

JSON = "application/json"
ARROW_STREAM = "application/vnd.apache.arrow.stream"
_ARROW_COLUMNS = {"key", "value", "partition", "timestamp", "headers"}
_IDEMPOTENCE_KEYS = ("producer_id", "producer_epoch", "base_sequence", "partition")


@dataclass(frozen=True)
class ArrowParams:
    """Query parameters of the Arrow form (idempotence fields; ``partition`` for the whole body)."""

    producer_id: int | None = None
    producer_epoch: int | None = None
    base_sequence: int | None = None
    partition: int | None = None


@dataclass
class Prepared:
    """A validated request: its batches and the topic state they were checked against."""

    topic: str
    batches: list[PartitionBatch]
    log_append_time: bool

    @property
    def idempotent(self) -> bool:
        return any(b.idempotent for b in self.batches)

    @property
    def record_count(self) -> int:
        return sum(b.records.num_rows for b in self.batches)


def media_type(content_type: str | None) -> str:
    """The request's media type: JSON (also when absent) or Arrow stream; 415 otherwise."""
    mt = (content_type or JSON).split(";", 1)[0].strip().lower()
    if mt in (JSON, ARROW_STREAM):
        return mt
    raise UnsupportedContentType(f"unsupported Content-Type {content_type!r}: use {JSON} or {ARROW_STREAM}")


def _decode_base64(value: str | None, where: str) -> bytes | None:
    if value is None:
        return None
    try:
        return binascii.a2b_base64(value, strict_mode=True)
    except (binascii.Error, ValueError) as e:
        raise InvalidRequest(f"{where} is not valid base64 ({e})") from None


def _binary_column(values: list, encoding: str, what: str) -> pa.Array:
    if encoding == "utf8":
        return pa.array(values, pa.string()).view(pa.binary())  # same layout: no copy, no compute kernel
    return pa.array([_decode_base64(v, f"record {i} {what}") for i, v in enumerate(values)], pa.binary())


_OPTIONAL_FIELD = re.compile(rb'"(headers|timestamp|partition)"')


def _present(body: bytes) -> frozenset[str]:
    """Optional record fields that may occur in a JSON body (a field name absent from the bytes is absent
    from every record), so the common records of only key and value skip their passes.  One scan of the
    body, not one per field."""
    return frozenset(m.decode() for m in _OPTIONAL_FIELD.findall(body))


def _records_table(records: list[RecordIn], encoding: str, present: frozenset[str]) -> pa.Table:
    """JSON records (already decoded and validated) as a table of the library's input schema."""
    cols: dict[str, Any] = {
        "key": _binary_column([r.key for r in records], encoding, "key"),
        "value": _binary_column([r.value for r in records], encoding, "value"),
    }
    if "headers" in present and any(r.headers for r in records):
        headers = []
        for i, r in enumerate(records):
            if r.headers is None:
                headers.append(None)
                continue
            headers.append([{"key": h.key,
                             "value": (h.value.encode() if h.value is not None else None)
                             if encoding == "utf8" else _decode_base64(h.value, f"record {i} header value")}
                            for h in r.headers])
        cols["headers"] = pa.array(headers, HEADER_TYPE)
    if "timestamp" in present:
        stamps = [r.timestamp for r in records]
        if any(s is not None for s in stamps):
            cols["timestamp"] = pa.array(stamps, pa.int64())
    return normalize_records(pa.table(cols))


class ProduceService:
    """Turns HTTP produce bodies into the pipeline's appends.  Thread-safe: ``parse`` (CPU only) may run on the
    event loop; ``prepare`` and ``check_producers`` may read storage and run in worker threads
    (``api.produce_lane``)."""

    def __init__(self, pipeline: "ProducePipeline", *, max_request_bytes: int = 64 << 20) -> None:
        self.pipeline = pipeline
        self.max_request_bytes = max_request_bytes  # also bounds what an Arrow body decodes to
        self.metadata = pipeline.metadata
        self.metrics = pipeline.metrics

    @staticmethod
    def warm_up() -> None:
        """Run the parsing path once, so its lazy imports (pyarrow loads pandas on first use) and first-call
        setup happen at start-up rather than inside the first produce request."""
        _records_table(decode_produce(b'{"records": [{"key": "k", "value": "v", "timestamp": 0}]}').records,
                       "utf8", frozenset({"timestamp"}))

    # -- parsing and validation -------------------------------------------------------------
    def prepare(self, topic: str, body: bytes, content_type: str | None, params: ArrowParams) -> Prepared:
        """Parse and validate a whole request, reading storage as needed (blocking: call off the event loop);
        raises the first problem, having queued nothing."""
        try:
            prepared = self.parse(topic, body, content_type, params, self.metadata.get(topic))
        except StaleMetadata:  # a partition beyond the cached count: the topic may just have grown
            prepared = self.parse(topic, body, content_type, params, self.metadata.get(topic, fresh=True),
                                  fresh=True)
        self.check_producers(prepared)
        return prepared

    def parse(self, topic: str, body: bytes, content_type: str | None, params: ArrowParams,
              snap: "TopicSnapshot", *, fresh: bool = False, max_inline_bytes: int | None = None) -> Prepared:
        """Parse and validate a request against ``snap`` without touching storage (CPU only, any thread).

        A partition at or beyond ``snap``'s count raises :class:`StaleMetadata`, unless ``fresh`` says the
        snapshot was just read (then ``UNKNOWN_TOPIC_OR_PARTITION``).  Producer ids are not checked here
        (:meth:`check_producers`).
        """
        mt = media_type(content_type)
        self.pipeline.check_topic(topic)
        if mt == JSON:
            batches = self._parse_json(topic, body, snap, fresh)
        else:
            batches = self._parse_arrow(topic, body, snap, fresh, params, max_inline_bytes)
        if not batches:
            raise InvalidRequest(f"the produce request for {topic} holds no records")
        for b in batches:
            self.pipeline.validate(snap, b.records, b.partition)
        return Prepared(topic, batches, snap.config.log_append_time)

    def check_producers(self, prepared: Prepared) -> None:
        """Refuse unknown or fenced producer ids of idempotent batches (may read the producer-id table)."""
        self.pipeline.check_producers(prepared.batches)

    def _check_partition(self, topic: str, snap: "TopicSnapshot", fresh: bool, highest: int) -> None:
        self.pipeline.check_partition(topic, snap, highest, fresh=fresh)

    def _parse_json(self, topic: str, body: bytes, snap: "TopicSnapshot", fresh: bool) -> list[PartitionBatch]:
        try:
            req = decode_produce(body)
        except MalformedBody as e:
            raise InvalidRequest(str(e)) from None
        present = _present(body)
        if isinstance(req, IdempotentProduce):
            if not req.batches:
                raise InvalidRequest(f"the produce request for {topic} holds no batches")
            self._check_partition(topic, snap, fresh, max(b.partition for b in req.batches))
            return [PartitionBatch(b.partition, _records_table(b.records, req.encoding, present), req.producer_id,
                                   req.producer_epoch, b.base_sequence) for b in req.batches]
        records = req.records
        if not records:
            raise InvalidRequest(f"the produce request for {topic} holds no records")
        table = _records_table(records, req.encoding, present)
        explicit = [r.partition for r in records] if "partition" in present else None
        if explicit is None or all(p is None for p in explicit):
            return self._split(topic, table, None, snap.partition_count)
        self._check_partition(topic, snap, fresh, max(p for p in explicit if p is not None))
        return self._split(topic, table, explicit, snap.partition_count)

    def _parse_arrow(self, topic: str, body: bytes, snap: "TopicSnapshot", fresh: bool,
                     params: ArrowParams, max_inline_bytes: int | None = None) -> list[PartitionBatch]:
        table = read_arrow_body(body, max_decoded_bytes=self.max_request_bytes, max_inline_bytes=max_inline_bytes)
        extra = set(table.column_names) - _ARROW_COLUMNS
        if extra:
            raise InvalidRequest(f"unknown Arrow columns {sorted(extra)}; allowed: {sorted(_ARROW_COLUMNS)}")
        if len(set(table.column_names)) != len(table.column_names):
            raise InvalidRequest("duplicate Arrow column names")
        fields = _arrow_params(table.schema.metadata, params)
        explicit = None
        if "partition" in table.column_names:
            col = table.column("partition")
            if not pa.types.is_integer(col.type):
                raise InvalidRequest(f"Arrow column 'partition' must be an integer, got {col.type}")
            table = table.drop_columns(["partition"])
            if col.null_count < len(col):
                lo, hi = pc.min(col).as_py(), pc.max(col).as_py()
                if lo < 0:
                    raise InvalidRequest(f"Arrow column 'partition' holds a negative partition {lo}")
                explicit = (col, hi)
        try:
            records = normalize_records(table)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
            raise InvalidRequest(f"unusable Arrow columns: {e}") from None
        if records.num_rows == 0:
            raise InvalidRequest(f"the produce request for {topic} holds no records")
        if fields.partition is not None:
            if explicit is not None:
                raise InvalidRequest("give the partition either as a query parameter or as a column, not both")
            self._check_partition(topic, snap, fresh, fields.partition)
            target: int | None = fields.partition
        elif explicit is not None and explicit[0].null_count == 0 and pc.min(explicit[0]).as_py() == explicit[1]:
            self._check_partition(topic, snap, fresh, explicit[1])
            target = explicit[1]
        else:
            target = None
        if fields.producer_id is not None:
            if fields.producer_epoch is None or fields.base_sequence is None:
                raise InvalidRequest("an idempotent Arrow request needs producer_id, producer_epoch and base_sequence")
            if target is None:
                raise InvalidRequest("an idempotent Arrow request must target one partition "
                                     "(the partition parameter, or one value in the partition column)")
            return [PartitionBatch(target, records, fields.producer_id, fields.producer_epoch, fields.base_sequence)]
        if fields.producer_epoch is not None or fields.base_sequence is not None:
            raise InvalidRequest("producer_epoch and base_sequence need a producer_id")
        if target is not None:
            return [PartitionBatch(target, records)]
        if explicit is None:
            return self._split(topic, records, None, snap.partition_count)
        self._check_partition(topic, snap, fresh, explicit[1])
        return self._split(topic, records, explicit[0].to_pylist(), snap.partition_count)

    def _split(self, topic: str, table: pa.Table, explicit: list | None, n: int) -> list[PartitionBatch]:
        return self.pipeline.partition(topic, table, explicit, n)

    # -- queueing and answering -------------------------------------------------------------
    async def produce(self, prepared: Prepared) -> list[AppendResult | KafkaError]:
        """Queue the batches and wait for their commit (the event loop is never blocked)."""
        return await self.pipeline.commit(prepared.topic, prepared.batches)

    def produce_unacknowledged(self, prepared: Prepared) -> None:
        """``acks=0``: queue and return at once; failures are only counted and logged."""
        self.pipeline.append_unacknowledged(prepared.topic, prepared.batches)

    def report(self, prepared: Prepared, results: list[AppendResult | KafkaError]) -> tuple[int, dict]:
        """(status, body): 200 with one entry per batch, or the first error's status if every batch failed."""
        out = []
        ts_type = "LogAppendTime" if prepared.log_append_time else "CreateTime"
        failed = []
        for b, r in zip(prepared.batches, results):
            if isinstance(r, KafkaError):
                failed.append(r)
                out.append({"partition": b.partition, "base_offset": -1, "record_count": b.records.num_rows,
                            "log_append_time": -1, "timestamp_type": ts_type, "duplicate": False,
                            **r.to_dict(), "message": public_message(r.message)})  # (NOT_LEADER_OR_FOLLOWER: the leader too)
            else:
                out.append({"partition": r.partition, "base_offset": r.base_offset, "record_count": r.record_count,
                            "log_append_time": r.log_append_time, "timestamp_type": ts_type, "error_code": 0,
                            "error_name": None, "message": None, "duplicate": r.duplicate})
        if failed and len(failed) == len(results):
            raise failed[0]  # the error handler answers (and counts) it
        for r in failed:
            self.metrics.count_error(r)
        return 200, {"topic": prepared.topic, "results": out}


def _arrow_params(metadata: dict | None, params: ArrowParams) -> ArrowParams:
    """Query parameters, falling back to the Arrow schema metadata keys of the same names."""
    meta = {k.decode(errors="replace"): v.decode(errors="replace") for k, v in (metadata or {}).items()}
    values: dict[str, int | None] = {}
    for key in _IDEMPOTENCE_KEYS:
        v = getattr(params, key)
        if v is None and key in meta:
            try:
                v = int(meta[key])
            except ValueError:
                raise InvalidRequest(f"Arrow schema metadata {key}={meta[key]!r} is not an integer") from None
        limit = 32767 if key == "producer_epoch" else INT32_MAX if key != "producer_id" else INT64_MAX
        if v is not None and not 0 <= v <= limit:
            raise InvalidRequest(f"{key}={v} is outside [0, {limit}]")
        values[key] = v
    return ArrowParams(**values)
