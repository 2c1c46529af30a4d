"""``lakelog produce TOPIC``: one record per stdin line, like kafka-console-producer.

Line format (Kafka's ``LineMessageReader`` properties, given as ``--property KEY=VALUE``)::

    [headers<headers.delimiter>][key<key.separator>]value

    parse.key=true            split a key off each line at key.separator (default TAB);
                              --key-separator SEP is shorthand for both
    parse.headers=true        lines start with h1:v1,h2:v2 then headers.delimiter (TAB)
    headers.separator=,       headers.key.separator=:
    null.marker=STRING        a key, value or header value equal to it is null (a null value = tombstone)
    ignore.error=true         a line without the separator becomes a value with a null key

stdin is read in chunks; lines are appended in batches -- every
``--batch-size`` lines, and when ``--timeout`` ms pass with lines pending
and no more input ready (so typing into a terminal works) -- one Delta commit
per batch, never one per line.  Records are partitioned like Kafka's
producer: ``--partition``, else murmur2(key), else sticky.

Records go to a :class:`RecordSink`; :func:`open_sink` picks it from the
arguments (:mod:`lakelog.cli.transport`): the storage root itself
(:class:`LogSink`); with ``--bootstrap-server HOST:PORT`` a Kafka listener
through confluent-kafka's idempotent producer, partitioning keys with murmur2
as Kafka's Java producer does (:class:`KafkaSink`); or with ``--url
http://...`` a front's HTTP address through lakelog's idempotent client
(:class:`HttpSink`), with no change to the line parsing or batching here.
"""

from __future__ import annotations

import argparse
import os
import select
import sys
import time
from typing import BinaryIO, Iterator, Protocol

from lakelog.cli.global_options import add_topic_argument, key_value, key_values, open_log, positive_int
from lakelog.cli.output import print_json
from lakelog.cli.transport import add_transport_options

DEFAULT_BATCH_SIZE = 10_000
DEFAULT_TIMEOUT_MS = 1_000
READ_CHUNK = 1 << 16

PROPERTIES = {  # Kafka's LineMessageReader properties and their defaults
    "parse.key": "false",
    "key.separator": "\t",
    "parse.headers": "false",
    "headers.delimiter": "\t",
    "headers.separator": ",",
    "headers.key.separator": ":",
    "null.marker": None,
    "ignore.error": "false",
}


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "produce", help="append one record per stdin line (kafka-console-producer)",
        description="Append one record per stdin line, in batches (one commit per batch). "
                    "Lines are KEY<SEP>VALUE with --key-separator or --property parse.key=true.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="properties: " + ", ".join(PROPERTIES))
    add_topic_argument(p)
    p.add_argument("--partition", type=int, metavar="P", help="append every record to this partition")
    p.add_argument("--key-separator", metavar="SEP",
                   help="parse KEY<SEP>VALUE lines (same as --property parse.key=true --property key.separator=SEP)")
    p.add_argument("--property", dest="properties", action="append", type=key_value, default=[],
                   metavar="KEY=VALUE", help="line reader property (Kafka's names), repeatable")
    p.add_argument("--batch-size", type=positive_int, default=DEFAULT_BATCH_SIZE, metavar="N",
                   help=f"lines per commit (default {DEFAULT_BATCH_SIZE})")
    p.add_argument("--timeout", type=positive_int, default=DEFAULT_TIMEOUT_MS, metavar="MS",
                   help="commit pending lines after this many ms without more input ready "
                        f"(Kafka's linger; default {DEFAULT_TIMEOUT_MS})")
    add_transport_options(p, http=True)
    p.set_defaults(func=run, parser=p)


# -- sinks ----------------------------------------------------------------------------------------
class RecordSink(Protocol):
    """Where produced batches go; ``send`` returns (partition, base offset, record count) per partition batch."""

    def send(self, records) -> list[tuple[int, int, int]]: ...

    def close(self) -> None: ...


class LogSink:
    """Appends straight to the storage root: one fenced Delta commit per ``send``."""

    def __init__(self, args: argparse.Namespace) -> None:
        from lakelog.reader.log_reader import check_partition

        self.log = open_log(args)
        self.topic = args.topic
        self.partition = args.partition
        snap = self.log.snapshot(self.topic)  # fail fast, before reading stdin: UNKNOWN_TOPIC_OR_PARTITION
        if self.partition is not None:
            check_partition(snap, self.partition)

    def send(self, records) -> list[tuple[int, int, int]]:
        results = self.log.append(self.topic, records, partition=self.partition)
        return [(r.partition, r.base_offset, r.record_count) for r in results]

    def close(self) -> None:
        self.log.close()


