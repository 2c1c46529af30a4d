"""Where ``lakelog groups`` reads groups and writes offsets: a :class:`GroupSource`, one of three.

* :class:`KafkaSource` (``--bootstrap-server``): a Kafka listener through confluent-kafka's admin client, the
  coordinator's live view.
* :class:`FrontSource` (``--url``): a running front's HTTP API, the coordinator's live view (a bearer token is read
  from ``$LAKELOG_TOKEN``).
* :class:`RootSource` (neither): the storage root's ``__consumer_offsets``, the committed offsets and the group
  state the coordinator last saved; members are those of the last completed rebalance.

:func:`open_source` picks one from the command's transport options (:mod:`lakelog.cli.transport`).
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from lakelog.cli.global_options import open_log
from lakelog.cli.transport import check_transport
from lakelog.group.group_records import saved_view

if TYPE_CHECKING:
    from lakelog.log import Log


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
        saved = saved_view(md)
        return GroupView(group, saved["state"], saved["protocol"], saved["generation"], saved["members"], offsets)

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
        self.store().delete_group(group)  # offsets and saved state in one batch; running fronts follow it
        return len(view.offsets)


def _saved_state(md: dict | None) -> str:
    return saved_view(md)["state"]


class FrontSource:
    """A running front's HTTP address (``--url``): the coordinator's live membership, offsets committed through it."""

    live = True

    def __init__(self, args: argparse.Namespace) -> None:
        from lakelog.client.admin import Admin

        self.args = args
        self.admin = Admin(args.url, token=os.environ.get("LAKELOG_TOKEN") or None)
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


NO_OFFSET = -1001  # librdkafka's OFFSET_INVALID: no committed offset


class KafkaSource:
    """A Kafka listener (``--bootstrap-server``, a front's or any broker's), asked as kafka-consumer-groups asks:
    ListGroups, DescribeGroups, OffsetFetch, ListOffsets, OffsetCommit and DeleteGroups through confluent-kafka's
    admin client. The coordinator's live view; offsets committed through it."""

    live = True

    def __init__(self, args: argparse.Namespace) -> None:
        from confluent_kafka.admin import AdminClient

        from lakelog.cli.transport import client_config, connect

        conf, recorder = client_config(args)
        self.admin = AdminClient(conf)
        connect(self.admin, args, recorder)

    def list_groups(self) -> list[tuple[str, str]]:
        from lakelog.cli.transport import result

        listed = result(self.admin.list_consumer_groups(request_timeout=30))
        return sorted((g.group_id, _state(g.state)) for g in listed.valid)

    def describe(self, group: str) -> GroupView | None:
        from confluent_kafka import ConsumerGroupTopicPartitions

        from lakelog.cli.transport import result
        from lakelog.group.group_id import validate_group_id

        validate_group_id(group)
        d = result(self.admin.describe_consumer_groups([group], request_timeout=30)[group])
        committed = result(self.admin.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group)], request_timeout=30)[group])
        offsets = {(tp.topic, tp.partition): tp.offset for tp in committed.topic_partitions or ()
                   if tp.offset != NO_OFFSET}
        state = _state(d.state)
        if state == "Dead" and not offsets:
            return None
        members = [{"member_id": m.member_id, "group_instance_id": m.group_instance_id, "client_id": m.client_id,
                    "assignment": [(tp.topic, tp.partition) for tp in (m.assignment.topic_partitions or ())]}
                   for m in d.members]
        return GroupView(group, state, d.partition_assignor or None, 0, members, offsets)

    def partition_offsets(self, topic: str) -> dict[int, tuple[int, int]]:
        from confluent_kafka import TopicPartition
        from confluent_kafka.admin import OffsetSpec

        from lakelog.cli.transport import result, topic_partitions

        partitions = topic_partitions(self.admin.list_topics(topic, timeout=10), topic)
        bounds: dict[str, dict[int, int]] = {}
        for spec in ("earliest", "latest"):
            futures = self.admin.list_offsets({TopicPartition(topic, p): getattr(OffsetSpec, spec)()
                                               for p in partitions})
            bounds[spec] = {tp.partition: result(f).offset for tp, f in futures.items()}
        return {p: (bounds["earliest"][p], bounds["latest"][p]) for p in partitions}

    def offsets_for_time(self, topic: str, partitions: list[int], ms: int) -> dict[int, int | None]:
        from confluent_kafka import TopicPartition
        from confluent_kafka.admin import OffsetSpec

        from lakelog.cli.transport import result

        futures = self.admin.list_offsets({TopicPartition(topic, p): OffsetSpec.for_timestamp(ms)
                                           for p in partitions})
        found = {tp.partition: result(f).offset for tp, f in futures.items()}
        return {p: (o if o >= 0 else None) for p, o in found.items()}

    def commit(self, group: str, offsets: dict[tuple[str, int], int]) -> None:
        from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

        from lakelog.cli.transport import raise_kafka_error, result

        request = ConsumerGroupTopicPartitions(group, [TopicPartition(t, p, o) for (t, p), o in sorted(offsets.items())])
        answer = result(self.admin.alter_consumer_group_offsets([request], request_timeout=30)[group])
        for tp in answer.topic_partitions or ():
            if tp.error is not None:
                raise_kafka_error(tp.error)

    def delete(self, group: str) -> int:
        from lakelog.cli.transport import result
        from lakelog.errors import GroupIdNotFound

        view = self.describe(group)
        if view is None:
            raise GroupIdNotFound(f"group {group} does not exist")
        result(self.admin.delete_consumer_groups([group], request_timeout=30)[group])
        return len(view.offsets)


def _state(state) -> str:
    """confluent-kafka's ConsumerGroupState as Kafka's tools print it (``Stable``, ``Empty``, ...)."""
    name = getattr(state, "name", str(state))
    return {"PREPARING_REBALANCING": "PreparingRebalance", "COMPLETING_REBALANCING": "CompletingRebalance",
            "STABLE": "Stable", "DEAD": "Dead", "EMPTY": "Empty"}.get(name, name.title())


def open_source(args: argparse.Namespace) -> GroupSource:
    check_transport(args)
    if args.bootstrap_server:
        return KafkaSource(args)
    return FrontSource(args) if args.url else RootSource(args)
