"""Differential testing: one client scenario run against Apache Kafka and against lakelog, and what the client
observed compared.

A scenario is a function of a :class:`Target` that drives real clients (confluent-kafka, kafka-python, Kafka's
tools) and returns what they observed as plain data: answers, error names, offsets, watermarks, configs, group
states. :func:`run_both` runs it against both (same topic names on both sides) and :func:`assert_same` compares
the two observations path by path. Paths may differ only where a pattern names an entry of :data:`DIFFERENCES`,
the documented list of lakelog's deliberate differences from Kafka (docs/kafka-clients.md shows the same list);
everything else must be equal.

Test modules import from here, never from a ``conftest``.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import time
import typing
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.record.default_records import DefaultRecordBatchBuilder

from kafka_front.messages import request_type
from wire_client import WireClient

TIMEOUT = 60.0  # seconds: generous, the machine is shared and loaded
BASE_TS = 1_700_000_000_000  # the records' CreateTime, in ms


@dataclass(frozen=True)
class Target:
    """A Kafka-protocol cluster under test: ``kafka`` (the reference) or ``lakelog``."""

    name: str
    bootstrap: str

    def conf(self, **extra: Any) -> dict:
        """A librdkafka configuration for this target (dots in keys as ``__``: ``fetch__max__bytes=...``)."""
        return {"bootstrap.servers": self.bootstrap, **{k.replace("__", "."): v for k, v in extra.items()}}

    def admin(self) -> AdminClient:
        return AdminClient(self.conf())


@dataclass(frozen=True)
class Difference:
    """One deliberate difference from Kafka: a name the tests cite and the reason, as docs/kafka-clients.md
    states it."""

    name: str
    reason: str


DIFFERENCES: dict[str, Difference] = {d.name: d for d in (
    Difference("identity", "cluster ids, topic ids, broker addresses and producer ids are each cluster's own"),
    Difference("replication", "lakelog keeps no replicas (the object store replicates): every partition has one "
                              "replica, its leader; min.insync.replicas is validated and described but has nothing "
                              "to count, and is described as Kafka's static default where a formatted Kafka 4 node "
                              "sets it as a cluster-wide dynamic default"),
    Difference("broker-configs", "DescribeConfigs on the broker describes the configs lakelog acts on (the topic "
                                 "configs' broker defaults, its limits: socket.request.max.bytes is lakelog's "
                                 "64 MiB request limit); Kafka's others (replication, threads, listeners, the log "
                                 "cleaner's threads) have no meaning for it"),
    Difference("lakelog-configs", "topics describe lakelog's own configs beside Kafka's: the Schema Registry's "
                                  "(Confluent Server's schema validation, lakelog's typed columns) and "
                                  "log.retention.check.interval.ms (the maintenance scheduler's per-topic "
                                  "override); the test broker checks retention once a day"),
    Difference("control-records", "lakelog writes no transaction markers and never stores an aborted "
                                  "transaction's records, so neither takes an offset: the offsets of what follows, "
                                  "high watermarks and lag are lower by the markers and aborted records Kafka "
                                  "counts (the tests check the shift is exactly that)"),
    Difference("transactional-ack", "a transactional produce is acknowledged with base offset -1: its records "
                                    "get offsets when the transaction commits"),
    Difference("batches", "lakelog stores records, not the producer's batches: Fetch answers carry lakelog's own "
                          "uncompressed batches (one per run of one producer's records), so their byte counts "
                          "differ from Kafka's, and a byte limit may end an answer inside what was one producer "
                          "batch where Kafka returns whole batches"),
    Difference("max-timestamp", "ListOffsets for the max timestamp (-3) considers the records at or above the log "
                                "start offset; Kafka's answer can name a record DeleteRecords removed, still in "
                                "its segment file, which no consumer can fetch"),
    Difference("producer-ids", "lakelog accepts idempotent batches only from producer ids its InitProducerId "
                               "handed out (UNKNOWN_PRODUCER_ID otherwise), where Kafka 4 starts a new producer's "
                               "state at whatever id a batch names: lakelog's ids are durable allocations, and a "
                               "stranger's id that InitProducerId hands out later would make its rightful "
                               "producer's first batch look like a duplicate (acknowledged, never written)"),
    Difference("unknown-tagged-fields", "a request carrying a tagged field its version does not define closes the "
                                        "connection (kio, which decodes requests, cannot read one), where Kafka "
                                        "keeps it as an unknown tagged field and answers"),
    Difference("uncommitted-records", "an open or aborted transaction's records are never in lakelog's log: "
                                      "read_uncommitted reads what read_committed reads, the last stable offset "
                                      "equals the high watermark, and Fetch lists no aborted transactions"),
)}


def difference(name: str) -> Difference:
    """The registered difference ``name``; KeyError for a name the allow-list lacks."""
    return DIFFERENCES[name]


def _match(pattern: list[str], path: list[str]) -> bool:
    if not pattern:
        return not path
    if pattern[0] == "**":
        return any(_match(pattern[1:], path[i:]) for i in range(len(path) + 1))
    return bool(path) and fnmatch.fnmatchcase(path[0], pattern[0]) and _match(pattern[1:], path[1:])


def differences(kafka: Any, lakelog: Any, path: tuple[str, ...] = ()) -> list[tuple[str, Any, Any]]:
    """Every leaf path where the two observations differ, as ``(path, kafka's, lakelog's)``; a dict key or list
    index present on one side only is a difference at that path."""
    if isinstance(kafka, dict) and isinstance(lakelog, dict):
        out = []
        for key in sorted(set(kafka) | set(lakelog), key=str):
            sub = (*path, str(key))
            if key not in kafka or key not in lakelog:
                out.append(("/".join(sub), kafka.get(key, "<absent>"), lakelog.get(key, "<absent>")))
            else:
                out.extend(differences(kafka[key], lakelog[key], sub))
        return out
    if isinstance(kafka, (list, tuple)) and isinstance(lakelog, (list, tuple)):
        out = []
        for i in range(max(len(kafka), len(lakelog))):
            sub = (*path, str(i))
            if i >= len(kafka) or i >= len(lakelog):
                out.append(("/".join(sub), kafka[i] if i < len(kafka) else "<absent>",
                            lakelog[i] if i < len(lakelog) else "<absent>"))
            else:
                out.extend(differences(kafka[i], lakelog[i], sub))
        return out
    return [] if kafka == lakelog else [("/".join(path), kafka, lakelog)]


def assert_same(kafka: Any, lakelog: Any, allow: dict[str, str] | None = None) -> list[tuple[str, str]]:
    """Fail unless the observations are equal at every path not matched by a pattern of ``allow`` (pattern ->
    the name of a :data:`DIFFERENCES` entry; ``*`` matches within one path segment, ``**`` any number of
    segments). Returns the allowed differences seen, as ``(path, difference name)``."""
    allow = {pattern: difference(name).name for pattern, name in (allow or {}).items()}
    allowed, unexpected = [], []
    for path, k, l in differences(kafka, lakelog):
        hit = next((name for pattern, name in allow.items() if _match(pattern.split("/"), path.split("/"))), None)
        if hit:
            allowed.append((path, hit))
        else:
            unexpected.append(f"  {path or '<root>'}: Kafka {k!r}, lakelog {l!r}")
    assert not unexpected, "lakelog differs from Apache Kafka:\n" + "\n".join(unexpected)
    return allowed


def run_both(targets: dict[str, Target], scenario: Callable[..., Any], *args: Any,
             parallel: bool = True, **kwargs: Any) -> tuple[Any, Any]:
    """``scenario(target, *args, **kwargs)`` against Kafka and lakelog (concurrently unless ``parallel`` is
    False: scenarios that time their answers run one after the other); returns (Kafka's, lakelog's)."""
    if not parallel:
        return (scenario(targets["kafka"], *args, **kwargs), scenario(targets["lakelog"], *args, **kwargs))
    with ThreadPoolExecutor(2) as pool:
        k = pool.submit(scenario, targets["kafka"], *args, **kwargs)
        l = pool.submit(scenario, targets["lakelog"], *args, **kwargs)
        return k.result(), l.result()


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def error_name(err: KafkaError | KafkaException | None) -> str | None:
    """A client error as Kafka's name (``UNKNOWN_TOPIC_OR_PARTITION``), or None."""
    if err is None:
        return None
    if isinstance(err, KafkaException):
        err = err.args[0]
    return err.name()


