"""Kafka-compatible partition selection for produced records.

Records must land on the same partition a Java producer would pick, so
consumers keyed on partition (and compacted topics) see the same layout
whichever client wrote them.  The rules are the Java client's:

* an explicit partition wins, and must exist;
* otherwise a non-null key is hashed with :func:`murmur2` (``Utils.murmur2``)
  and mapped by :func:`partition_for_key` (``BuiltInPartitioner.partitionForKey``);
* otherwise (null key) the topic's sticky partition is used, switched only
  when a batch completes (the legacy ``StickyPartitionCache``).

:func:`partition_batches` and :func:`split_records` apply these rules to a table of records at once, splitting
it into one :class:`~lakelog.writer.records.PartitionBatch` per partition.

Everything here is safe to call from any thread; only :class:`StickyPartitioner` holds state, and it guards that
state with a lock.
"""

from __future__ import annotations

import random
import struct
import threading

import pyarrow as pa
import pyarrow.compute as pc

from lakelog.errors import InvalidRequest, UnknownTopicOrPartition
from lakelog.writer.records import PartitionBatch

__all__ = [
    "murmur2",
    "to_positive",
    "partition_for_key",
    "StickyPartitioner",
    "choose_partition",
    "partitions_for_keys",
    "partition_batches",
    "split_records",
]

_MASK32 = 0xFFFFFFFF
_SEED = 0x9747B28C
_M = 0x5BD1E995
_R = 24
# Little-endian unsigned words equal Java's
# (b0 & 0xff) + ((b1 & 0xff) << 8) + ((b2 & 0xff) << 16) + ((b3 & 0xff) << 24)
# modulo 2**32, and one C-level unpack is much cheaper than four indexings.
_WORDS = struct.Struct("<I").iter_unpack


def murmur2(data: bytes | bytearray | memoryview) -> int:
    """Kafka's ``Utils.murmur2``: 32-bit MurmurHash2 of *data*, seed ``0x9747b28c``.

    Returns the hash as Java's signed ``int`` (``-2**31 <= h < 2**31``), so the
    result compares equal to the Java client's for the same bytes.
    """
    length = len(data)
    m = _M
    mask = _MASK32
    # Arithmetic is on unsigned 32-bit values masked after every multiply;
    # Java's wrap-around int and its ``>>>`` give the same bits.
    h = _SEED ^ length
    body = length & ~3
    if body:
        view = data if body == length else memoryview(data)[:body]
        for (k,) in _WORDS(view):
            k = (k * m) & mask
            k ^= k >> _R
            h = ((h * m) & mask) ^ ((k * m) & mask)

    tail = length & 3
    if tail:
        # Java's fall-through switch: 3 mixes bytes 2,1,0; 2 mixes 1,0; 1 mixes 0.
        # Indexing bytes in Python yields 0..255, i.e. Java's ``b & 0xff``.
        if tail == 3:
            h ^= data[body + 2] << 16
        if tail >= 2:
            h ^= data[body + 1] << 8
        h ^= data[body]
        h = (h * m) & mask

    h ^= h >> 13
    h = (h * m) & mask
    h ^= h >> 15
    return h - 0x100000000 if h & 0x80000000 else h


def to_positive(n: int) -> int:
    """Java's ``Utils.toPositive``: clear the sign bit of a 32-bit int.

    Not ``abs``: ``Integer.MIN_VALUE`` maps to 0 and ``-1`` to ``2**31 - 1``,
    exactly as the Java client does when reducing a hash to a partition.
    """
    return n & 0x7FFFFFFF


def _check_count(num_partitions: int) -> None:
    if num_partitions < 1:
        raise InvalidRequest(f"num_partitions must be >= 1, got {num_partitions}")


def partition_for_key(key: bytes | bytearray | memoryview, num_partitions: int) -> int:
    """The partition the Java client picks for a non-null *key*.

    ``to_positive(murmur2(key)) % num_partitions``; raises :class:`InvalidRequest`
    if *num_partitions* < 1.
    """
    _check_count(num_partitions)
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions


