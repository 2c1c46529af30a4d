"""Java's orders, reproduced: ``String.compareTo``, ``String.hashCode``/``TopicPartition.hashCode`` and the
iteration order of a default ``HashMap``/``HashSet``, which decide a few of Kafka's assignors' tie-breaks.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from lakelog.group.partition_assignor import MemberSubscription, TopicPartition


_MASK32 = 0xFFFFFFFF
_UTF16_UNITS = struct.Struct(">H").iter_unpack


def _jkey(s: str) -> bytes:
    """Sort key matching Java's ``String.compareTo`` (UTF-16 code units).

    Big-endian UTF-16 bytes compare exactly like the code-unit sequence, which
    differs from Python's code-point order only for astral characters.
    """
    return s.encode("utf-16-be", "surrogatepass")


def _java_string_hash(s: str) -> int:
    h = 0
    for (unit,) in _UTF16_UNITS(_jkey(s)):
        h = (31 * h + unit) & _MASK32
    return h


def _tp_hash(tp: TopicPartition) -> int:
    # TopicPartition.hashCode: 31 * (31 + partition) + topic.hashCode()
    return (31 * (31 + tp.partition) + _java_string_hash(tp.topic)) & _MASK32


def _bucket(h: int, capacity: int) -> int:
    return (h ^ (h >> 16)) & (capacity - 1)  # HashMap.hash, then index


def _grow(capacity: int, size: int) -> int:
    # A default HashMap/HashSet starts at 16 buckets and doubles once size
    # exceeds 3/4 of them; it never shrinks.
    while size > capacity * 3 // 4:
        capacity *= 2
    return capacity


def _java_hash_map_order(keys: Sequence[str]) -> list[str]:
    """Iteration order of a default ``java.util.HashMap`` filled with ``keys`` in order.

    Buckets in index order, insertion order within a bucket (the rare
    treeified bucket of 8+ colliding keys is not modelled).
    """
    capacity = _grow(16, len(keys))
    ranked = sorted((_bucket(_java_string_hash(k), capacity), i) for i, k in enumerate(keys))
    return [keys[i] for _, i in ranked]


class _JavaHashSet:
    """Just enough of ``java.util.HashSet<TopicPartition>`` to know what ``iterator().next()`` yields."""

    __slots__ = ("_rank", "_counter", "_capacity")

    def __init__(self) -> None:
        self._rank: dict[TopicPartition, int] = {}
        self._counter = 0
        self._capacity = 16

    def add(self, tp: TopicPartition) -> None:
        if tp not in self._rank:
            # A re-added element goes to the tail of its bucket; resizing keeps
            # the relative order inside a bucket, so (bucket, rank) is the order.
            self._rank[tp] = self._counter
            self._counter += 1
            self._capacity = _grow(self._capacity, len(self._rank))

    def discard(self, tp: TopicPartition) -> None:
        self._rank.pop(tp, None)

    def __bool__(self) -> bool:
        return bool(self._rank)

    def first(self) -> TopicPartition:
        cap = self._capacity
        return min(self._rank, key=lambda tp: (_bucket(_tp_hash(tp), cap), self._rank[tp]))


def _member_order_key(m: MemberSubscription) -> tuple:
    # AbstractPartitionAssignor.MemberInfo.compareTo: static members (with a
    # group.instance.id) first, ordered by instance id, so their assignment
    # survives member-id changes; then dynamic members by member id.
    if m.group_instance_id is not None:
        return (0, _jkey(m.group_instance_id), _jkey(m.member_id))
    return (1, _jkey(m.member_id), b"")