def create_topic(target: Target, name: str, partitions: int = 1, configs: dict[str, str] | None = None) -> None:
    """Create a topic with CreateTopics (replication factor 1) and wait until Metadata shows every partition
    with a leader."""
    admin = target.admin()  # kept until the answer: a destroyed client fails its futures
    admin.create_topics([NewTopic(name, partitions, 1, config=configs or {})], operation_timeout=TIMEOUT,
                        request_timeout=TIMEOUT)[name].result(TIMEOUT)
    wait_for_leaders(target, name, partitions)


def wait_for_leaders(target: Target, name: str, partitions: int) -> None:
    """Wait until Metadata names a leader for every partition and each leader answers ListOffsets (Kafka's
    metadata names a leader shortly before the leader serves the partition)."""
    admin = target.admin()
    deadline = time.monotonic() + TIMEOUT
    while True:
        md = admin.list_topics(name, timeout=TIMEOUT).topics.get(name)
        if md is not None and md.error is None and len(md.partitions) == partitions and all(
                p.leader >= 0 for p in md.partitions.values()):
            with WireClient(target.bootstrap) as w:
                r = request(w, 2, 5, {"replica_id": -1, "isolation_level": 0, "topics": [
                    {"name": name, "partitions": [{"partition_index": p, "current_leader_epoch": -1,
                                                   "timestamp": -1} for p in range(partitions)]}]})
            if all(p.error_code == 0 for t in r.topics for p in t.partitions):
                return
        assert time.monotonic() < deadline, f"{target.name}: {name} has no leaders after {TIMEOUT} s"
        time.sleep(0.1)


