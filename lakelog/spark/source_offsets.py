"""Where a Spark read starts and ends: the source's offset specs resolved against topic snapshots.

A :class:`TopicView` holds the :class:`~lakelog.storage.topic_snapshot.TopicSnapshot`
of every subscribed topic taken at planning time; offsets are resolved against
it only, so a plan never reaches past the high watermark it saw.  Offsets are
keyed by ``(topic, partition)`` and travel in Spark's checkpoint as the Kafka
source's JSON, ``{"orders": {"0": 42, "1": 17}}``.

Also here: admission control for micro-batches (``maxOffsetsPerTrigger``
prorated over partitions by lag, as the Kafka source does, but with the total
bounded exactly).  No Spark; not thread-safe (one view per planner).
"""

from __future__ import annotations

import math
from typing import Iterable, Mapping

from lakelog.storage.catalog import Catalog
from lakelog.errors import OffsetOutOfRange, UnknownTopicOrPartition
from lakelog.reader.log_reader import offset_for_timestamp
from lakelog.spark.source_options import (EARLIEST, LATEST, Earliest, GlobalTimestamp, InvalidSourceOption, Latest,
                                           OffsetSpec, SpecificOffsets, SpecificTimestamps, Subscription, display)
from lakelog.storage.storage_root import StorageRoot
from lakelog.storage.topic_name import validate_topic_name
from lakelog.storage.topic_snapshot import TopicSnapshot, advance, load_snapshot

TopicPartition = tuple[str, int]
Offsets = dict[TopicPartition, int]

DATA_LOSS_HINT_TRUE = ("Some data may have been lost because it is not available in lakelog any more: it was "
                       "removed by retention or delete-records, or the topic was deleted, before it was processed. "
                       "If you don't want the query to fail in such cases, set the source option "
                       "\"failOnDataLoss\" to \"false\".")
DATA_LOSS_HINT_FALSE = ("Some data may have been lost because it is not available in lakelog any more; continuing "
                        "from the log start offset because \"failOnDataLoss\" is \"false\".")


class TopicView:
    """Snapshots of the subscribed topics; :meth:`refresh` advances them to the latest commits."""

    def __init__(self, root: StorageRoot, subscription: Subscription) -> None:
        self.root = root
        self.subscription = subscription
        self.snapshots: dict[str, TopicSnapshot] = {}

    def topics(self) -> list[str]:
        sub = self.subscription
        if sub.kind == "subscribePattern":
            return [t for t in Catalog(self.root).list() if sub.matches(t)]
        if sub.kind == "assign":
            return [t for t, _ in sub.assignment]
        return list(sub.topics)

    def refresh(self) -> "TopicView":
        """Load or advance every subscribed topic; unknown topics of subscribe/assign fail."""
        wanted = self.topics()
        for topic in wanted:
            snap = self.snapshots.get(topic)
            if snap is None:
                validate_topic_name(topic)
                snap = load_snapshot(self.root, topic)
            else:
                snap = advance(self.root, snap)
            if snap.version < 0:
                if self.subscription.kind == "subscribePattern":
                    continue  # deleted between listing and loading
                option = "assign" if self.subscription.kind == "assign" else "subscribe"
                raise UnknownTopicOrPartition(f"topic {topic} (option '{option}') does not exist under "
                                              f"{self.root.uri}")
            self.snapshots[topic] = snap
        for gone in set(self.snapshots) - set(wanted):
            del self.snapshots[gone]
        return self

    def partitions(self) -> list[TopicPartition]:
        """Subscribed (topic, partition) pairs in order; assigned partitions must exist."""
        out: list[TopicPartition] = []
        if self.subscription.kind == "assign":
            for topic, parts in self.subscription.assignment:
                snap = self.snapshots[topic]
                for p in parts:
                    if p >= snap.partition_count:
                        raise UnknownTopicOrPartition(
                            f"partition {p} of topic {topic} (option 'assign') does not exist: the topic has "
                            f"{snap.partition_count} partitions")
                    out.append((topic, p))
            return out
        for topic in sorted(self.snapshots):
            out.extend((topic, p) for p in range(self.snapshots[topic].partition_count))
        return out

    def high_watermark(self, tp: TopicPartition) -> int:
        return self.snapshots[tp[0]].high_watermark(tp[1])

    def log_start_offset(self, tp: TopicPartition) -> int:
        return self.snapshots[tp[0]].log_start_offset(tp[1])

    def latest(self, tps: Iterable[TopicPartition]) -> Offsets:
        return {tp: self.high_watermark(tp) for tp in tps}

    def offset_for_timestamp(self, tp: TopicPartition, ts_ms: int) -> int | None:
        return offset_for_timestamp(self.root, self.snapshots[tp[0]], tp[1], ts_ms)


def _check_covers(option: str, specified: Iterable[TopicPartition], tps: list[TopicPartition]) -> None:
    spec, assigned = set(specified), set(tps)
    if spec != assigned:
        fmt = lambda s: "{" + ", ".join(f"{t}-{p}" for t, p in sorted(s)) + "}"  # noqa: E731
        raise InvalidSourceOption(option, f"If {display(option)} contains specific offsets, you must specify all "
                                          f"topic partitions. Use -1 for latest, -2 for earliest. Specified: "
                                          f"{fmt(spec)} Assigned: {fmt(assigned)}")