class StickyPartitioner:
    """Per-topic sticky partition for null-key records (Kafka's legacy ``StickyPartitionCache``).

    All null-key records of a topic go to one partition until the batch on it
    completes; :meth:`on_new_batch` then moves the topic to a different random
    partition, so batches fill quickly yet load spreads over time.

    Thread-safety: one instance may be shared by any number of threads.  Every
    read and update of the per-topic state (and of the random generator) runs
    under an internal lock, and :meth:`on_new_batch` is a compare-and-set on
    *prev_partition*, so when several threads report the same completed batch
    the topic switches once, not once per thread.
    """

    def __init__(self, rng: random.Random | None = None) -> None:
        """*rng* lets tests make the choice deterministic; the default is a fresh ``random.Random``."""
        self._lock = threading.Lock()
        self._rng = rng if rng is not None else random.Random()
        self._current: dict[str, int] = {}
        self._sent: dict[str, int] = {}  # bytes sent to the topic's current sticky partition (on_bytes)

    def _pick_locked(self, num_partitions: int, avoid: int | None) -> int:
        if num_partitions == 1:
            return 0
        if avoid is None or not 0 <= avoid < num_partitions:
            return self._rng.randrange(num_partitions)
        # Uniform over the other partitions without Kafka's retry loop.
        r = self._rng.randrange(num_partitions - 1)
        return r + 1 if r >= avoid else r

    def partition(self, topic: str, num_partitions: int) -> int:
        """The topic's current sticky partition, choosing one at random on first use.

        If the remembered partition is no longer below *num_partitions* (the
        caller passed a smaller count than before) a new one is chosen, so the
        result is always in ``[0, num_partitions)``.
        """
        _check_count(num_partitions)
        with self._lock:
            current = self._current.get(topic)
            if current is None or current >= num_partitions:
                current = self._pick_locked(num_partitions, None)
                self._current[topic] = current
            return current

    def on_new_batch(self, topic: str, num_partitions: int, prev_partition: int) -> int:
        """Move *topic* off *prev_partition* after its batch completed; return the sticky partition.

        Switches only if *prev_partition* is still the topic's sticky partition
        (or none is set yet): a late or duplicate notification leaves the
        partition another caller already chose.  With more than one partition
        the new one always differs from *prev_partition*; with one it is 0.
        """
        _check_count(num_partitions)
        with self._lock:
            current = self._current.get(topic)
            if current is None or current == prev_partition or current >= num_partitions:
                current = self._pick_locked(num_partitions, prev_partition)
                self._current[topic] = current
                self._sent[topic] = 0
            return current

    def on_bytes(self, topic: str, num_partitions: int, partition: int, nbytes: int, switch_bytes: int) -> int:
        """Count *nbytes* of null-key records sent to *partition*; move on once *switch_bytes* went there.

        Kafka's uniform sticky rule (KIP-794) for a writer that sees many small requests -- the HTTP front:
        switching per request would spread one linger window's requests over many partitions (one segment
        file each), while switching per ``batch.size`` bytes fills one partition's commit first.  Returns the
        sticky partition for the next records.
        """
        _check_count(num_partitions)
        with self._lock:
            current = self._current.get(topic)
            if current == partition and current < num_partitions:
                sent = self._sent.get(topic, 0) + nbytes
                if sent < switch_bytes:
                    self._sent[topic] = sent
                    return current
        return self.on_new_batch(topic, num_partitions, partition)


