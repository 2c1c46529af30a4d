"""``lakelog consume TOPIC``: print records, like kafka-console-consumer, from the root or a Kafka listener.

The records come from the storage root directly, or with ``--bootstrap-server
HOST:PORT`` from a Kafka listener through confluent-kafka's consumer (no
consumer group: the partitions are assigned, nothing is committed), with the
same options, output and stopping rules.

Where it starts, per partition: ``--from-beginning`` = the log start offset;
``--offset earliest|latest|N`` (needs ``--partition``, as in Kafka); otherwise
the *latest* offset, as Kafka's console consumer does -- so without
``--from-beginning`` a topic nobody is writing to prints nothing.

Where it stops: by default at the high watermarks of the moment it started
(it does not follow the log: it exits once it has printed everything that
was committed when it began).  ``--follow`` keeps polling for new records
every ``--poll-interval-ms`` until Ctrl-C, ``--max-messages`` or
``--timeout-ms`` (no new record for that long); partitions added meanwhile
are followed from their beginning.

Output is Kafka's ``DefaultMessageFormatter``: the value, preceded as asked
by ``CreateTime:<ms>``, ``Partition:<p>``, ``Offset:<o>``, headers and the
key, separated by ``key.separator`` (TAB).  With ``--json``: one JSON object
per record per line.  "Processed a total of N messages" goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from lakelog.cli.global_options import add_topic_argument, key_value, key_values, open_log, positive_int
from lakelog.cli.output import bytes_to_json, headers_to_json
from lakelog.cli.transport import add_transport_options

FETCH_MAX_BYTES = 16 << 20
MIN_POLL_MS, MAX_POLL_MS = 10, 60_000
TIMESTAMP_TYPES = {0: "CreateTime", 1: "LogAppendTime"}

PROPERTIES = {  # Kafka's DefaultMessageFormatter properties and their defaults
    "print.timestamp": "false",
    "print.key": "false",
    "print.value": "true",
    "print.partition": "false",
    "print.offset": "false",
    "print.headers": "false",
    "key.separator": "\t",
    "line.separator": "\n",
    "headers.separator": ",",
    "null.literal": "null",
}


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "consume", help="print records (kafka-console-consumer)",
        description="Print the records of a topic, from the storage root or a Kafka listener (--bootstrap-server). "
                    "Starts at the latest offset unless --from-beginning/--offset; stops at the high watermark "
                    "unless --follow.",
        epilog="properties: " + ", ".join(PROPERTIES))
    add_topic_argument(p)
    start = p.add_mutually_exclusive_group()
    start.add_argument("--from-beginning", action="store_true", help="start at the log start offset")
    start.add_argument("--offset", metavar="O", type=_offset_spec,
                       help="start offset: earliest, latest or a number (requires --partition)")
    p.add_argument("--partition", type=int, metavar="P", help="consume only this partition")
    p.add_argument("--max-messages", type=positive_int, metavar="N", help="stop after N records")
    p.add_argument("--property", "--formatter-property", dest="properties", action="append", type=key_value,
                   default=[], metavar="KEY=VALUE", help="formatter property (Kafka's names), repeatable")
    p.add_argument("--follow", action="store_true", help="keep polling for new records until Ctrl-C")
    p.add_argument("--poll-interval-ms", type=_poll_interval, default=500, metavar="MS",
                   help=f"with --follow: wait between polls ({MIN_POLL_MS}..{MAX_POLL_MS}, default 500)")
    p.add_argument("--timeout-ms", type=positive_int, metavar="MS",
                   help="with --follow: exit when no new record arrived for this long")
    add_transport_options(p, http=False)
    p.set_defaults(func=run, parser=p)


def _poll_interval(text: str) -> int:
    value = int(text)
    if not MIN_POLL_MS <= value <= MAX_POLL_MS:
        raise argparse.ArgumentTypeError(f"must be between {MIN_POLL_MS} and {MAX_POLL_MS}, got {value}")
    return value


def _offset_spec(text: str) -> int | str:
    if text in ("earliest", "latest"):
        return text
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected earliest, latest or an offset >= 0, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"offset must be >= 0, got {value}")
    return value


class MessageFormatter:
    """Kafka's DefaultMessageFormatter, over bytes."""

    def __init__(self, props: dict[str, str]) -> None:
        flag = lambda k: props[k].strip().lower() == "true"  # noqa: E731
        self.fields = [f for f in ("timestamp", "partition", "offset", "headers", "key", "value")
                       if flag(f"print.{f}")]
        self.key_sep = props["key.separator"].encode()
        self.line_sep = props["line.separator"].encode()
        self.headers_sep = props["headers.separator"].encode()
        self.null = props["null.literal"].encode()

    def format(self, partition: int, rec: dict) -> bytes:
        parts = []
        for f in self.fields:
            if f == "timestamp":
                parts.append(f"{TIMESTAMP_TYPES.get(rec['timestampType'], 'NO_TIMESTAMP')}:"
                             f"{rec['timestamp'] // 1000}".encode())
            elif f == "partition":
                parts.append(f"Partition:{partition}".encode())
            elif f == "offset":
                parts.append(f"Offset:{rec['offset']}".encode())
            elif f == "headers":
                hs = rec["headers"] or []
                parts.append(self.headers_sep.join(h["key"].encode() + b":" + _or(h["value"], self.null)
                                                   for h in hs) if hs else b"NO_HEADERS")
            else:
                parts.append(_or(rec[f], self.null))
        return self.key_sep.join(parts) + self.line_sep


