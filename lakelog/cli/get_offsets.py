"""``lakelog get-offsets TOPIC --time T``: one ``topic:partition:offset`` line per partition, like kafka-get-offsets.

``--time`` is ``latest`` / ``-1`` (the high watermark, the default),
``earliest`` / ``-2`` (the log start offset) or epoch milliseconds (the first
offset whose timestamp is >= T; timestamps need not be monotonic).

A partition with no record at or after T prints no line -- Kafka's
GetOffsetShell does the same (ListOffsets answers offset -1, which the tool
skips) -- and appears with ``"offset": null`` in ``--json`` output.

The offsets come from the storage root directly, or with ``--bootstrap-server
HOST:PORT`` from a Kafka listener's ListOffsets (confluent-kafka's admin
client), as kafka-get-offsets asks a broker.
"""

from __future__ import annotations

import argparse

from lakelog.cli.global_options import add_topic_argument, open_log
from lakelog.cli.output import print_json
from lakelog.cli.transport import add_transport_options, check_transport


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "get-offsets", help="offsets per partition for a time (kafka-get-offsets)",
        description="Print topic:partition:offset per partition for --time earliest, latest or epoch ms. "
                    "A partition with no record at or after a timestamp prints no line (as in Kafka).")
    add_topic_argument(p)
    p.add_argument("--time", type=time_spec, default="latest", metavar="T",
                   help="earliest (-2), latest (-1, default) or a timestamp in epoch milliseconds")
    p.add_argument("--partitions", type=_partition_list, metavar="P[,P...]",
                   help="only these partitions (default: all)")
    add_transport_options(p, http=False)
    p.set_defaults(func=run)


def time_spec(text: str) -> str | int:
    """``earliest``/``latest`` (or Kafka's -2/-1), or epoch ms >= 0."""
    t = text.strip().lower()
    if t in ("earliest", "-2"):
        return "earliest"
    if t in ("latest", "-1"):
        return "latest"
    try:
        value = int(t)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"malformed time {text!r}: use earliest (-2), latest (-1) or epoch milliseconds") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"unsupported time {value}: use earliest (-2), latest (-1) or a timestamp >= 0")
    return value


def _partition_list(text: str) -> list[int]:
    try:
        return sorted({int(p) for p in text.split(",") if p.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a comma-separated list of partitions, got {text!r}") from None


def run(args: argparse.Namespace) -> int:
    check_transport(args)
    offsets = kafka_offsets(args) if args.bootstrap_server else root_offsets(args)
    if args.json:
        print_json([{"topic": args.topic, "partition": p, "offset": o} for p, o in offsets.items()])
    else:
        for p, o in offsets.items():
            if o is not None:
                print(f"{args.topic}:{p}:{o}")
    return 0


def root_offsets(args: argparse.Namespace) -> dict[int, int | None]:
    """Per partition, the offset ``--time`` names, read from the storage root."""
    from lakelog.reader.log_reader import check_partition, offset_for_timestamp, resolve_offset

    log = open_log(args)
    snap = log.snapshot(args.topic)
    partitions = args.partitions if args.partitions is not None else range(snap.partition_count)
    offsets: dict[int, int | None] = {}
    for p in partitions:
        check_partition(snap, p)
        if isinstance(args.time, int):
            offsets[p] = offset_for_timestamp(log.root, snap, p, args.time)
        else:
            offsets[p] = resolve_offset(log.root, snap, p, args.time)
    return offsets


def kafka_offsets(args: argparse.Namespace) -> dict[int, int | None]:
    """Per partition, the offset ``--time`` names, from a Kafka listener's ListOffsets (-1: none, as Kafka)."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec

    from lakelog.cli.transport import client_config, connect, result, topic_partitions

    conf, recorder = client_config(args)
    admin = AdminClient(conf)
    partitions = topic_partitions(connect(admin, args, recorder), args.topic, args.partitions)
    spec = OffsetSpec.for_timestamp(args.time) if isinstance(args.time, int) else getattr(OffsetSpec, args.time)()
    futures = admin.list_offsets({TopicPartition(args.topic, p): spec for p in partitions})
    found = {tp.partition: result(f).offset for tp, f in futures.items()}
    return {p: (found[p] if found[p] >= 0 else None) for p in partitions}