class KafkaSink:
    """Produces to a Kafka listener (``--bootstrap-server``) with confluent-kafka's idempotent producer,
    keys partitioned by murmur2 as Kafka's Java producer does; ``send`` returns once every record is
    acknowledged (``acks=all``), or raises the first failure as lakelog's typed error."""

    def __init__(self, args: argparse.Namespace) -> None:
        from confluent_kafka import Producer

        from lakelog.cli.transport import client_config, connect, topic_partitions

        self.topic = args.topic
        self.partition = args.partition
        conf, recorder = client_config(args, **{"enable.idempotence": True, "acks": "all", "linger.ms": 5,
                                                "partitioner": "murmur2_random"})
        self.producer = Producer(conf)
        metadata = connect(self.producer, args, recorder)  # fail fast: no listener, the HTTP front, no topic
        topic_partitions(metadata, self.topic, None if self.partition is None else [self.partition])

    def send(self, records) -> list[tuple[int, int, int]]:
        from confluent_kafka import KafkaException

        from lakelog.cli.transport import raise_kafka_error

        cols = records.to_pydict()
        headers = cols.get("headers") or [None] * records.num_rows
        acked: list[tuple[int, int]] = []
        failures: list = []

        def report(err, msg) -> None:
            if err is not None:
                failures.append(err)
            else:
                acked.append((msg.partition(), msg.offset()))

        partition = -1 if self.partition is None else self.partition  # -1: the partitioner chooses
        for k, v, hs in zip(cols["key"], cols["value"], headers):
            hdrs = [(h["key"], h["value"]) for h in hs] if hs else None
            while True:
                try:
                    self.producer.produce(self.topic, value=v, key=k, partition=partition, headers=hdrs,
                                          on_delivery=report)
                    break
                except BufferError:  # the client's queue is full: serve deliveries, then try again
                    self.producer.poll(0.1)
                except KafkaException as e:
                    raise_kafka_error(e.args[0])
        self.producer.flush()
        if failures:
            raise_kafka_error(failures[0])
        ranges: dict[int, list[int]] = {}
        for p, offset in acked:
            r = ranges.setdefault(p, [offset, offset])
            r[0], r[1] = min(r[0], offset), max(r[1], offset)
        return [(p, lo, hi - lo + 1) for p, (lo, hi) in sorted(ranges.items())]

    def close(self) -> None:
        self.producer.flush()


class HttpSink:
    """Produces through a front's HTTP address (``--url``) with the idempotent :class:`lakelog.client.Producer`."""

    def __init__(self, args: argparse.Namespace) -> None:
        from lakelog.client import Producer

        self.topic = args.topic
        self.partition = args.partition
        self.producer = Producer(args.url, token=os.environ.get("LAKELOG_TOKEN") or None,
                                 batch_size=1 << 20, linger_ms=5)
        n = self.producer.partitions_for(self.topic)  # fail fast: UNKNOWN_TOPIC_OR_PARTITION, auth errors
        if self.partition is not None and not 0 <= self.partition < n:
            from lakelog.errors import UnknownTopicOrPartition

            raise UnknownTopicOrPartition(f"partition {self.partition} of topic {self.topic} does not exist "
                                          f"(the topic has {n} partitions)")

    def send(self, records) -> list[tuple[int, int, int]]:
        cols = records.to_pydict()
        headers = cols.get("headers") or [None] * records.num_rows
        futures = [self.producer.send(self.topic, v, key=k, partition=self.partition,
                                      headers=[(h["key"], h["value"]) for h in hs] if hs else None)
                   for k, v, hs in zip(cols["key"], cols["value"], headers)]
        self.producer.flush()
        ranges: dict[int, list[int]] = {}
        for f in futures:
            meta = f.result()
            r = ranges.setdefault(meta.partition, [meta.offset, meta.offset])
            r[0], r[1] = min(r[0], meta.offset), max(r[1], meta.offset)
        return [(p, lo, hi - lo + 1) for p, (lo, hi) in sorted(ranges.items())]

    def close(self) -> None:
        self.producer.close()


def open_sink(args: argparse.Namespace) -> RecordSink:
    """The sink the arguments ask for: a Kafka listener, a front's HTTP address, else the storage root."""
    from lakelog.cli.transport import check_transport

    check_transport(args)
    if args.bootstrap_server:
        return KafkaSink(args)
    return HttpSink(args) if args.url else LogSink(args)


# -- reading stdin --------------------------------------------------------------------------------
def read_line_batches(stream: BinaryIO, batch_size: int, linger_s: float) -> Iterator[list[bytes]]:
    """Lines of ``stream`` (without ``\\n`` / ``\\r\\n``) in lists of at most ``batch_size``.

    A partial batch is yielded when ``linger_s`` has passed since its first line and no more
    input is ready, and at end of input.
    """
    fd = stream.fileno()
    pending: list[bytes] = []
    tail = b""
    first_at = 0.0
    while True:
        if pending and not _ready(fd, max(0.0, first_at + linger_s - time.monotonic())):
            yield pending
            pending = []
            continue
        chunk = os.read(fd, READ_CHUNK)
        if not chunk:
            break
        lines = (tail + chunk).split(b"\n")
        tail = lines.pop()
        if lines and not pending:
            first_at = time.monotonic()
        pending.extend(line[:-1] if line.endswith(b"\r") else line for line in lines)
        while len(pending) >= batch_size:
            yield pending[:batch_size]
            pending = pending[batch_size:]
            first_at = time.monotonic()
    if tail:
        pending.append(tail[:-1] if tail.endswith(b"\r") else tail)
    if pending:
        yield pending