def _or(value: bytes | None, null: bytes) -> bytes:
    return null if value is None else value


def record_to_json(topic: str, partition: int, rec: dict) -> dict:
    return {"topic": topic, "partition": partition, "offset": rec["offset"],
            "timestamp": rec["timestamp"] // 1000,
            "timestampType": TIMESTAMP_TYPES.get(rec["timestampType"], "NO_TIMESTAMP"),
            "key": bytes_to_json(rec["key"]), "value": bytes_to_json(rec["value"]),
            "headers": headers_to_json(rec["headers"])}


def record_dicts(records) -> list[dict]:
    """Rows of a fetched table as dicts, with ``timestamp`` as epoch microseconds."""
    import pyarrow as pa

    i = records.schema.get_field_index("timestamp")
    return records.set_column(i, "timestamp", records.column(i).cast(pa.int64())).to_pylist()


def properties_from(args: argparse.Namespace) -> dict[str, str]:
    given = key_values(args.properties)
    unknown = sorted(set(given) - set(PROPERTIES))
    if unknown:
        args.parser.error(f"unknown --property {', '.join(unknown)}; known: {', '.join(PROPERTIES)}")
    return {**PROPERTIES, **given}


def run(args: argparse.Namespace) -> int:
    if args.offset is not None and args.partition is None:
        args.parser.error("--offset requires --partition (as in kafka-console-consumer)")
    formatter = MessageFormatter(properties_from(args))
    from lakelog.cli.transport import check_transport

    check_transport(args)
    if args.bootstrap_server:
        return run_kafka(args, formatter)
    log = open_log(args)
    topic = args.topic
    snap = log.snapshot(topic)
    from lakelog.errors import OffsetOutOfRange
    from lakelog.reader.log_reader import check_partition, resolve_offset

    if args.partition is not None:
        check_partition(snap, args.partition)
        partitions = [args.partition]
    else:
        partitions = list(range(snap.partition_count))
    spec = "earliest" if args.from_beginning else args.offset if args.offset is not None else "latest"
    # a numeric --offset is an offset (resolve_offset would read an int as a timestamp)
    positions = {p: spec if isinstance(spec, int) else resolve_offset(log.root, snap, p, spec) for p in partitions}
    for p, pos in positions.items():
        lso, hw = snap.log_start_offset(p), snap.high_watermark(p)
        if not lso <= pos <= hw:
            raise OffsetOutOfRange(f"offset {pos} of topic {topic} partition {p} is out of range "
                                   f"[log start offset {lso}, high watermark {hw}]")
    ends = None if args.follow else {p: snap.high_watermark(p) for p in partitions}
    out = sys.stdout.buffer
    printed = 0
    last_record_at = time.monotonic()

    def budget() -> int | None:
        return None if args.max_messages is None else args.max_messages - printed

    try:
        while budget() != 0:
            for p in list(positions):
                if budget() == 0 or ends is not None and positions[p] >= ends[p]:
                    continue
                res = log.fetch(topic, p, positions[p], max_records=budget(), max_bytes=FETCH_MAX_BYTES)
                records = res.records
                positions[p] = res.next_offset
                if ends is not None:
                    records = records.slice(0, _count_below(records, ends[p]))
                    positions[p] = min(positions[p], ends[p])
                for rec in record_dicts(records):
                    printed += 1  # counted before the write: an interrupted write has reached stdout or not
                    if args.json:
                        out.write(json.dumps(record_to_json(topic, p, rec), separators=(",", ":")).encode() + b"\n")
                    else:
                        out.write(formatter.format(p, rec))
                out.flush()
                if records.num_rows:
                    last_record_at = time.monotonic()
            if ends is not None:
                if all(positions[p] >= ends[p] for p in positions):
                    break
                continue
            snap = log.snapshot(topic)
            if any(pos < snap.high_watermark(p) for p, pos in positions.items()):
                continue
            idle_ms = (time.monotonic() - last_record_at) * 1000
            if args.timeout_ms is not None and idle_ms >= args.timeout_ms:
                break
            wait_ms = args.poll_interval_ms if args.timeout_ms is None else \
                min(args.poll_interval_ms, args.timeout_ms - idle_ms)
            time.sleep(max(wait_ms, 1) / 1000.0)
            if args.partition is None:
                snap = log.snapshot(topic)
                for p in range(len(positions), snap.partition_count):
                    positions[p] = snap.log_start_offset(p)  # added while we follow: all of it is new
    except KeyboardInterrupt:
        pass  # Ctrl-C is how a follower is meant to stop
    finally:
        sys.stderr.write(f"Processed a total of {printed} messages\n")
    return 0


