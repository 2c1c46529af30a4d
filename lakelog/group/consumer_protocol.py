"""Kafka's embedded consumer protocol: the ``ConsumerProtocolSubscription`` a ``consumer``-type member sends in
JoinGroup and the ``ConsumerProtocolAssignment`` it gets back in SyncGroup.

The classic coordinator never reads these bytes (it relays them); lakelog reads them only where Kafka does:
to serve a classic member inside a KIP-848 consumer group, to turn a classic group into a consumer group, and
to describe a group. The layouts are Kafka's (``ConsumerProtocolSubscription.json`` v0-v3,
``ConsumerProtocolAssignment.json`` v0-v3, non-flexible): a big-endian int16 version, then the fields. A newer
version is read as the newest known, as Kafka's ``ConsumerProtocol`` does.

Written by hand rather than with kio's reader because these bytes come from clients and kio's reader allocates
whatever count a field declares: here every count and length is checked against the bytes left before anything
is built. Pure.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Iterable

from lakelog.errors import InvalidRequest
from lakelog.group.assignors import TopicPartition

PROTOCOL_TYPE = "consumer"
NEWEST_SUBSCRIPTION_VERSION = 3
_I16, _I32 = struct.Struct(">h"), struct.Struct(">i")


@dataclass(frozen=True)
class Subscription:
    """A decoded ConsumerProtocolSubscription."""

    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: tuple[TopicPartition, ...] = ()
    generation_id: int = -1
    rack_id: str | None = None
    version: int = 0


@dataclass(frozen=True)
class Assignment:
    """A decoded ConsumerProtocolAssignment."""

    partitions: tuple[TopicPartition, ...]
    user_data: bytes | None = None
    version: int = 0


@dataclass
class _Reader:
    data: bytes
    pos: int = 0
    what: str = field(default="consumer protocol message")

    def _take(self, n: int) -> bytes:
        if n < 0 or n > len(self.data) - self.pos:
            raise InvalidRequest(f"malformed {self.what}: it ends before a field of {n} bytes")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def i16(self) -> int:
        return _I16.unpack(self._take(2))[0]

    def i32(self) -> int:
        return _I32.unpack(self._take(4))[0]

    def string(self, nullable: bool = False) -> str | None:
        n = self.i16()
        if n == -1 and nullable:
            return None
        try:
            return self._take(n).decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidRequest(f"malformed {self.what}: a string is not UTF-8") from None

    def bytes_(self) -> bytes | None:
        n = self.i32()
        return None if n == -1 else self._take(n)

    def count(self, min_item_bytes: int) -> int:
        """An array length, refused if its items cannot fit in the bytes left (nothing is allocated before)."""
        n = self.i32()
        if n == -1:
            return 0
        if n < 0 or n * min_item_bytes > len(self.data) - self.pos:
            raise InvalidRequest(f"malformed {self.what}: an array of {n} items does not fit in "
                                 f"{len(self.data) - self.pos} bytes")
        return n

    def partitions(self) -> tuple[TopicPartition, ...]:
        out: list[TopicPartition] = []
        for _ in range(self.count(6)):
            topic = self.string() or ""
            out.extend(TopicPartition(topic, self.i32()) for _ in range(self.count(4)))
        return tuple(out)


def decode_subscription(data: bytes) -> Subscription:
    """A subscription's fields; ``INVALID_REQUEST`` if the bytes are not one."""
    r = _Reader(bytes(data), what="consumer protocol subscription")
    version = r.i16()
    if version < 0:
        raise InvalidRequest(f"consumer protocol subscription version {version}")
    v = min(version, NEWEST_SUBSCRIPTION_VERSION)
    topics = tuple(r.string() or "" for _ in range(r.count(2)))
    user_data = r.bytes_()
    owned = r.partitions() if v >= 1 else ()
    generation = r.i32() if v >= 2 else -1
    rack = r.string(nullable=True) if v >= 3 else None
    return Subscription(topics, user_data, owned, generation, rack, version)


def decode_assignment(data: bytes) -> Assignment:
    """An assignment's partitions; an empty byte string is the empty assignment (what Kafka stores for a member
    the leader gave nothing)."""
    if not data:
        return Assignment(())
    r = _Reader(bytes(data), what="consumer protocol assignment")
    version = r.i16()
    if version < 0:
        raise InvalidRequest(f"consumer protocol assignment version {version}")
    partitions = r.partitions()
    return Assignment(partitions, r.bytes_(), version)


def encode_assignment(partitions: Iterable[TopicPartition], *, version: int = 0,
                      user_data: bytes | None = None) -> bytes:
    """A ConsumerProtocolAssignment of ``partitions`` (grouped by topic, sorted)."""
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(partitions):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    out = [_I16.pack(max(0, min(version, NEWEST_SUBSCRIPTION_VERSION))), _I32.pack(len(by_topic))]
    for topic, ps in by_topic.items():
        name = topic.encode()
        out += [_I16.pack(len(name)), name, _I32.pack(len(ps)), *(_I32.pack(p) for p in ps)]
    out.append(_I32.pack(-1) if user_data is None else _I32.pack(len(user_data)) + user_data)
    return b"".join(out)


def encode_subscription(topics: Iterable[str], *, owned: Iterable[TopicPartition] = (), user_data: bytes | None = None,
                        generation_id: int = -1, version: int = 1) -> bytes:
    """A ConsumerProtocolSubscription (v0-v2): what a consumer-type member sends in JoinGroup; used to hand a
    consumer-group member to the classic protocol when a group is converted."""
    out = [_I16.pack(version)]
    names = [t.encode() for t in topics]
    out.append(_I32.pack(len(names)))
    out += [_I16.pack(len(n)) + n for n in names]
    out.append(_I32.pack(-1) if user_data is None else _I32.pack(len(user_data)) + user_data)
    if version >= 1:
        by_topic: dict[str, list[int]] = {}
        for tp in sorted(owned):
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        out.append(_I32.pack(len(by_topic)))
        for topic, ps in by_topic.items():
            name = topic.encode()
            out += [_I16.pack(len(name)), name, _I32.pack(len(ps)), *(_I32.pack(p) for p in ps)]
    if version >= 2:
        out.append(_I32.pack(generation_id))
    return b"".join(out)
