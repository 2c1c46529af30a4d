"""``lakelog get-offsets TOPIC --time T``: one ``topic:partition:offset`` line per partition, like kafka-get-offsets.

``--time`` is ``latest`` / ``-1`` (the high watermark, the default),
``earliest`` / ``-2`` (the log start offset) or epoch milliseconds (the first
offset whose timestamp is >= T; timestamps need not be monotonic).

A partition with no record at or after T prints no line -- Kafka's
GetOffsetShell does the same (ListOffsets answers offset -1, which the tool
skips) -- and appears with ``"offset": null`` in ``--json`` output.
"""

from __future__ import annotations

import argparse

from lakelog.cli.global_options import add_topic_argument, open_log
from lakelog.cli.output import print_json


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
    if args.json:
        print_json([{"topic": args.topic, "partition": p, "offset": o} for p, o in offsets.items()])
    else:
        for p, o in offsets.items():
            if o is not None:
                print(f"{args.topic}:{p}:{o}")
    return 0