def _ready(fd: int, timeout: float) -> bool:
    try:
        return bool(select.select([fd], [], [], timeout)[0])
    except (OSError, ValueError):  # not selectable (e.g. some Windows handles): just read on
        return True


# -- parsing lines --------------------------------------------------------------------------------
class LineParser:
    """Kafka's LineMessageReader rules over bytes; raises ``INVALID_RECORD`` naming the bad line."""

    def __init__(self, props: dict[str, str | None]) -> None:
        enc = lambda k: props[k].encode("utf-8") if props[k] is not None else None  # noqa: E731
        flag = lambda k: str(props[k]).strip().lower() == "true"  # noqa: E731
        self.parse_key, self.parse_headers, self.ignore_error = flag("parse.key"), flag("parse.headers"), \
            flag("ignore.error")
        self.key_sep, self.headers_delim = enc("key.separator"), enc("headers.delimiter")
        self.headers_sep, self.header_key_sep = enc("headers.separator"), enc("headers.key.separator")
        self.null_marker = enc("null.marker")
        self.line_number = 0

    def _null(self, b: bytes) -> bytes | None:
        return None if self.null_marker is not None and b == self.null_marker else b

    def _split(self, line: bytes, sep: bytes, what: str) -> tuple[bytes | None, bytes]:
        head, found, rest = line.partition(sep)
        if found:
            return head, rest
        if self.ignore_error:
            return None, line
        from lakelog.errors import InvalidRecord

        raise InvalidRecord(f"No {what} found on line number {self.line_number}: "
                            f"'{line.decode('utf-8', errors='backslashreplace')}'")

    def parse(self, lines: list[bytes]):
        """An Arrow table of ``key``, ``value`` (and ``headers``) for one batch of lines."""
        import pyarrow as pa

        from lakelog.storage.record_schema import HEADER_TYPE

        keys, values, headers = [], [], []
        for line in lines:
            self.line_number += 1
            rest = line
            if self.parse_headers:
                head, rest = self._split(rest, self.headers_delim, "headers delimiter")
                headers.append(self._headers(head))
            key = None
            if self.parse_key:
                key, rest = self._split(rest, self.key_sep, "key separator")
                key = None if key is None else self._null(key)
            keys.append(key)
            values.append(self._null(rest))
        cols = {"key": pa.array(keys, pa.binary()), "value": pa.array(values, pa.binary())}
        if self.parse_headers:
            cols["headers"] = pa.array(headers, HEADER_TYPE)
        return pa.table(cols)

    def _headers(self, text: bytes | None) -> list[dict] | None:
        if not text:
            return None
        out = []
        for item in text.split(self.headers_sep):
            k, found, v = item.partition(self.header_key_sep)
            if not found:
                from lakelog.errors import InvalidRecord

                raise InvalidRecord(f"No header key separator found in pair '{item.decode(errors='replace')}' "
                                    f"on line number {self.line_number}")
            out.append({"key": k.decode("utf-8", errors="replace"), "value": self._null(v)})
        return out


def properties_from(args: argparse.Namespace) -> dict[str, str | None]:
    given = key_values(args.properties)
    unknown = sorted(set(given) - set(PROPERTIES))
    if unknown:
        args.parser.error(f"unknown --property {', '.join(unknown)}; known: {', '.join(PROPERTIES)}")
    props = {**PROPERTIES, **given}
    if args.key_separator is not None:
        props["parse.key"], props["key.separator"] = "true", args.key_separator
    for k in ("key.separator", "headers.delimiter", "headers.separator", "headers.key.separator"):
        if not props[k]:
            args.parser.error(f"--property {k} must not be empty")
    return props


def run(args: argparse.Namespace) -> int:
    parser = LineParser(properties_from(args))
    sink = open_sink(args)
    ranges: dict[int, list[int]] = {}  # partition -> [first offset, last offset]
    count = commits = 0
    try:
        for lines in read_line_batches(sys.stdin.buffer, args.batch_size, args.timeout / 1000.0):
            for partition, base, n in sink.send(parser.parse(lines)):
                r = ranges.setdefault(partition, [base, base + n - 1])
                r[1] = base + n - 1
            count += len(lines)
            commits += 1
    finally:
        sink.close()
    if args.json:
        print_json({"topic": args.topic, "records": count, "commits": commits,
                    "partitions": [{"partition": p, "first_offset": r[0], "last_offset": r[1]}
                                   for p, r in sorted(ranges.items())]})
    return 0
