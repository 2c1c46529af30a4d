"""The cleaner's offset map and its rule: which records of a segment survive a cleaning pass.

Kafka's cleaner fills an offset map (``SkimpyOffsetMap``: key -> latest offset)
from the dirty section, then copies every segment of the cleanable range
keeping a record only if it is not superseded.  Here the map is computed by
Spark (``group by (partition, key)``, ``max(offset)``), collected as Arrow and
broadcast to the executor tasks, where :func:`decide` applies the rule to
each segment with pyarrow.  Like Kafka's dedupe buffer, the map is bounded
(:data:`MAX_MAP_ENTRIES`): a partition with more dirty records is cleaned a
prefix at a time, the next pass continuing from the checkpoint.

A record at ``offset`` in the cleanable range ``[log start, end)`` survives iff

* it has a key (Kafka's cleaner drops keyless records of a compacted log), and
* the map has no later offset for its key (``offset >= latest``), and
* it is not a tombstone whose delete horizon has passed (stamped at pass time
  ``t`` and ``t + delete.retention.ms <= now``).

Records outside the range are kept as they are.  Surviving tombstones without a
stamp are reached for the first time: the pass stamps them
(:mod:`lakelog.maintenance.tombstone_horizon`).  Pure functions; thread-safe.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakelog.maintenance.tombstone_horizon import TombstoneStamps

MAX_MAP_ENTRIES = 5_000_000  # about Kafka's 128 MB log.cleaner.dedupe.buffer.size at 24 bytes an entry
MAP_SCHEMA = pa.schema([("partition", pa.int32()), ("key", pa.binary()), ("latest", pa.int64())])


class KeyMap:
    """Latest dirty offset of each key, per partition (built from an Arrow table of :data:`MAP_SCHEMA`)."""

    def __init__(self, table: pa.Table) -> None:
        self._parts: dict[int, tuple[pa.Array, pa.Array]] = {}
        if table.num_rows:
            table = table.sort_by("partition")
            parts = table.column("partition").to_numpy()
            bounds = np.flatnonzero(np.diff(parts)) + 1
            for lo, hi in zip(np.r_[0, bounds], np.r_[bounds, len(parts)]):
                chunk = table.slice(int(lo), int(hi - lo))
                self._parts[int(parts[lo])] = (chunk.column("key").combine_chunks(),
                                               chunk.column("latest").combine_chunks())

    def __len__(self) -> int:
        return sum(len(k) for k, _ in self._parts.values())

    def latest(self, partition: int, keys: pa.Array) -> pa.Array:
        """Per key: the latest dirty offset of that key in ``partition``, or null."""
        found = self._parts.get(partition)
        if found is None or len(keys) == 0:
            return pa.nulls(len(keys), pa.int64())
        map_keys, latest = found
        return latest.take(pc.index_in(keys, value_set=map_keys))


@dataclass(frozen=True)
class CleaningRange:
    """What :func:`decide` needs about a partition's pass."""

    log_start_offset: int
    end_offset: int  # first uncleanable offset of this pass
    now_ms: int
    delete_retention_ms: int


@dataclass(frozen=True)
class Decision:
    """Per record of a segment: survives, and is a surviving tombstone to stamp now."""

    keep: np.ndarray
    stamp: np.ndarray

    @property
    def kept(self) -> int:
        return int(self.keep.sum())

    @property
    def dropped(self) -> int:
        return int(len(self.keep) - self.keep.sum())

    @property
    def unstamped(self) -> int:
        return int(self.stamp.sum())


def decide(offsets: pa.Array, keys: pa.Array, tombstones: pa.Array | None, stamps: TombstoneStamps,
           key_map: KeyMap, partition: int, rng: CleaningRange, latest: pa.Array | None = None) -> Decision:
    """Apply the cleaner's rule (module doc) to one segment's records.

    ``tombstones``: null-value mask, or None when the file is known to hold none.  ``latest``:
    ``key_map.latest(partition, keys)`` if the caller looked it up already (one lookup for many segments
    builds the map's hash set once).
    """
    o = offsets.to_numpy(zero_copy_only=False)
    in_range = (o >= rng.log_start_offset) & (o < rng.end_offset)
    has_key = keys.is_valid().to_numpy(zero_copy_only=False)
    if latest is None:
        latest = key_map.latest(partition, keys)
    superseded = pc.fill_null(pc.less(offsets, latest), False).to_numpy(zero_copy_only=False)
    survives = has_key & ~superseded
    stamp = np.zeros(len(o), dtype=bool)
    if tombstones is not None:
        tomb = tombstones.to_numpy(zero_copy_only=False)
        covered, times = stamps.pass_times_array(o)
        stamped = tomb & covered
        expired = stamped & (times + rng.delete_retention_ms <= rng.now_ms)
        survives &= ~expired
        stamp = in_range & survives & tomb & ~stamped
    keep = ~in_range | survives
    return Decision(keep, stamp)
