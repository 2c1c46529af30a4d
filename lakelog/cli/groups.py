"""``lakelog groups list|describe|delete|reset-offsets``: kafka-consumer-groups for a root or a running front.

Two sources, chosen per call:

* ``--bootstrap URL`` asks a running front (``lakelog serve``): membership and
  assignments are the coordinator's live view; offsets are committed through
  it (a bearer token is read from ``$LAKELOG_TOKEN``).
* Without it, the command works on the storage root directly: committed
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
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from lakelog.cli.global_options import bootstrap_url, non_negative_int, open_log
from lakelog.cli.output import print_json, print_table

if TYPE_CHECKING:
    from lakelog.log import Log


def register(subparsers) -> None:
    groups = subparsers.add_parser(
        "groups", help="list, describe, delete consumer groups and reset their offsets (kafka-consumer-groups)",
        description="Consumer-group administration (like kafka-consumer-groups). With --bootstrap URL the live "
                    "coordinator of a running front is asked; otherwise the storage root is read directly.")
    sub = groups.add_subparsers(dest="groups_command", metavar="ACTION", required=True)

    def parser(name: str, help_: str, description: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_, description=description)
        p.add_argument("--bootstrap", "--bootstrap-server", dest="bootstrap", type=bootstrap_url, metavar="URL",
                       help="ask a running front (lakelog serve) at URL instead of reading the root; "
                            "a bearer token is read from $LAKELOG_TOKEN")
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


# -- what a source answers ----------------------------------------------------------------------
@dataclass
class GroupView:
    """One group as a source sees it; ``offsets`` maps (topic, partition) to the committed offset."""

    group: str
    state: str
    protocol: str | None = None
    generation: int = 0
    members: list[dict] = field(default_factory=list)  # member_id, group_instance_id, client_id, assignment
    offsets: dict[tuple[str, int], int] = field(default_factory=dict)

    def owners(self) -> dict[tuple[str, int], dict]:
        return {(a[0], a[1]): m for m in self.members for a in m["assignment"]}


class GroupSource(Protocol):
    """Where the command reads groups and writes offsets: the storage root or a front."""

    live: bool  # True: membership is the coordinator's live view

    def list_groups(self) -> list[tuple[str, str]]: ...

    def describe(self, group: str) -> GroupView | None: ...

    def partition_offsets(self, topic: str) -> dict[int, tuple[int, int]]: ...  # partition -> (lso, hw)

    def offsets_for_time(self, topic: str, partitions: list[int], ms: int) -> dict[int, int | None]: ...

    def commit(self, group: str, offsets: dict[tuple[str, int], int]) -> None: ...

    def delete(self, group: str) -> int: ...


class RootSource:
    """The storage root: ``__consumer_offsets`` read with :class:`OffsetStore` (created only to write)."""

    live = False

    def __init__(self, args: argparse.Namespace) -> None:
        self.log: "Log" = open_log(args)
        self._store = None

    def store(self, create: bool = False):
        from lakelog.group.consumer_offsets import OFFSETS_TOPIC, OffsetStore

        if self._store is None and (create or self.log.catalog.exists(OFFSETS_TOPIC)):
            self._store = OffsetStore(self.log)
        return self._store

    def list_groups(self) -> list[tuple[str, str]]:
        store = self.store()
        if store is None:
            return []
        saved = store.load_groups(refresh=False)  # the store read the topic when it was opened
        names = set(store.list_groups(refresh=False)) | set(saved)
        return sorted((g, _saved_state(saved.get(g))) for g in names)

    def describe(self, group: str) -> GroupView | None:
        from lakelog.group.group_id import validate_group_id

        validate_group_id(group)
        store = self.store()
        if store is None:
            return None
        md = store.load_groups(refresh=False).get(group)
        offsets = {(e.topic, e.partition): e.offset for e in store.fetch(group, refresh=False)}
        if md is None and not offsets:
            return None
        view = GroupView(group, _saved_state(md), offsets=offsets)
        if md:
            view.protocol, view.generation = md.get("protocol"), int(md.get("generation", 0))
            view.members = [{"member_id": m["member_id"], "group_instance_id": m.get("group_instance_id"),
                             "client_id": m.get("client_id", ""), "assignment": [tuple(a) for a in m["assignment"]]}
                            for m in md.get("members", [])]
        return view

    def partition_offsets(self, topic: str) -> dict[int, tuple[int, int]]:
        snap = self.log.snapshot(topic)
        return {p: (snap.log_start_offset(p), snap.high_watermark(p)) for p in range(snap.partition_count)}

    def offsets_for_time(self, topic: str, partitions: list[int], ms: int) -> dict[int, int | None]:
        return self.log.offsets_for_times(topic, {p: ms for p in partitions})

    def commit(self, group: str, offsets: dict[tuple[str, int], int]) -> None:
        self.store(create=True).commit(group, [(t, p, o, None) for (t, p), o in sorted(offsets.items())])

    def delete(self, group: str) -> int:
        from lakelog.errors import GroupIdNotFound, NonEmptyGroup

        view = self.describe(group)
        if view is None:
            raise GroupIdNotFound(f"group {group} does not exist under {self.log.root.uri}")
        if view.members:
            raise NonEmptyGroup(f"group {group} still has {len(view.members)} members in the coordinator's "
                                f"saved state; stop them (a running front then records the group as empty)")
        store = self.store()
        deleted = store.delete_group(group)
        if group in store.load_groups(refresh=False):
            store.save_group(group, None)
        return deleted


def _saved_state(md: dict | None) -> str:
    return "Stable" if md and md.get("members") else "Empty"


class FrontSource:
    """A running front: the coordinator's live membership, offsets committed through it."""

    live = True

    def __init__(self, args: argparse.Namespace) -> None:
        from lakelog.client.admin import Admin

        self.args = args
        self.admin = Admin(args.bootstrap, token=os.environ.get("LAKELOG_TOKEN") or None)
        self._log = None

    def list_groups(self) -> list[tuple[str, str]]:
        out = []
        for g in self.admin.list_groups():
            view = self.describe(g)
            out.append((g, view.state if view else "Dead"))
        return out

    def describe(self, group: str) -> GroupView | None:
        from lakelog.errors import GroupIdNotFound

        try:
            d = self.admin.describe_group(group)
        except GroupIdNotFound:
            return None
        members = [{"member_id": m["member_id"], "group_instance_id": m["group_instance_id"],
                    "client_id": m["client_id"], "assignment": [(a["topic"], a["partition"]) for a in m["assignment"]]}
                   for m in d["members"]]
        return GroupView(group, d["state"], d["protocol"], d["generation"], members,
                         {(o["topic"], o["partition"]): o["offset"] for o in d["offsets"]})

    def partition_offsets(self, topic: str) -> dict[int, tuple[int, int]]:
        d = self.admin.describe_topic(topic)
        return {p["partition"]: (p["log_start_offset"], p["high_watermark"]) for p in d["partitions"]}

    def offsets_for_time(self, topic: str, partitions: list[int], ms: int) -> dict[int, int | None]:
        # timestamps are looked up in storage, as the Consumer reads records: the root is the front's
        if self._log is None:
            from lakelog.cli.global_options import key_values
            from lakelog.log import Log

            root = self.args.root or self.admin.transport.json("GET", "/v1/health")["root"]
            self._log = Log(root, storage_options=key_values(self.args.storage_options))
        return self._log.offsets_for_times(topic, {p: ms for p in partitions})

    def commit(self, group: str, offsets: dict[tuple[str, int], int]) -> None:
        self.admin.commit_offsets(group, [(t, p, o) for (t, p), o in sorted(offsets.items())])

    def delete(self, group: str) -> int:
        from lakelog.errors import GroupIdNotFound

        if self.describe(group) is None:
            raise GroupIdNotFound(f"group {group} does not exist")
        return self.admin.delete_group(group)


def open_source(args: argparse.Namespace) -> GroupSource:
    return FrontSource(args) if getattr(args, "bootstrap", None) else RootSource(args)


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
            print("\n(members as of the coordinator's last saved rebalance; --bootstrap URL asks a running front)")
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