def choose_partition(
    *,
    key: bytes | bytearray | memoryview | None,
    num_partitions: int,
    explicit: int | None,
    sticky: StickyPartitioner,
    topic: str,
) -> int:
    """The partition for one record, in the Java producer's order.

    1. *explicit*, if given; it must satisfy ``0 <= explicit < num_partitions``
       or :class:`UnknownTopicOrPartition` is raised (naming topic, partition
       and partition count).
    2. ``partition_for_key(key, num_partitions)`` if *key* is not ``None``
       (an empty key is a key, as in Java).
    3. ``sticky.partition(topic, num_partitions)``.

    Raises :class:`InvalidRequest` if *num_partitions* < 1.
    """
    _check_count(num_partitions)
    if explicit is not None:
        if not 0 <= explicit < num_partitions:
            raise UnknownTopicOrPartition(
                f"partition {explicit} of topic '{topic}' does not exist: "
                f"the topic has {num_partitions} partition(s), numbered 0 to {num_partitions - 1}"
            )
        return explicit
    if key is not None:
        return (murmur2(key) & 0x7FFFFFFF) % num_partitions
    return sticky.partition(topic, num_partitions)


def partitions_for_keys(
    keys: list[bytes | bytearray | memoryview | None],
    num_partitions: int,
    sticky_partition: int,
) -> list[int]:
    """Partition for each of *keys* (same order): key hash, or *sticky_partition* for ``None``.

    For a batch whose null-key records all go to one sticky partition the
    caller already fetched (``StickyPartitioner.partition``).  Raises
    :class:`InvalidRequest` if *num_partitions* < 1 or *sticky_partition* is
    outside ``[0, num_partitions)``.
    """
    _check_count(num_partitions)
    if not 0 <= sticky_partition < num_partitions:
        raise InvalidRequest(
            f"sticky_partition {sticky_partition} is outside [0, {num_partitions})"
        )
    # Bound locals: this runs once per record of large batches.
    h = murmur2
    n = num_partitions
    return [sticky_partition if k is None else (h(k) & 0x7FFFFFFF) % n for k in keys]


def partition_batches(sticky: StickyPartitioner, topic: str, table: pa.Table, num_partitions: int, *,
                      explicit: list | None = None, switch_bytes: int | None = None) -> list[PartitionBatch]:
    """Split a table of :data:`~lakelog.storage.record_schema.INPUT_SCHEMA` into partition batches, Kafka's way.

    ``explicit`` gives a partition per record (None entries fall through); then
    murmur2(key); null-key records go to the topic's sticky partition, which
    moves on after this call (the call is one batch: Kafka's legacy rule) or,
    with ``switch_bytes`` (an accumulator's ``batch.size``), once that many bytes
    went to it (KIP-794), so the many small appends of one linger window fill one
    partition's segment.  Batches come in partition order.
    """
    return split_records(sticky, topic, table, num_partitions, explicit=explicit, switch_bytes=switch_bytes)[0]


def split_records(sticky: StickyPartitioner, topic: str, table: pa.Table, num_partitions: int, *,
                  explicit: list | None = None,
                  switch_bytes: int | None = None) -> tuple[list[PartitionBatch], pa.Array | None]:
    """:func:`partition_batches`, plus each record's partition (an int32 array in record order), or None when
    every record went to the one batch returned; within a batch, records keep their order."""
    keys = table.column("key")
    current = sticky.partition(topic, num_partitions)
    parts = None
    if explicit is None and keys.null_count == len(keys):
        out = [PartitionBatch(current, table)]
    else:
        by_key = partitions_for_keys(keys.to_pylist(), num_partitions, current)
        chosen = by_key if explicit is None else [b if e is None else e for e, b in zip(explicit, by_key)]
        parts = pa.array(chosen, pa.int32())
        out = [PartitionBatch(p, table.filter(pc.equal(parts, p))) for p in sorted(pc.unique(parts).to_pylist())]
        if len(out) == 1:
            parts = None
    stuck = next((b for b in out if b.partition == current), None) if keys.null_count else None
    if stuck is not None:
        if switch_bytes is None:
            sticky.on_new_batch(topic, num_partitions, current)
        else:
            sticky.on_bytes(topic, num_partitions, current, stuck.nbytes, switch_bytes)
    return out, parts