def watermarks(target: Target, topic: str, partitions: int, isolation: str = "read_uncommitted") -> list:
    """``[(low, high)]`` per partition, as a consumer at ``isolation`` sees them (read_committed: the high is
    the last stable offset)."""
    c = Consumer(target.conf(**{"group.id": unique("wm"), "isolation.level": isolation}))
    try:
        return [list(c.get_watermark_offsets(TopicPartition(topic, p), timeout=TIMEOUT, cached=False))
                for p in range(partitions)]
    finally:
        c.close()


def stable_watermarks(target: Target, topic: str, partitions: int) -> list:
    """The watermarks once no transaction is in doubt: the last stable offset equals the high watermark (Kafka
    writes a transaction's markers after EndTxn answers)."""
    deadline = time.monotonic() + TIMEOUT
    while True:
        hw = watermarks(target, topic, partitions)
        if watermarks(target, topic, partitions, "read_committed") == hw:
            return hw
        assert time.monotonic() < deadline, f"{target.name}: {topic}'s last stable offsets stay below {hw}"
        time.sleep(0.1)


def read_partitions(target: Target, topic: str, partitions: int, *, isolation: str = "read_uncommitted",
                    expect: int | None = None, **conf: Any) -> list[list[dict]]:
    """Every record of ``topic`` from its log start, per partition, as the consumer delivered them (offset, key,
    value, headers, timestamp and its type): read to the watermarks at ``isolation``, or, with ``expect``, until at
    least that many records arrived and then to the end of every partition (records a commit makes readable
    after ``commit_transaction()`` returns, in Kafka as in lakelog)."""
    ends = None if expect is not None else [hi for _, hi in watermarks(target, topic, partitions, isolation)]
    c = Consumer(target.conf(**{"group.id": unique("reader"), "enable.auto.commit": False,
                                "isolation.level": isolation, "auto.offset.reset": "earliest",
                                "enable.partition.eof": True, **conf}))
    out: list[list[dict]] = [[] for _ in range(partitions)]
    at_end = set() if ends is None else {p for p in range(partitions) if ends[p] == 0}
    c.assign([TopicPartition(topic, p, -2) for p in range(partitions)])
    deadline = time.monotonic() + TIMEOUT

    def finished() -> bool:
        return len(at_end) == partitions and (expect is None or sum(map(len, out)) >= expect)

    try:
        while not finished():
            assert time.monotonic() < deadline, f"{target.name}: {topic} not read to {ends or expect} in " \
                                                f"{TIMEOUT} s ({[len(r) for r in out]} records)"
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    if ends is None or m.offset() >= ends[m.partition()]:
                        at_end.add(m.partition())
                    continue
                raise KafkaException(m.error())
            out[m.partition()].append(record(m))
            at_end.discard(m.partition())
            if ends is not None and m.offset() + 1 >= ends[m.partition()]:
                at_end.add(m.partition())
    finally:
        c.close()
    return out


