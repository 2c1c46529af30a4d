"""``lakelog topics create|list|describe|alter|delete``: kafka-topics and kafka-configs for a storage root."""

from __future__ import annotations

import argparse

from lakelog.cli.global_options import add_topic_argument, key_value, key_values, open_log
from lakelog.cli.output import print_json, print_table


def register(subparsers) -> None:
    topics = subparsers.add_parser("topics", help="create, list, describe, alter and delete topics",
                                   description="Topic administration (like kafka-topics / kafka-configs).")
    sub = topics.add_subparsers(dest="topics_command", metavar="ACTION", required=True)

    p = sub.add_parser("create", help="create a topic", description="Create a topic (a Delta table).")
    add_topic_argument(p, "name", "NAME")
    p.add_argument("--partitions", type=int, default=1, metavar="N", help="partition count (default 1)")
    p.add_argument("--config", action="append", type=key_value, default=[], metavar="KEY=VALUE",
                   help="topic config (Kafka's keys, e.g. retention.ms=86400000), repeatable")
    p.set_defaults(func=create)

    p = sub.add_parser("list", help="list topics", description="List topics, one name per line.")
    p.add_argument("--include-internal", action="store_true", help="also list internal topics (__...)")
    p.set_defaults(func=list_topics)

    p = sub.add_parser("describe", help="partitions, offsets, segments and configs of a topic",
                       description="Per partition: log start offset, high watermark, segments, records, bytes; "
                                   "then every config with its value and source.")
    add_topic_argument(p, "name", "NAME")
    p.set_defaults(func=describe)

    p = sub.add_parser("alter", help="change configs or increase the partition count",
                       description="Set topic configs and/or increase the partition count (never decrease).")
    add_topic_argument(p, "name", "NAME")
    p.add_argument("--config", action="append", type=key_value, default=[], metavar="KEY=VALUE",
                   help="topic config to set, repeatable")
    p.add_argument("--partitions", type=int, metavar="N", help="new partition count (increase only)")
    p.set_defaults(func=alter)

    p = sub.add_parser("delete", help="delete a topic and all its data", description="Delete a topic and its data.")
    add_topic_argument(p, "name", "NAME")
    p.set_defaults(func=delete)


def create(args: argparse.Namespace) -> int:
    desc = open_log(args).create_topic(args.name, args.partitions, key_values(args.config))
    if args.json:
        print_json(desc.to_dict())
    else:
        print(f"Created topic {desc.name}.")
    return 0


def list_topics(args: argparse.Namespace) -> int:
    names = open_log(args).list_topics(include_internal=args.include_internal)
    if args.json:
        print_json(names)
    else:
        for name in names:
            print(name)
    return 0


def describe(args: argparse.Namespace) -> int:
    desc = open_log(args).describe_topic(args.name)
    if args.json:
        print_json(desc.to_dict())
        return 0
    print_description(desc)
    return 0


def print_description(desc) -> None:
    """Kafka-style summary line, a partition table, then every config with its source."""
    overrides = ",".join(f"{k}={v}" for k, v in sorted(desc.overrides.items()))
    print(f"Topic: {desc.name}\tPartitionCount: {len(desc.partitions)}\tVersion: {desc.version}\t"
          f"Configs: {overrides}")
    print_table(["PARTITION", "LOG-START-OFFSET", "HIGH-WATERMARK", "SEGMENTS", "RECORDS", "BYTES"],
                [[p.partition, p.log_start_offset, p.high_watermark, p.segments, p.records, p.bytes]
                 for p in desc.partitions])
    print()
    print_table(["CONFIG", "VALUE", "SOURCE"],
                [[k, v, "TOPIC_CONFIG" if k in desc.overrides else "DEFAULT_CONFIG"]
                 for k, v in sorted(desc.configs.items())])


def alter(args: argparse.Namespace) -> int:
    configs = key_values(args.config) if args.config else None
    desc = open_log(args).alter_topic(args.name, configs, args.partitions)
    if args.json:
        print_json(desc.to_dict())
    else:
        print(f"Altered topic {desc.name}: {len(desc.partitions)} partitions, "
              f"configs {','.join(f'{k}={v}' for k, v in sorted(desc.overrides.items())) or '(defaults)'}.")
    return 0


def delete(args: argparse.Namespace) -> int:
    open_log(args).delete_topic(args.name)
    if args.json:
        print_json({"deleted": args.name})
    else:
        print(f"Deleted topic {args.name}.")
    return 0
