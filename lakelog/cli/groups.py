"""``lakelog groups list|describe|delete|reset-offsets``: kafka-consumer-groups for a root or a running front.

Three sources, chosen per call (:mod:`lakelog.cli.group_sources`, by :mod:`lakelog.cli.transport`'s options):

* ``--bootstrap-server HOST:PORT`` asks a Kafka listener, as kafka-consumer-groups
  does (ListGroups, DescribeGroups, OffsetFetch, ListOffsets, OffsetCommit,
  DeleteGroups through confluent-kafka's admin client): the coordinator's live view.
* ``--url URL`` asks a running front's HTTP address (``lakelog serve``): membership and
  assignments are the coordinator's live view; offsets are committed through
  it (a bearer token is read from ``$LAKELOG_TOKEN``).
* Without either, the command works on the storage root directly: committed
  offsets and the group metadata the coordinator last saved, both from
  ``__consumer_offsets`` (:class:`~lakelog.group.consumer_offsets.OffsetStore`).
  Members shown there are those of the last completed rebalance: only a
  front knows whether they are still alive.

``describe`` shows the group's state, then per partition the committed offset,
the high watermark (LOG-END-OFFSET) and the lag, with the member that owns the
partition, then the members.  ``reset-offsets`` prints the plan and commits
nothing unless ``--execute`` is given (Kafka's dry run), and refuses while the
group has members, as Kafka requires an inactive group.  New offsets are
clamped to [log start offset, high watermark] as Kafka clamps them.
Read-only commands write nothing (not even ``__consumer_offsets``).
"""

from __future__ import annotations

import argparse
import datetime

from lakelog.cli.global_options import non_negative_int
from lakelog.cli.group_sources import GroupSource, GroupView, open_source
from lakelog.cli.output import print_json, print_table
from lakelog.cli.transport import add_transport_options


def register(subparsers) -> None:
    groups = subparsers.add_parser(
        "groups", help="list, describe, delete consumer groups and reset their offsets (kafka-consumer-groups)",
        description="Consumer-group administration (like kafka-consumer-groups). With --bootstrap-server HOST:PORT "
                    "(a Kafka listener) or --url URL (a front's HTTP address) the live coordinator is asked; "
                    "otherwise the storage root is read directly.")
    sub = groups.add_subparsers(dest="groups_command", metavar="ACTION", required=True)

    def parser(name: str, help_: str, description: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_, description=description)
        add_transport_options(p, http=True)
        return p

    p = parser("list", "list consumer groups", "List the groups with members or committed offsets.")
    p.add_argument("--state", action="store_true", help="also show each group's state")
    p.set_defaults(func=list_groups)

    p = parser("describe", "members, assignment, committed offsets and lag of a group",
               "The group's state and members, and per partition: committed offset, high watermark "
               "(LOG-END-OFFSET), lag and owner.")
    p.add_argument("group", metavar="GROUP")
    p.set_defaults(func=describe)

    p = parser("delete", "delete an inactive group and its committed offsets",
               "Delete a group's committed offsets and saved metadata (refused while it has members).")
    p.add_argument("group", metavar="GROUP")
    p.set_defaults(func=delete)

    p = parser("reset-offsets", "plan (and with --execute commit) new offsets for an inactive group",
               "Compute new committed offsets for an inactive group; a dry run unless --execute.")
    p.add_argument("group", metavar="GROUP")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--topic", action="append", type=_topic_spec, metavar="TOPIC[:P,P...]",
                       help="a topic, optionally with partitions (orders:0,2); repeatable")
    which.add_argument("--all-topics", action="store_true", help="every topic the group has committed offsets for")
    spec = p.add_mutually_exclusive_group(required=True)
    spec.add_argument("--to-earliest", action="store_true", help="the log start offset")
    spec.add_argument("--to-latest", action="store_true", help="the high watermark")
    spec.add_argument("--to-datetime", type=_datetime_ms, metavar="ISO",
                      help="the first offset with timestamp >= ISO (e.g. 2024-05-01T12:00:00Z; no zone = local time)")
    spec.add_argument("--to-offset", type=non_negative_int, metavar="O", help="offset O in every partition")
    spec.add_argument("--shift-by", type=int, metavar="N", help="the committed offset plus N (may be negative)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--execute", action="store_true", help="commit the new offsets")
    mode.add_argument("--dry-run", action="store_true", help="only print the plan (the default)")
    p.set_defaults(func=reset_offsets)


