"""``lakelog topics create|list|describe|alter|delete``: kafka-topics and kafka-configs.

Each action works on the storage root directly, or with ``--bootstrap-server HOST:PORT`` through a Kafka
listener with confluent-kafka's admin client (CreateTopics, Metadata, ListOffsets, DescribeConfigs,
IncrementalAlterConfigs, CreatePartitions, DeleteTopics), as kafka-topics does.
"""

from __future__ import annotations

import argparse

from lakelog.cli.global_options import add_topic_argument, key_value, key_values, open_log
from lakelog.cli.output import print_json, print_table
from lakelog.cli.transport import add_transport_options, check_transport


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

    for action in sub.choices.values():
        add_transport_options(action, http=False)


def create(args: argparse.Namespace) -> int:
    check_transport(args)
    if args.bootstrap_server:
        return kafka_create(args)
    desc = open_log(args).create_topic(args.name, args.partitions, key_values(args.config))
    if args.json:
        print_json(desc.to_dict())
    else:
        print(f"Created topic {desc.name}.")
    return 0


def list_topics(args: argparse.Namespace) -> int:
    check_transport(args)
    if args.bootstrap_server:
        names = kafka_topic_names(args)
    else:
        names = open_log(args).list_topics(include_internal=args.include_internal)
    if args.json:
        print_json(names)
    else:
        for name in names:
            print(name)
    return 0


def describe(args: argparse.Namespace) -> int:
    check_transport(args)
    if args.bootstrap_server:
        return kafka_describe(args)
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
    check_transport(args)
    if args.bootstrap_server:
        return kafka_alter(args)
    configs = key_values(args.config) if args.config else None
    desc = open_log(args).alter_topic(args.name, configs, args.partitions)
    if args.json:
        print_json(desc.to_dict())
    else:
        print(f"Altered topic {desc.name}: {len(desc.partitions)} partitions, "
              f"configs {','.join(f'{k}={v}' for k, v in sorted(desc.overrides.items())) or '(defaults)'}.")
    return 0


def delete(args: argparse.Namespace) -> int:
    check_transport(args)
    if args.bootstrap_server:
        return kafka_delete(args)
    open_log(args).delete_topic(args.name)
    if args.json:
        print_json({"deleted": args.name})
    else:
        print(f"Deleted topic {args.name}.")
    return 0


# -- over a Kafka listener ------------------------------------------------------------------------
def _admin(args: argparse.Namespace):
    from confluent_kafka.admin import AdminClient

    from lakelog.cli.transport import client_config, connect

    conf, recorder = client_config(args)
    admin = AdminClient(conf)
    return admin, connect(admin, args, recorder)


def kafka_create(args: argparse.Namespace) -> int:
    from confluent_kafka.admin import NewTopic

    from lakelog.cli.transport import result

    admin, _ = _admin(args)
    configs = key_values(args.config)
    result(admin.create_topics([NewTopic(args.name, args.partitions, replication_factor=-1, config=configs)],
                               request_timeout=30)[args.name])
    if args.json:
        print_json({"name": args.name, "partitions": args.partitions, "overrides": configs})
    else:
        print(f"Created topic {args.name}.")
    return 0


def kafka_topic_names(args: argparse.Namespace) -> list[str]:
    _, metadata = _admin(args)
    return sorted(t for t in metadata.topics if args.include_internal or not t.startswith("__"))


def kafka_describe(args: argparse.Namespace) -> int:
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import ConfigResource, ConfigSource, OffsetSpec, ResourceType

    from lakelog.cli.transport import result, topic_partitions

    admin, metadata = _admin(args)
    partitions = topic_partitions(metadata, args.name)
    leaders = {p: metadata.topics[args.name].partitions[p].leader for p in partitions}
    bounds = {}
    for spec in ("earliest", "latest"):
        futures = admin.list_offsets({TopicPartition(args.name, p): getattr(OffsetSpec, spec)() for p in partitions})
        bounds[spec] = {tp.partition: result(f).offset for tp, f in futures.items()}
    entries = result(admin.describe_configs([ConfigResource(ResourceType.TOPIC, args.name)])[
        ConfigResource(ResourceType.TOPIC, args.name)])
    configs = {k: e.value for k, e in sorted(entries.items())}
    overrides = {k: e.value for k, e in sorted(entries.items())
                 if e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value}
    rows = [{"partition": p, "leader": leaders[p], "log_start_offset": bounds["earliest"][p],
             "high_watermark": bounds["latest"][p]} for p in partitions]
    if args.json:
        print_json({"name": args.name, "partitions": rows, "configs": configs, "overrides": overrides})
        return 0
    print(f"Topic: {args.name}\tPartitionCount: {len(partitions)}\tReplicationFactor: 1\t"
          f"Configs: {','.join(f'{k}={v}' for k, v in overrides.items())}")
    print_table(["PARTITION", "LEADER", "LOG-START-OFFSET", "HIGH-WATERMARK"],
                [[r["partition"], r["leader"], r["log_start_offset"], r["high_watermark"]] for r in rows])
    print()
    print_table(["CONFIG", "VALUE", "SOURCE"],
                [[k, v, "TOPIC_CONFIG" if k in overrides else "DEFAULT_CONFIG"] for k, v in configs.items()])
    return 0


def kafka_alter(args: argparse.Namespace) -> int:
    from confluent_kafka.admin import (AlterConfigOpType, ConfigEntry, ConfigResource, NewPartitions,
                                       ResourceType)

    from lakelog.cli.transport import result, topic_partitions

    admin, metadata = _admin(args)
    topic_partitions(metadata, args.name)
    configs = key_values(args.config) if args.config else {}
    if configs:
        resource = ConfigResource(ResourceType.TOPIC, args.name, incremental_configs=[
            ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()])
        result(admin.incremental_alter_configs([resource])[resource])
    if args.partitions is not None:
        result(admin.create_partitions([NewPartitions(args.name, args.partitions)])[args.name])
    if args.json:
        print_json({"name": args.name, "configs": configs, "partitions": args.partitions})
    else:
        print(f"Altered topic {args.name}.")
    return 0


def kafka_delete(args: argparse.Namespace) -> int:
    from lakelog.cli.transport import result, topic_partitions

    admin, metadata = _admin(args)
    topic_partitions(metadata, args.name)
    result(admin.delete_topics([args.name], request_timeout=30)[args.name])
    if args.json:
        print_json({"deleted": args.name})
    else:
        print(f"Deleted topic {args.name}.")
    return 0
