"""The options every command takes: the storage root, its storage options, and ``--json``.

    --root ROOT                  a local directory or s3://bucket/prefix
                                 (default: $LAKELOG_ROOT, else ./lakelog-data)
    --storage-option KEY=VALUE   delta-rs / object_store option, repeatable
                                 (S3 endpoint and credentials otherwise come from AWS_* env vars)
    --json                       machine-readable output

They are accepted before or after the command name (``lakelog --json topics
list`` and ``lakelog topics list --json``): the top-level parser holds the
defaults, sub-parsers only set what is given on their part of the line.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Iterable

if TYPE_CHECKING:
    from lakelog.log import Log


def add_global_options(parser: argparse.ArgumentParser, *, top_level: bool) -> None:
    """Add the global options; ``top_level`` parsers hold the defaults, the others suppress theirs."""
    def default(value):
        return value if top_level else argparse.SUPPRESS

    group = parser.add_argument_group("global options")
    group.add_argument("--root", default=default(None), metavar="ROOT",
                       help="storage root: a local directory or s3://bucket/prefix "
                            "(default: $LAKELOG_ROOT, else ./lakelog-data)")
    group.add_argument("--storage-option", dest="storage_options", action="append", type=key_value,
                       default=default([]), metavar="KEY=VALUE",
                       help="storage option for delta-rs/object_store, e.g. aws_endpoint_url=http://..., "
                            "repeatable; overrides the AWS_* environment variables")
    group.add_argument("--json", action="store_true", default=default(False),
                       help="machine-readable JSON output")


def add_topic_argument(parser: argparse.ArgumentParser, dest: str = "topic", metavar: str = "TOPIC") -> None:
    """The topic, positionally or as Kafka's tools spell it (``--topic T``); :func:`resolve_topic` merges them."""
    parser.add_argument(dest, metavar=metavar, nargs="?", default=None)
    parser.add_argument("--topic", dest=f"{dest}_flag", metavar="TOPIC", default=None,
                        help=f"the topic, as Kafka's tools spell it (same as {metavar})")


def resolve_topic(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Fold ``--topic`` into the positional of :func:`add_topic_argument`; one of them is required."""
    for dest in ("topic", "name"):
        if not hasattr(args, f"{dest}_flag"):
            continue
        flag, value = getattr(args, f"{dest}_flag"), getattr(args, dest)
        if flag is not None and value is not None and flag != value:
            parser.error(f"the topic is given twice, as {value!r} and --topic {flag!r}")
        if flag is None and value is None:
            parser.error("a topic is required: TOPIC or --topic TOPIC")
        setattr(args, dest, value if value is not None else flag)


def int_at_least(minimum: int):
    """argparse type for an integer >= ``minimum``."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {value}")
        return value

    return parse


positive_int = int_at_least(1)
non_negative_int = int_at_least(0)


def key_value(text: str) -> tuple[str, str]:
    """argparse type for ``KEY=VALUE`` (the value may itself contain ``=``)."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value


def key_values(items: Iterable[str | tuple[str, str]] | None) -> dict[str, str]:
    """Repeated ``KEY=VALUE`` options as a dict (the last one of a key wins)."""
    out: dict[str, str] = {}
    for item in items or ():
        k, v = item if isinstance(item, tuple) else key_value(item)
        out[k] = v
    return out


def open_log(args: argparse.Namespace) -> "Log":
    """The :class:`~lakelog.log.Log` the command line points at."""
    from lakelog.log import Log

    return Log(args.root, storage_options=key_values(args.storage_options))