def resolve_starting(view: TopicView, spec: OffsetSpec, tps: list[TopicPartition], *,
                     strategy: str = "error", covers: list[TopicPartition] | None = None) -> Offsets:
    """Starting offsets for ``tps`` (may lie below the log start: see :func:`check_data_loss`).

    A spec naming partitions must name every partition of ``covers`` (default ``tps``), as the Kafka source
    requires of all subscribed partitions -- also when only some of them (those a consumer group has no
    committed offset for) need resolving.
    """
    covers = tps if covers is None else covers
    if isinstance(spec, Earliest):
        return {tp: view.log_start_offset(tp) for tp in tps}
    if isinstance(spec, Latest):
        return view.latest(tps)
    if isinstance(spec, SpecificOffsets):
        offsets = spec.as_dict()
        _check_covers("startingoffsets", offsets, covers)
        return {tp: view.log_start_offset(tp) if offsets[tp] == EARLIEST
                else view.high_watermark(tp) if offsets[tp] == LATEST else offsets[tp] for tp in tps}
    if isinstance(spec, GlobalTimestamp):
        ts_option, stamps = "startingtimestamp", {tp: spec.timestamp_ms for tp in tps}
    else:
        ts_option = "startingoffsetsbytimestamp"
        wanted = set(tps)
        stamps = {tp: ts for tp, ts in _covered(ts_option, spec, covers).items() if tp in wanted}
    out = {}
    for tp, ts in stamps.items():
        found = view.offset_for_timestamp(tp, ts)
        if found is None:
            if strategy == "latest":
                found = view.high_watermark(tp)
            else:
                raise InvalidSourceOption(ts_option, f"No offset matched from request of topic-partition {tp[0]}-"
                                                     f"{tp[1]} and timestamp {ts} (option '{display(ts_option)}'); "
                                                     f"set 'startingOffsetsByTimestampStrategy' to 'latest' to "
                                                     f"start from the latest offset instead")
        out[tp] = found
    return out


def _covered(option: str, spec: SpecificTimestamps, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
    stamps = spec.as_dict()
    _check_covers(option, stamps, tps)
    return stamps


def resolve_ending(view: TopicView, spec: OffsetSpec, tps: list[TopicPartition]) -> Offsets:
    """Exclusive ending offsets per partition, never past the high watermark of the view."""
    if isinstance(spec, Latest):
        return view.latest(tps)
    if isinstance(spec, SpecificOffsets):
        _check_covers("endingoffsets", spec.as_dict(), tps)
        out = {}
        for tp, o in spec.as_dict().items():
            hw = view.high_watermark(tp)
            if o == LATEST:
                o = hw
            elif o > hw:
                raise OffsetOutOfRange(f"endingOffsets for {tp[0]}-{tp[1]} ({o}) is beyond the high watermark "
                                       f"({hw}): only committed records can be read")
            out[tp] = o
        return out
    if isinstance(spec, (GlobalTimestamp, SpecificTimestamps)):
        stamps = ({tp: spec.timestamp_ms for tp in tps} if isinstance(spec, GlobalTimestamp)
                  else _covered("endingoffsetsbytimestamp", spec, tps))
        out = {}
        for tp, ts in stamps.items():
            found = view.offset_for_timestamp(tp, ts)
            out[tp] = view.high_watermark(tp) if found is None else found
        return out
    raise InvalidSourceOption("endingoffsets", "ending offset can't be earliest")


def check_data_loss(view: TopicView, tp: TopicPartition, start: int, *, fail_on_data_loss: bool,
                    warn=None) -> int:
    """``start``, or the log start offset when records below it are gone (raises if ``failOnDataLoss``)."""
    lso = view.log_start_offset(tp)
    if start >= lso:
        return start
    message = (f"Offsets [{start}, {lso}) of {tp[0]}-{tp[1]} are no longer available: the log start offset is "
               f"{lso}.")
    if fail_on_data_loss:
        raise OffsetOutOfRange(f"{message} {DATA_LOSS_HINT_TRUE}")
    if warn is not None:
        warn(f"{message} {DATA_LOSS_HINT_FALSE}")
    return lso


# -- admission control ------------------------------------------------------------------------------
def rate_limit(start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int], limit: int) -> Offsets:
    """End offsets admitting at most ``limit`` offsets in total, prorated by each partition's lag.

    ``start`` must hold every partition of ``latest``.
    Largest-remainder rounding keeps the total exact; ties go to the partition with the larger lag so a
    limit smaller than the partition count still rotates over partitions instead of starving some.
    """
    lags = {tp: max(0, latest[tp] - start[tp]) for tp in latest}
    total = sum(lags.values())
    if total <= limit:
        return dict(latest)
    shares = {tp: limit * lag / total for tp, lag in lags.items()}
    take = {tp: math.floor(s) for tp, s in shares.items()}
    left = limit - sum(take.values())
    order = sorted((tp for tp in lags if lags[tp] > take[tp]),
                   key=lambda tp: (-(shares[tp] - take[tp]), -lags[tp], tp))
    for tp in order[:left]:
        take[tp] += 1
    return {tp: start[tp] + take[tp] if lags[tp] else latest[tp] for tp in latest}


# -- Kafka source offset JSON -------------------------------------------------------------------------
def to_json_dict(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """``{(t, p): o}`` as the Kafka source's checkpoint JSON object ``{"t": {"p": o}}``."""
    out: dict[str, dict[str, int]] = {}
    for (t, p), o in sorted(offsets.items()):
        out.setdefault(t, {})[str(p)] = int(o)
    return out


def from_json_dict(obj: Mapping[str, Mapping[str, int]] | None) -> Offsets:
    return {(t, int(p)): int(o) for t, parts in (obj or {}).items() for p, o in parts.items()}