def record(m) -> dict:
    """What a consumer sees of one message."""
    ts_type, ts = m.timestamp()
    return {"offset": m.offset(), "key": m.key(), "value": m.value(), "headers": m.headers(),
            "timestamp": ts, "timestamp_type": ts_type, "leader_epoch": m.leader_epoch()}


def deliver(target: Target, topic: str, rows: list[dict], **conf) -> list[list]:
    """Produce ``rows`` and return the delivery reports as ``[error, partition, offset, timestamp]``."""
    reports: list[list] = []
    p = Producer(target.conf(**{"linger.ms": 20, "acks": "all", **conf}))
    for r in rows:
        kw = {k: r[k] for k in ("partition", "key", "value", "headers", "timestamp") if r.get(k) is not None}
        p.produce(topic, on_delivery=lambda err, m: reports.append(
            [error_name(err), m.partition(), m.offset(), list(m.timestamp())]), **kw)
    assert p.flush(TIMEOUT) == 0, f"{target.name}: undelivered records"
    return sorted(reports, key=lambda r: (r[1], r[2]))


def batch(pid: int, epoch: int, seq: int, values: list[bytes]) -> bytes:
    """A record batch built by kafka-python's encoder (not lakelog's), idempotent when ``pid`` >= 0."""
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=pid,
                                  producer_epoch=epoch, base_sequence=seq, batch_size=1 << 20)
    for i, v in enumerate(values):
        b.append(i, timestamp=BASE_TS + i, key=None, value=v, headers=[])
    return bytes(b.build())


def _check_fields(cls: type, values: dict, where: str) -> None:
    names = {f.name: f for f in dataclasses.fields(cls)}
    unknown = set(values) - set(names)
    assert not unknown, f"{where}: no field {sorted(unknown)} in {cls.__qualname__} ({sorted(names)})"
    hints = typing.get_type_hints(cls)
    for name, v in values.items():
        if isinstance(v, (list, tuple)) and v and isinstance(v[0], dict):
            element = next(a for a in typing.get_args(hints[name]) if a is not Ellipsis)
            element = next((a for a in typing.get_args(element) if dataclasses.is_dataclass(a)), element)
            for item in v:
                _check_fields(element, item, f"{where}.{name}")


def request(w: WireClient, api_key: int, version: int, values: dict):
    """``w.request`` after checking every key of ``values`` names a field of the request at that version (kio's
    builder would leave a misspelt field at its default)."""
    _check_fields(request_type(api_key, version), values, f"api {api_key} v{version}")
    return w.request(api_key, version, values)


def produce_wire(w: WireClient, topic: str, data: bytes, partition: int = 0) -> list:
    """Produce v9 (acks=all) of one batch; the answer as ``[error code, base offset, log start offset, indexes of
    the records refused]``."""
    r = request(w, 0, 9, {"transactional_id": None, "acks": -1, "timeout": 30000, "topic_data": [
        {"name": topic, "partition_data": [{"index": partition, "records": data}]}]})
    p = r.responses[0].partition_responses[0]
    return [int(p.error_code), p.base_offset, p.log_start_offset, [e.batch_index for e in p.record_errors]]
