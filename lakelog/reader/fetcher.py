"""The consumer's read-ahead: records of assigned partitions straight from the segment files.

Like Kafka's ``Fetcher``, it reads more than one poll hands out and keeps the
rest in a per-partition buffer, so a poll of ``max_records`` costs a slice,
not a file read: each fetch reads whole Parquet row groups from the consumer's
position on until ``max_partition_fetch_bytes`` (compressed file bytes, at
least one row group) or the high watermark.  A consumer reading a partition
front to back therefore reads every row group once, as a plain scan would.

On an object store the fetcher also reads ahead by segment: after each fetch
it starts whole-object GETs of the partition's next segments (up to
:data:`READ_AHEAD_BYTES` of them, in parallel; :data:`READ_AHEAD_TOTAL_BYTES`
over all partitions), and a later fetch parses those
bytes instead of asking the store. A sequential consumer so waits for the
store's latency about once per :data:`READ_AHEAD_BYTES`, not three round trips
per segment. A segment compacted away meanwhile shows as a missing object and
is re-planned as before.

A buffer is valid for one position: a seek (a position the buffer does not
expect) drops it.  Only committed data is read -- the high watermark of the
topic's latest snapshot bounds every fetch -- and a position outside
[log start offset, high watermark] raises ``OFFSET_OUT_OF_RANGE``.

Not thread-safe: owned by one consumer (:class:`~lakelog.client.consumer.Consumer`).
"""

from __future__ import annotations

import time
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Hashable, Protocol

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lakelog.errors import OffsetOutOfRange
from lakelog.reader.log_reader import check_partition, readers
from lakelog.reader.segment_reader import get_segment, open_segment, row_group_ranges
from lakelog.storage.record_schema import FILE_SCHEMA
from lakelog.storage.storage_root import StorageRoot
from lakelog.storage.topic_snapshot import TopicSnapshot

DEFAULT_MAX_PARTITION_FETCH_BYTES = 1 << 20  # Kafka's max.partition.fetch.bytes
_READ_RETRIES = 3  # a segment may be compacted away between the snapshot and the read
READ_AHEAD_BYTES = 16 << 20  # stored bytes of segments fetched ahead per partition (object stores only)
READ_AHEAD_TOTAL_BYTES = 50 << 20  # over all partitions, as Kafka's fetch.max.bytes bounds one fetch
SNAPSHOT_REUSE_S = 1.0  # a fetch below a snapshot's high watermark may plan on it for this long


@dataclass
class _Buffer:
    table: pa.Table    # records with offset >= the position the fetch started at, in offset order
    index: int         # the next row to hand out
    position: int      # the consumer position that row stands for
    end: int           # the position once the buffer is drained (covers gaps left by compaction)


class TopicPartition(Hashable, Protocol):
    """A partition of a topic, as a consumer names it (:class:`lakelog.group.assignors.TopicPartition`)."""

    topic: str
    partition: int


class Snapshots(Protocol):
    """Where topics' committed state is read (a :class:`~lakelog.log.Log`)."""

    root: StorageRoot

    def snapshot(self, topic: str) -> TopicSnapshot:
        """The topic's latest committed state."""