def run_kafka(args: argparse.Namespace, formatter: MessageFormatter) -> int:
    """:func:`run` against a Kafka listener: the partitions assigned at their start offsets, read with
    confluent-kafka's consumer until the high watermarks of the start (or, with ``--follow``, on)."""
    from confluent_kafka import Consumer, KafkaError as CKError, TopicPartition

    from lakelog.cli.transport import client_config, connect, raise_kafka_error, topic_partitions
    from lakelog.errors import OffsetOutOfRange

    topic = args.topic
    conf, recorder = client_config(args, **{"group.id": "lakelog-cli", "enable.auto.commit": False,
                                            "enable.auto.offset.store": False, "enable.partition.eof": False,
                                            "auto.offset.reset": "error"})
    consumer = Consumer(conf)
    try:
        metadata = connect(consumer, args, recorder)
        partitions = topic_partitions(metadata, topic, None if args.partition is None else [args.partition])
        bounds = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)
                  for p in partitions}
    except BaseException:
        consumer.close()
        raise
    spec = "earliest" if args.from_beginning else args.offset if args.offset is not None else "latest"
    positions = {}
    for p, (lso, hw) in bounds.items():
        pos = lso if spec == "earliest" else hw if spec == "latest" else spec
        if not lso <= pos <= hw:
            consumer.close()
            raise OffsetOutOfRange(f"offset {pos} of topic {topic} partition {p} is out of range "
                                   f"[log start offset {lso}, high watermark {hw}]")
        positions[p] = pos
    ends = None if args.follow else {p: hw for p, (_, hw) in bounds.items()}
    out = sys.stdout.buffer
    printed = 0
    try:
        consumer.assign([TopicPartition(topic, p, positions[p]) for p in partitions
                         if ends is None or positions[p] < ends[p]])
        last_record_at = time.monotonic()
        while args.max_messages is None or printed < args.max_messages:
            if ends is not None and all(positions[p] >= ends[p] for p in partitions):
                break
            if ends is None and args.timeout_ms is not None and \
                    (time.monotonic() - last_record_at) * 1000 >= args.timeout_ms:
                break
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            if msg.error() is not None:
                if msg.error().code() == CKError._PARTITION_EOF:
                    continue
                raise_kafka_error(msg.error())
            p, offset = msg.partition(), msg.offset()
            if ends is not None and offset >= ends[p]:
                positions[p] = ends[p]
                continue
            positions[p] = offset + 1
            last_record_at = time.monotonic()
            rec = kafka_record(msg)
            printed += 1
            if args.json:
                out.write(json.dumps(record_to_json(topic, p, rec), separators=(",", ":")).encode() + b"\n")
            else:
                out.write(formatter.format(p, rec))
            out.flush()
    except KeyboardInterrupt:
        pass
    finally:
        consumer.close()
        sys.stderr.write(f"Processed a total of {printed} messages\n")
    return 0


def kafka_record(msg) -> dict:
    """A confluent-kafka message as the dict :class:`MessageFormatter` and :func:`record_to_json` take."""
    kind, ms = msg.timestamp()
    return {"offset": msg.offset(), "timestamp": ms * 1000, "timestampType": {1: 0, 2: 1}.get(kind, -1),
            "key": msg.key(), "value": msg.value(),
            "headers": [{"key": k, "value": v} for k, v in msg.headers() or ()] or None}


def _count_below(records, end: int) -> int:
    """How many leading records have offset < ``end`` (records are in offset order)."""
    import pyarrow.compute as pc

    if not records.num_rows:
        return 0
    return int(pc.sum(pc.less(records.column("offset"), end)).as_py() or 0)