def _topic_spec(text: str) -> tuple[str, list[int] | None]:
    topic, sep, parts = text.partition(":")
    if not topic:
        raise argparse.ArgumentTypeError(f"expected TOPIC or TOPIC:P,P..., got {text!r}")
    if not sep:
        return topic, None
    try:
        partitions = sorted({int(p) for p in parts.split(",") if p.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected TOPIC:P,P... with partition numbers, got {text!r}") from None
    if not partitions or partitions[0] < 0:
        raise argparse.ArgumentTypeError(f"expected partition numbers >= 0 after ':', got {text!r}")
    return topic, partitions


def _datetime_ms(text: str) -> int:
    """ISO 8601 date-time (``Z`` or an offset for a zone; none = local time, as Kafka) → epoch ms."""
    try:
        dt = datetime.datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"malformed date-time {text!r}: use ISO 8601, e.g. "
                                         "2024-05-01T12:00:00.000Z") from None
    if dt.tzinfo is None:
        dt = dt.astimezone()  # local time
    return int(dt.timestamp() * 1000)


def _require(view: GroupView | None, group: str) -> GroupView:
    if view is None:
        from lakelog.errors import GroupIdNotFound

        raise GroupIdNotFound(f"consumer group {group} does not exist")
    return view


# -- commands -------------------------------------------------------------------------------------
def list_groups(args: argparse.Namespace) -> int:
    groups = open_source(args).list_groups()
    if args.json:
        print_json([{"group": g, "state": s} for g, s in groups])
    elif args.state:
        print_table(["GROUP", "STATE"], groups)
    else:
        for g, _ in groups:
            print(g)
    return 0


def describe_rows(source: GroupSource, view: GroupView) -> list[dict]:
    """Per partition (committed or assigned): committed offset, high watermark, lag and owner."""
    owners = view.owners()
    rows = []
    hws: dict[str, dict[int, tuple[int, int]] | None] = {}
    for topic, partition in sorted(set(view.offsets) | set(owners)):
        if topic not in hws:
            from lakelog.errors import UnknownTopicOrPartition

            try:
                hws[topic] = source.partition_offsets(topic)
            except UnknownTopicOrPartition:
                hws[topic] = None  # deleted since the commit
        hw = (hws[topic] or {}).get(partition, (None, None))[1]
        current = view.offsets.get((topic, partition))
        owner = owners.get((topic, partition))
        rows.append({"topic": topic, "partition": partition, "current_offset": current, "log_end_offset": hw,
                     "lag": max(hw - current, 0) if hw is not None and current is not None else None,
                     "member_id": owner["member_id"] if owner else None,
                     "group_instance_id": owner["group_instance_id"] if owner else None,
                     "client_id": owner["client_id"] if owner else None})
    return rows


def describe(args: argparse.Namespace) -> int:
    source = open_source(args)
    view = _require(source.describe(args.group), args.group)
    rows = describe_rows(source, view)
    if args.json:
        print_json({"group": view.group, "state": view.state, "protocol": view.protocol,
                    "generation": view.generation, "source": "front" if source.live else "storage",
                    "members": [{**m, "assignment": [{"topic": t, "partition": p} for t, p in m["assignment"]]}
                                for m in view.members],
                    "partitions": rows})
        return 0
    print_table(["GROUP", "STATE", "ASSIGNMENT-STRATEGY", "GENERATION", "#MEMBERS"],
                [[view.group, view.state, view.protocol or "", view.generation, len(view.members)]])
    print()
    if not view.members:
        print(f"Consumer group '{view.group}' has no active members.")
        print()
    print_table(["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID",
                 "CLIENT-ID"],
                [[view.group, r["topic"], r["partition"], _dash(r["current_offset"]), _dash(r["log_end_offset"]),
                  _dash(r["lag"]), _dash(r["member_id"]), _dash(r["client_id"])] for r in rows])
    if view.members:
        print()
        print_table(["GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"],
                    [[view.group, m["member_id"], _dash(m["group_instance_id"]), m["client_id"],
                      len(m["assignment"]), ",".join(f"{t}:{p}" for t, p in sorted(m["assignment"])) or "-"]
                     for m in view.members])
        if not source.live:
            print("\n(members as of the coordinator's last saved rebalance; --bootstrap-server asks a running front)")
    return 0


def _dash(value) -> object:
    return "-" if value is None else value


def delete(args: argparse.Namespace) -> int:
    deleted = open_source(args).delete(args.group)
    if args.json:
        print_json({"group": args.group, "deleted_offsets": deleted})
    else:
        print(f"Deletion of requested consumer groups ('{args.group}') was successful ({deleted} committed "
              f"offsets deleted).")
    return 0


def plan_reset(source: GroupSource, view: GroupView, args: argparse.Namespace) -> dict[tuple[str, int], int]:
    """New offset per partition, clamped to [log start offset, high watermark] (Kafka's rule)."""
    from lakelog.errors import InvalidRequest, UnknownTopicOrPartition

    if args.all_topics:  # Kafka: the partitions the group has committed offsets for
        specs: dict[str, list[int] | None] = {}
        for t, p in sorted(view.offsets):
            specs.setdefault(t, []).append(p)
        if not specs:
            raise InvalidRequest(f"group {view.group} has no committed offsets: name the topics with --topic")
    else:
        specs = {}
        for topic, parts in args.topic:
            if parts is None or (topic in specs and specs[topic] is None):
                specs[topic] = None  # every partition
            else:
                specs[topic] = sorted(set(specs.get(topic) or []) | set(parts))
    plan: dict[tuple[str, int], int] = {}
    for topic, parts in sorted(specs.items()):
        bounds = source.partition_offsets(topic)
        partitions = sorted(bounds) if parts is None else parts
        for p in partitions:
            if p not in bounds:
                raise UnknownTopicOrPartition(f"partition {p} of topic {topic} does not exist "
                                              f"(the topic has {len(bounds)} partitions)")
        by_time = source.offsets_for_time(topic, partitions, args.to_datetime) if args.to_datetime is not None \
            else {}
        for p in partitions:
            lso, hw = bounds[p]
            if args.to_earliest:
                target = lso
            elif args.to_latest:
                target = hw
            elif args.to_datetime is not None:
                found = by_time.get(p)
                target = hw if found is None else found
            elif args.to_offset is not None:
                target = args.to_offset
            else:
                current = view.offsets.get((topic, p))
                if current is None:
                    raise InvalidRequest(f"group {view.group} has no committed offset for {topic}-{p} to shift "
                                         f"from; reset it with --to-earliest, --to-latest or --to-offset")
                target = current + args.shift_by
            plan[(topic, p)] = min(max(target, lso), hw)
    return plan


def reset_offsets(args: argparse.Namespace) -> int:
    from lakelog.errors import NonEmptyGroup

    source = open_source(args)
    view = source.describe(args.group) or GroupView(args.group, "Dead")  # an unknown group may be reset (Kafka)
    if view.members:
        raise NonEmptyGroup(f"Assignments can only be reset if the group '{args.group}' is inactive, but the "
                            f"current state is {view.state} with {len(view.members)} members"
                            + ("" if source.live else " (in the coordinator's last saved state)"))
    plan = plan_reset(source, view, args)
    if args.execute and plan:
        source.commit(args.group, plan)
    rows = [{"topic": t, "partition": p, "current_offset": view.offsets.get((t, p)), "new_offset": o}
            for (t, p), o in sorted(plan.items())]
    if args.json:
        print_json({"group": args.group, "executed": bool(args.execute), "offsets": rows})
    else:
        print_table(["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"],
                    [[args.group, r["topic"], r["partition"], _dash(r["current_offset"]), r["new_offset"]]
                     for r in rows])
    if not args.execute:
        import sys

        sys.stderr.write("Dry run: nothing was committed. Add --execute to commit these offsets.\n")
    return 0