class Fetcher:
    """Per-partition read-ahead buffers over one root's topics (``log``: a :class:`~lakelog.log.Log`)."""

    def __init__(self, log: Snapshots, *, max_partition_fetch_bytes: int = DEFAULT_MAX_PARTITION_FETCH_BYTES) -> None:
        self.log = log
        self.max_partition_fetch_bytes = max_partition_fetch_bytes
        self._buffers: dict[TopicPartition, _Buffer] = {}
        self._ahead: dict[TopicPartition, dict[str, Future]] = {}  # segment path -> its whole-object GET
        self._snapshots: dict[str, tuple[float, TopicSnapshot]] = {}  # topic -> (taken at, snapshot)

    def drop(self, tp: TopicPartition) -> None:
        self._buffers.pop(tp, None)
        self._drop_ahead(tp)

    def retain(self, partitions: set[TopicPartition]) -> None:
        """Drop the buffers of partitions not in ``partitions`` (revoked or unassigned)."""
        for tp in [tp for tp in self._buffers if tp not in partitions]:
            del self._buffers[tp]
        for tp in [tp for tp in self._ahead if tp not in partitions]:
            self._drop_ahead(tp)

    def _drop_ahead(self, tp: TopicPartition) -> None:
        for f in self._ahead.pop(tp, {}).values():
            f.cancel()

    def buffered(self, tp: TopicPartition) -> int:
        """Records buffered for ``tp`` (read but not handed out)."""
        buf = self._buffers.get(tp)
        return buf.table.num_rows - buf.index if buf else 0

    def take(self, tp: TopicPartition, position: int, max_records: int) -> tuple[pa.Table | None, int]:
        """Up to ``max_records`` records of ``tp`` from ``position``, and the position after them.

        ``(None, position')`` when nothing is there yet; ``position'`` may move past a
        compacted gap.  Raises ``OFFSET_OUT_OF_RANGE`` (nothing buffered) for a position
        outside the partition's range.
        """
        buf = self._buffers.get(tp)
        if buf is None or buf.position != position:
            buf = self._fetch(tp, position)
            if buf is None:
                return None, position
            if buf.index >= buf.table.num_rows:  # only a gap up to the covered end
                return None, buf.end
            self._buffers[tp] = buf
        n = min(max_records, buf.table.num_rows - buf.index)
        out = buf.table.slice(buf.index, n)
        buf.index += n
        if buf.index >= buf.table.num_rows:
            del self._buffers[tp]
            return out, buf.end
        buf.position = out.column("offset")[n - 1].as_py() + 1
        return out, buf.position

    def _snapshot(self, tp: TopicPartition, position: int) -> TopicSnapshot:
        """The topic's snapshot; on an object store, where each look costs round trips, reused for up to
        :data:`SNAPSHOT_REUSE_S` while ``position`` is below its high watermark (a fetch there needs no newer
        one; a segment removed meanwhile is re-planned on a fresh snapshot, see :meth:`_fetch`)."""
        cached = None if self.log.root.is_local else self._snapshots.get(tp.topic)
        now = time.monotonic()
        if (cached is not None and now - cached[0] < SNAPSHOT_REUSE_S and tp.partition < cached[1].partition_count
                and cached[1].log_start_offset(tp.partition) <= position < cached[1].high_watermark(tp.partition)):
            return cached[1]
        snap = self.log.snapshot(tp.topic)
        self._snapshots[tp.topic] = (now, snap)
        return snap

    def _fetch(self, tp: TopicPartition, position: int) -> _Buffer | None:
        snap = self._snapshot(tp, position)
        for attempt in range(_READ_RETRIES):
            try:
                buf = self._read(snap, tp, position)
                if buf is not None and not self.log.root.is_local:
                    self._read_ahead(snap, tp, buf.end)
                return buf
            except FileNotFoundError:
                if attempt == _READ_RETRIES - 1:
                    raise
                snap = self.log.snapshot(tp.topic)  # compaction/retention replaced the segment: re-plan
                self._snapshots[tp.topic] = (time.monotonic(), snap)
        return None

    def _read_ahead(self, snap: TopicSnapshot, tp: TopicPartition, position: int) -> None:
        """Start whole-object GETs of the segments from ``position`` on, up to :data:`READ_AHEAD_BYTES`
        (less when many partitions read ahead: :data:`READ_AHEAD_TOTAL_BYTES` is shared among them)."""
        ahead = self._ahead.setdefault(tp, {})
        budget, wanted = min(READ_AHEAD_BYTES, READ_AHEAD_TOTAL_BYTES // len(self._ahead)), set()
        hw = snap.high_watermark(tp.partition)
        for seg in snap.index.segments_from(tp.partition, position):
            if budget <= 0 or seg.base_offset >= hw or not self._whole_size(seg):
                break
            wanted.add(seg.path)
            budget -= seg.bytes
            if seg.path not in ahead:
                ahead[seg.path] = readers().submit(get_segment, self.log.root, snap.topic, seg.path)
        for path in [p for p in ahead if p not in wanted]:  # behind us (or dropped by a seek)
            ahead.pop(path).cancel()

    def _whole_size(self, seg) -> bool:
        """Whether ``seg`` is small enough to be fetched whole (one fetch reads about all of it)."""
        return 0 < seg.bytes <= 2 * self.max_partition_fetch_bytes

    def _open(self, snap: TopicSnapshot, tp: TopicPartition, seg, whole_ok: bool):
        """The segment's file: bytes fetched ahead if there are, else from the store."""
        fetched = self._ahead.get(tp, {}).pop(seg.path, None)
        if fetched is not None:
            return pa.BufferReader(fetched.result())  # FileNotFoundError if it was compacted away meanwhile
        return open_segment(self.log.root, snap.topic, seg.path, seg.bytes, whole_ok=whole_ok)

    def _read(self, snap: TopicSnapshot, tp: TopicPartition, position: int) -> _Buffer | None:
        partition = tp.partition
        check_partition(snap, partition)
        hw, lso = snap.high_watermark(partition), snap.log_start_offset(partition)
        if position < lso or position > hw:
            raise OffsetOutOfRange(f"offset {position} of topic {snap.topic} partition {partition} is out of range "
                                   f"[log start offset {lso}, high watermark {hw}]")
        if position == hw:
            return None
        tables: list[pa.Table] = []
        size, end, full = 0, hw, False
        for seg in snap.index.segments_from(partition, position):
            if seg.base_offset >= hw:
                break
            if size >= self.max_partition_fetch_bytes:
                end = seg.base_offset  # the next fetch starts with this segment
                break
            with self._open(snap, tp, seg, position <= seg.base_offset and self._whole_size(seg)) as f:
                pf = pq.ParquetFile(f)
                groups = []
                for rg, lo, hi in row_group_ranges(pf):
                    if hi < position or lo >= hw:
                        continue
                    if size >= self.max_partition_fetch_bytes and lo > position:
                        end, full = lo, True  # the next fetch starts with this row group
                        break
                    groups.append(rg)
                    size += pf.metadata.row_group(rg).total_byte_size
                if groups:
                    tables.append(pf.read_row_groups(groups, columns=FILE_SCHEMA.names))
            if full:
                break
        if not tables:
            return _Buffer(FILE_SCHEMA.empty_table(), 0, position, end)
        table = pa.concat_tables(tables) if len(tables) > 1 else tables[0]
        offsets = table.column("offset")
        if pc.min(offsets).as_py() < position or pc.max(offsets).as_py() >= hw:
            table = table.filter(pc.and_(pc.greater_equal(offsets, position), pc.less(offsets, hw)))
        return _Buffer(table, 0, position, end)
