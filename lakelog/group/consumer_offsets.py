"""Committed consumer offsets, kept in the internal compacted topic ``__consumer_offsets``.

As in Kafka, an offset commit is a record of an internal compacted topic:

* key   = JSON ``["<group>", "<topic>", <partition>]`` (UTF-8, no spaces);
* value = JSON ``{"offset": O, "metadata": "...", "commit_timestamp": ms, "leader_epoch": E}`` (the epoch
  only when the committer named one, as OffsetCommit v6+ and TxnOffsetCommit v2+ do), or null
  (a tombstone: the group's offset for that partition was deleted).

Group metadata (Kafka's ``GroupMetadataKey``) lives in the same topic under the
key JSON ``["<group>"]``: the value is the coordinator's saved state of the
group (:mod:`lakelog.group.group_coordinator`), or null once the group was
deleted.

All keys of one group live in one partition, ``murmur2(group) % partitions``
(Kafka's ``partitionFor(groupId)``), so a commit of several partitions is one
atomic batch.  The latest record of a key wins; compaction may drop older
ones, so a reader never depends on them.

:class:`OffsetStore` loads its state by reading the whole topic once and stays
current by re-reading the tail (new records since the last read) before every
read, so several processes sharing a root -- HTTP fronts, the CLI, Spark
drivers -- see each other's commits.  Records are applied by log offset (a
record older than the one already applied for its key is ignored), so the
order in which a process learns of commits cannot roll an offset back.

Thread-safe: one lock guards the state and serialises tail reads.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable

from lakelog.errors import InvalidRequest, KafkaError, OffsetMetadataTooLarge, TopicAlreadyExists
from lakelog.group.group_id import validate_group_id
from lakelog.writer.partitioner import partition_for_key
from lakelog.storage.topic_name import validate_topic_name
from lakelog.writer.records import PartitionBatch
from lakelog.reader.log_reader import fetch

if TYPE_CHECKING:
    from lakelog.log import Log
    from lakelog.writer.accumulator import RecordAccumulator

OFFSETS_TOPIC = "__consumer_offsets"
OFFSETS_TOPIC_PARTITIONS = 8
OFFSETS_TOPIC_CONFIGS = {"cleanup.policy": "compact"}
OFFSET_METADATA_MAX_BYTES = 4096  # Kafka's offset.metadata.max.bytes
_FETCH_RECORDS = 10_000


@dataclass(frozen=True)
class CommittedOffset:
    """One committed offset (Kafka's ``OffsetAndMetadata`` plus where it is and when it was committed)."""

    group: str
    topic: str
    partition: int
    offset: int
    metadata: str
    commit_timestamp: int  # epoch ms
    leader_epoch: int = -1  # the committed leader epoch (-1: none given)


def encode_key(group: str, topic: str, partition: int) -> bytes:
    return json.dumps([group, topic, partition], separators=(",", ":"), ensure_ascii=False).encode()


def decode_key(key: bytes) -> tuple[str, str, int] | None:
    try:
        group, topic, partition = json.loads(key)
        return str(group), str(topic), int(partition)
    except (ValueError, TypeError):
        return None  # not an offset-commit key: ignore, as Kafka ignores unknown key versions


def encode_group_key(group: str) -> bytes:
    return json.dumps([group], separators=(",", ":"), ensure_ascii=False).encode()


def decode_group_key(key: bytes) -> str | None:
    try:
        value = json.loads(key)
    except ValueError:
        return None
    return str(value[0]) if isinstance(value, list) and len(value) == 1 else None


class OffsetStore:
    """Commit and fetch consumer-group offsets over one :class:`~lakelog.log.Log`.

    ``accumulator`` (optional) routes commits through a shared group-commit
    accumulator (the HTTP front does this); otherwise each commit is its own
    Delta commit.  Creating the store creates ``__consumer_offsets`` if it is missing.
    """

    def __init__(self, log: "Log", *, accumulator: "RecordAccumulator | None" = None,
                 partitions: int = OFFSETS_TOPIC_PARTITIONS) -> None:
        self.log = log
        self.accumulator = accumulator
        self._lock = threading.RLock()
        # (group, topic, partition) -> (log offset of the record, CommittedOffset or None for a tombstone)
        self._state: dict[tuple[str, str, int], tuple[int, CommittedOffset | None]] = {}
        self._positions: dict[int, int] = {}  # next log offset to read, per partition
        self._groups: dict[str, tuple[int, dict | None]] = {}  # group metadata: (log offset, value)
        try:
            log.create_topic(OFFSETS_TOPIC, partitions, OFFSETS_TOPIC_CONFIGS)
        except TopicAlreadyExists:
            pass
        self.refresh()

    # -- reading -----------------------------------------------------------------------
    def refresh(self) -> None:
        """Apply every record committed to the topic since the last read (by any process)."""
        with self._lock:
            snap = self.log.snapshot(OFFSETS_TOPIC)
            for p in range(snap.partition_count):
                hw = snap.high_watermark(p)
                pos = max(self._positions.get(p, 0), snap.log_start_offset(p))
                while pos < hw:
                    res = fetch(self.log.root, snap, p, pos, max_records=_FETCH_RECORDS)  # this snapshot's pages
                    cols = res.records.select(["offset", "key", "value", "timestamp"]).to_pydict()
                    for off, key, value, ts in zip(cols["offset"], cols["key"], cols["value"], cols["timestamp"]):
                        self._apply(off, key, value, ts)
                    if res.next_offset <= pos:
                        break
                    pos = res.next_offset
                self._positions[p] = pos

    def _apply(self, log_offset: int, key: bytes | None, value: bytes | None, ts) -> None:
        k = decode_key(key) if key is not None else None
        if k is None:
            group = decode_group_key(key) if key is not None else None
            if group is not None and self._groups.get(group, (-1, None))[0] < log_offset:
                try:
                    self._groups[group] = (log_offset, json.loads(value) if value is not None else None)
                except ValueError:
                    pass
            return
        current = self._state.get(k)
        if current is not None and current[0] >= log_offset:
            return
        entry = None
        if value is not None:
            try:
                v = json.loads(value)
                stamp = v.get("commit_timestamp")
                if stamp is None:
                    stamp = int(ts.timestamp() * 1000) if ts is not None else 0
                entry = CommittedOffset(k[0], k[1], k[2], int(v["offset"]), str(v.get("metadata") or ""),
                                        int(stamp), int(v.get("leader_epoch", -1)))
            except (ValueError, TypeError, KeyError):
                return
        self._state[k] = (log_offset, entry)

    def fetch(self, group: str, topic: str | None = None, *, refresh: bool = True) -> list[CommittedOffset]:
        """The group's committed offsets (of one topic, or all), sorted by topic and partition."""
        validate_group_id(group)
        if topic is not None:
            validate_topic_name(topic)
        if refresh:
            self.refresh()
        with self._lock:
            out = [e for (g, t, _), (_, e) in self._state.items()
                   if e is not None and g == group and (topic is None or t == topic)]
        return sorted(out, key=lambda e: (e.topic, e.partition))

    def list_groups(self, *, refresh: bool = True) -> list[str]:
        """Groups with at least one committed offset."""
        if refresh:
            self.refresh()
        with self._lock:
            return sorted({g for (g, _, _), (_, e) in self._state.items() if e is not None})

    # -- writing -----------------------------------------------------------------------
    def commit(self, group: str, offsets: Iterable[tuple], *, min_offset: int = 0) -> list[CommittedOffset]:
        """Commit ``(topic, partition, offset, metadata[, leader_epoch])`` tuples for ``group`` atomically.

        Offsets below ``min_offset`` are refused; the Kafka front passes Kafka's bound (any int64: a broker stores
        what OffsetCommit sends, and kafkajs commits -2 to reset a group to the earliest offset).

        Validates everything first (``INVALID_GROUP_ID``, ``INVALID_TOPIC_EXCEPTION``,
        ``INVALID_REQUEST``, ``OFFSET_METADATA_TOO_LARGE``): a rejected commit writes nothing.
        Returns what was committed, once it is durable.
        """
        validate_group_id(group)
        now = int(time.time() * 1000)
        entries: dict[tuple[str, int], CommittedOffset] = {}
        for item in offsets:
            try:
                topic, partition, offset, metadata, *epoch = item
                leader_epoch = epoch[0] if epoch else -1
                if len(epoch) > 1:
                    raise ValueError
            except (TypeError, ValueError):
                raise InvalidRequest(f"an offset commit entry must be (topic, partition, offset, metadata"
                                     f"[, leader_epoch]), got {item!r}") from None
            if isinstance(leader_epoch, bool) or not isinstance(leader_epoch, int) or not -1 <= leader_epoch < 2**31:
                raise InvalidRequest(f"leader epoch of the commit for {topic} must be an int32 >= -1, "
                                     f"got {leader_epoch!r}")
            validate_topic_name(topic)
            for name, v, low in (("partition", partition, 0), ("offset", offset, min_offset)):
                if isinstance(v, bool) or not isinstance(v, int) or not low <= v < 2**63:
                    raise InvalidRequest(f"{name} of the commit for {topic} must be an integer >= {low}, got {v!r}")
            metadata = metadata or ""
            if not isinstance(metadata, str):
                raise InvalidRequest(f"metadata of the commit for {topic}-{partition} must be a string")
            if len(metadata.encode()) > OFFSET_METADATA_MAX_BYTES:
                raise OffsetMetadataTooLarge(
                    f"metadata of the commit for {topic}-{partition} is {len(metadata.encode())} bytes, "
                    f"larger than offset.metadata.max.bytes={OFFSET_METADATA_MAX_BYTES}")
            entries[(topic, partition)] = CommittedOffset(group, topic, partition, offset, metadata, now, leader_epoch)
        if not entries:
            raise InvalidRequest(f"offset commit for group {group} lists no offsets")
        records = [{"key": encode_key(group, e.topic, e.partition),
                    "value": json.dumps({"offset": e.offset, "metadata": e.metadata,
                                         "commit_timestamp": e.commit_timestamp,
                                         **({"leader_epoch": e.leader_epoch} if e.leader_epoch >= 0 else {})}).encode(),
                    "timestamp": now} for e in entries.values()]
        self._write(group, records)
        return list(entries.values())

    def delete_group(self, group: str) -> int:
        """Delete the group: tombstones for every committed offset and for its saved state, in one atomic batch
        (Kafka's DeleteGroups); returns the log offset of the state's tombstone."""
        validate_group_id(group)
        keys = [(e.topic, e.partition) for e in self.fetch(group)]
        records = [{"key": encode_key(group, t, p), "value": None} for t, p in keys]
        records.append({"key": encode_group_key(group), "value": None})
        return self._write(group, records)

    def delete_offsets(self, group: str, partitions: Iterable[tuple[str, int]]) -> int:
        """Delete ``group``'s committed offsets of ``(topic, partition)`` (Kafka's OffsetDelete; tombstones);
        returns how many existed."""
        validate_group_id(group)
        wanted = set(partitions)
        keys = [(e.topic, e.partition) for e in self.fetch(group) if (e.topic, e.partition) in wanted]
        if keys:
            self._write(group, [{"key": encode_key(group, t, p), "value": None} for t, p in keys])
        return len(keys)

    # -- group metadata (the coordinator's GroupStore) ---------------------------------------
    def save_group(self, group: str, metadata: dict | None) -> int:
        """Save the coordinator's state of ``group`` (None deletes it); returns the record's log offset."""
        value = json.dumps(metadata, separators=(",", ":")).encode() if metadata is not None else None
        return self._write(group, [{"key": encode_group_key(group), "value": value}])

    def load_groups(self, *, refresh: bool = True) -> dict[str, dict]:
        """The saved state of every group that has one."""
        return {g: v for g, (_, v) in self.group_records(refresh=refresh).items() if v is not None}

    def group_records(self, *, refresh: bool = True) -> dict[str, tuple[int, dict | None]]:
        """Per group, the log offset and value (None: a tombstone) of its newest state record."""
        if refresh:
            self.refresh()
        with self._lock:
            return dict(self._groups)

    def _write(self, group: str, records: list[dict]) -> int:
        """Append ``records`` to the group's partition; returns the log offset of the last one."""
        snap = self.log.snapshot(OFFSETS_TOPIC)
        partition = partition_for_key(group.encode(), snap.partition_count)
        batch = PartitionBatch(partition, records)  # normalised on creation
        if self.accumulator is not None:
            result = self.accumulator.append(OFFSETS_TOPIC, [batch]).result()[0]
        else:
            result = self.log.append_batches(OFFSETS_TOPIC, [batch])[0]
        if isinstance(result, KafkaError):
            raise result
        with self._lock:  # apply our own records now: reads after a commit see it
            for i, r in enumerate(records):
                self._apply(result.base_offset + i, r["key"], r["value"], None)
        return result.base_offset + len(records) - 1
