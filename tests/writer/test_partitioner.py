"""Tests for lakelog.writer.partitioner: Java-client compatibility and partition choice rules."""

from __future__ import annotations

import random
import sys
import threading
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

# The repo has no packaging config yet and this module must not rely on a
# conftest, so make the checkout importable when run as plain `pytest`.
_ROOT = str(Path(__file__).resolve().parents[2])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

from lakelog.errors import InvalidRequest, KafkaError, UnknownTopicOrPartition
from lakelog.writer.partitioner import (
    StickyPartitioner,
    choose_partition,
    murmur2,
    partition_for_key,
    partitions_for_keys,
    to_positive,
)

INT_MIN = -(2**31)
INT_MAX = 2**31 - 1


def _java_int(x: int) -> int:
    x &= 0xFFFFFFFF
    return x - 0x100000000 if x & 0x80000000 else x


def _reference_murmur2(data: bytes) -> int:
    """Line-by-line transliteration of Java's Utils.murmur2 on signed bytes and ints.

    Deliberately naive so it checks the optimised implementation independently.
    """
    sbytes = [b - 256 if b > 127 else b for b in data]  # Java's byte[]
    length = len(sbytes)
    seed = _java_int(0x9747B28C)
    m = 0x5BD1E995
    r = 24
    h = _java_int(seed ^ length)
    for i in range(length // 4):
        i4 = i * 4
        k = _java_int(
            (sbytes[i4 + 0] & 0xFF)
            + ((sbytes[i4 + 1] & 0xFF) << 8)
            + ((sbytes[i4 + 2] & 0xFF) << 16)
            + ((sbytes[i4 + 3] & 0xFF) << 24)
        )
        k = _java_int(k * m)
        k = _java_int(k ^ ((k & 0xFFFFFFFF) >> r))
        k = _java_int(k * m)
        h = _java_int(h * m)
        h = _java_int(h ^ k)
    rem = length % 4
    if rem == 3:
        h = _java_int(h ^ ((sbytes[(length & ~3) + 2] & 0xFF) << 16))
    if rem >= 2:
        h = _java_int(h ^ ((sbytes[(length & ~3) + 1] & 0xFF) << 8))
    if rem >= 1:
        h = _java_int(h ^ (sbytes[length & ~3] & 0xFF))
        h = _java_int(h * m)
    h = _java_int(h ^ ((h & 0xFFFFFFFF) >> 13))
    h = _java_int(h * m)
    h = _java_int(h ^ ((h & 0xFFFFFFFF) >> 15))
    return h


# --- murmur2 -----------------------------------------------------------------

# Kafka's UtilsTest.testMurmur2 (clients/src/test/java/org/apache/kafka/common/utils/UtilsTest.java).
KAFKA_GOLDEN = [
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (bytes([ord("a"), ord("b"), ord("c")]), 479470107),
]


@pytest.mark.parametrize(("data", "expected"), KAFKA_GOLDEN, ids=[d.decode() for d, _ in KAFKA_GOLDEN])
def test_murmur2_matches_kafka_golden_vectors(data: bytes, expected: int) -> None:
    assert murmur2(data) == expected


@pytest.mark.parametrize(("data", "expected"), KAFKA_GOLDEN, ids=[d.decode() for d, _ in KAFKA_GOLDEN])
def test_reference_transliteration_matches_kafka_golden_vectors(data: bytes, expected: int) -> None:
    # Guards the reference used by the property tests below.
    assert _reference_murmur2(data) == expected


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\x00",
        b"\xff",
        b"\x80\x81",
        b"\xff\xfe\xfd",
        b"\xff\xff\xff\xff",
        b"\x80\x00\x00\x00\x7f",
        bytes(range(256)),
        "héllo wörld ✓".encode(),
    ],
    ids=["empty", "zero", "ff", "two-high", "three-high", "word-ff", "word+1", "all-bytes", "utf8"],
)
def test_murmur2_high_bytes_match_java_signed_semantics(data: bytes) -> None:
    assert murmur2(data) == _reference_murmur2(data)


@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview])
def test_murmur2_accepts_bytes_like(kind: type) -> None:
    data = b"a-little-bit-longer-string"
    assert murmur2(kind(data)) == -1486304829


@settings(max_examples=500)
@given(st.binary(max_size=64))
def test_murmur2_matches_reference_for_any_bytes(data: bytes) -> None:
    h = murmur2(data)
    assert h == _reference_murmur2(data)
    assert INT_MIN <= h <= INT_MAX


# --- to_positive ---------------------------------------------------------------

@pytest.mark.parametrize(
    ("n", "expected"),
    [
        (0, 0),
        (1, 1),
        (INT_MAX, INT_MAX),
        (-1, INT_MAX),
        (-2, INT_MAX - 1),
        (INT_MIN, 0),
        (INT_MIN + 1, 1),
        (-973932308, -973932308 & 0x7FFFFFFF),
    ],
)
def test_to_positive(n: int, expected: int) -> None:
    assert to_positive(n) == expected
    assert 0 <= to_positive(n) <= INT_MAX


# --- partition_for_key ---------------------------------------------------------

@pytest.mark.parametrize(("key", "hashed"), KAFKA_GOLDEN, ids=[d.decode() for d, _ in KAFKA_GOLDEN])
@pytest.mark.parametrize("n", [1, 2, 3, 7, 12, 100])
def test_partition_for_key_is_kafka_formula(key: bytes, hashed: int, n: int) -> None:
    assert partition_for_key(key, n) == (hashed & 0x7FFFFFFF) % n


@pytest.mark.parametrize(
    ("key", "n", "expected"),
    [
        # (-973932308 & 0x7fffffff) = 1173551340
        (b"21", 10, 1173551340 % 10),
        (b"foobar", 6, (-790332482 & 0x7FFFFFFF) % 6),
        (b"abc", 4, 479470107 % 4),
        (b"anything", 1, 0),
    ],
)
def test_partition_for_key_known_values(key: bytes, n: int, expected: int) -> None:
    assert partition_for_key(key, n) == expected


@pytest.mark.parametrize("key", [b"", b"k", b"order-42", bytes(range(200))])
@pytest.mark.parametrize("n", [1, 3, 50])
def test_same_key_always_same_partition(key: bytes, n: int) -> None:
    first = partition_for_key(key, n)
    assert all(partition_for_key(key, n) == first for _ in range(20))
    assert partition_for_key(bytearray(key), n) == first


@pytest.mark.parametrize("n", [0, -1])
def test_partition_for_key_rejects_non_positive_count(n: int) -> None:
    with pytest.raises(InvalidRequest):
        partition_for_key(b"k", n)


@given(st.binary(max_size=128), st.integers(min_value=1, max_value=10_000))
def test_partition_for_key_always_in_range(key: bytes, n: int) -> None:
    assert 0 <= partition_for_key(key, n) < n


def test_partition_for_key_spreads_keys() -> None:
    n = 8
    seen = {partition_for_key(f"key-{i}".encode(), n) for i in range(1000)}
    assert seen == set(range(n))


# --- choose_partition ----------------------------------------------------------

@pytest.mark.parametrize(
    ("explicit", "n"),
    [(-1, 3), (3, 3), (4, 3), (1, 1), (INT_MIN, 5), (INT_MAX, 5)],
)
def test_explicit_partition_out_of_range_raises(explicit: int, n: int) -> None:
    with pytest.raises(UnknownTopicOrPartition) as exc_info:
        choose_partition(key=b"k", num_partitions=n, explicit=explicit, sticky=StickyPartitioner(), topic="orders")
    err = exc_info.value
    assert isinstance(err, KafkaError)
    assert err.code == 3
    assert "orders" in err.message
    assert str(explicit) in err.message
    assert str(n) in err.message


@pytest.mark.parametrize(("explicit", "n"), [(0, 1), (0, 3), (2, 3), (99, 100)])
@pytest.mark.parametrize("key", [None, b"", b"k"])
def test_explicit_partition_wins_over_key_and_sticky(explicit: int, n: int, key: bytes | None) -> None:
    assert choose_partition(key=key, num_partitions=n, explicit=explicit, sticky=StickyPartitioner(), topic="t") == explicit


@pytest.mark.parametrize("key", [b"", b"21", b"foobar", b"\xff\x00\xfe"])
@pytest.mark.parametrize("n", [1, 5, 12])
def test_key_used_when_no_explicit_partition(key: bytes, n: int) -> None:
    sticky = StickyPartitioner(random.Random(0))
    got = choose_partition(key=key, num_partitions=n, explicit=None, sticky=sticky, topic="t")
    assert got == partition_for_key(key, n)


def test_empty_key_is_hashed_not_sticky() -> None:
    # Java treats an empty key as a key; only null goes sticky.
    assert choose_partition(
        key=b"", num_partitions=1000, explicit=None, sticky=StickyPartitioner(), topic="t"
    ) == (murmur2(b"") & 0x7FFFFFFF) % 1000


def test_null_key_uses_sticky_partition() -> None:
    sticky = StickyPartitioner(random.Random(1))
    expected = sticky.partition("t", 6)
    for _ in range(10):
        assert choose_partition(key=None, num_partitions=6, explicit=None, sticky=sticky, topic="t") == expected


@pytest.mark.parametrize("n", [0, -3])
def test_choose_partition_rejects_non_positive_count(n: int) -> None:
    with pytest.raises(InvalidRequest):
        choose_partition(key=None, num_partitions=n, explicit=None, sticky=StickyPartitioner(), topic="t")


# --- StickyPartitioner ---------------------------------------------------------

@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("n", [1, 2, 3, 16])
def test_sticky_stays_until_new_batch(seed: int, n: int) -> None:
    sticky = StickyPartitioner(random.Random(seed))
    first = sticky.partition("t", n)
    assert 0 <= first < n
    assert all(sticky.partition("t", n) == first for _ in range(50))


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("n", [2, 3, 16])
def test_new_batch_switches_to_a_different_partition(seed: int, n: int) -> None:
    sticky = StickyPartitioner(random.Random(seed))
    prev = sticky.partition("t", n)
    for _ in range(30):
        new = sticky.on_new_batch("t", n, prev)
        assert new != prev
        assert 0 <= new < n
        assert sticky.partition("t", n) == new
        prev = new


def test_new_batch_with_one_partition_stays_on_zero() -> None:
    sticky = StickyPartitioner()
    assert sticky.partition("t", 1) == 0
    assert sticky.on_new_batch("t", 1, 0) == 0
    assert sticky.partition("t", 1) == 0


def test_new_batch_for_stale_partition_is_a_no_op() -> None:
    sticky = StickyPartitioner(random.Random(7))
    current = sticky.partition("t", 10)
    stale = (current + 1) % 10
    assert sticky.on_new_batch("t", 10, stale) == current
    assert sticky.partition("t", 10) == current


def test_new_batch_before_any_partition_sets_one() -> None:
    sticky = StickyPartitioner(random.Random(3))
    p = sticky.on_new_batch("t", 4, -1)
    assert 0 <= p < 4
    assert sticky.partition("t", 4) == p


def test_sticky_is_per_topic() -> None:
    sticky = StickyPartitioner(random.Random(11))
    a = sticky.partition("a", 100)
    b = sticky.partition("b", 100)
    sticky.on_new_batch("a", 100, a)
    assert sticky.partition("b", 100) == b


def test_new_batch_visits_every_other_partition() -> None:
    sticky = StickyPartitioner(random.Random(5))
    n = 4
    seen = set()
    prev = sticky.partition("t", n)
    for _ in range(200):
        prev = sticky.on_new_batch("t", n, prev)
        seen.add(prev)
    assert seen == set(range(n))


def test_sticky_repicks_when_count_shrinks() -> None:
    sticky_at_high = None
    for seed in range(50):
        sticky = StickyPartitioner(random.Random(seed))
        if sticky.partition("t", 100) >= 10:
            sticky_at_high = sticky
            break
    assert sticky_at_high is not None
    assert 0 <= sticky_at_high.partition("t", 10) < 10


@pytest.mark.parametrize("n", [0, -1])
def test_sticky_rejects_non_positive_count(n: int) -> None:
    sticky = StickyPartitioner()
    with pytest.raises(InvalidRequest):
        sticky.partition("t", n)
    with pytest.raises(InvalidRequest):
        sticky.on_new_batch("t", n, 0)


def test_concurrent_new_batch_for_same_batch_switches_once() -> None:
    sticky = StickyPartitioner(random.Random(42))
    n = 1000
    prev = sticky.partition("t", n)
    results: list[int] = []
    barrier = threading.Barrier(8)

    def report() -> None:
        barrier.wait()
        results.append(sticky.on_new_batch("t", n, prev))

    threads = [threading.Thread(target=report) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(results)) == 1
    assert results[0] != prev
    assert sticky.partition("t", n) == results[0]


# --- partitions_for_keys -------------------------------------------------------

@pytest.mark.parametrize(
    ("keys", "n", "sticky"),
    [
        ([], 3, 0),
        ([None, None], 3, 2),
        ([b"21", b"foobar", b"abc"], 7, 0),
        ([b"21", None, b"", None, b"\xff\xfe"], 5, 4),
        ([b"x"] * 10, 1, 0),
    ],
)
def test_partitions_for_keys_matches_per_record(keys: list[bytes | None], n: int, sticky: int) -> None:
    expected = [sticky if k is None else partition_for_key(k, n) for k in keys]
    assert partitions_for_keys(keys, n, sticky) == expected


@pytest.mark.parametrize(("n", "sticky"), [(0, 0), (3, 3), (3, -1)])
def test_partitions_for_keys_validates_arguments(n: int, sticky: int) -> None:
    with pytest.raises(InvalidRequest):
        partitions_for_keys([b"k", None], n, sticky)


@given(
    st.lists(st.one_of(st.none(), st.binary(max_size=32)), max_size=50),
    st.integers(min_value=1, max_value=500),
    st.data(),
)
def test_partitions_for_keys_always_in_range(keys: list[bytes | None], n: int, data: st.DataObject) -> None:
    sticky = data.draw(st.integers(min_value=0, max_value=n - 1))
    out = partitions_for_keys(keys, n, sticky)
    assert len(out) == len(keys)
    assert all(0 <= p < n for p in out)
    assert all(p == sticky for k, p in zip(keys, out) if k is None)


# -- uniform sticky (KIP-794): move on after switch_bytes went to the sticky partition -------------------------
@pytest.mark.parametrize("sends, switch_after", [
    ([40, 40], None),            # 80 < 100: stays
    ([40, 40, 30], 2),           # the third send reaches 110 >= 100: moves on after it
    ([100], 0),                  # one send of exactly switch_bytes
    ([250, 10], 0),              # a send larger than switch_bytes moves on at once
    ([99, 1, 99], 1),            # the count restarts on the new partition: 99 stays
])
def test_on_bytes_moves_on_after_switch_bytes(sends: list[int], switch_after: int | None) -> None:
    sticky = StickyPartitioner(random.Random(5))
    p = sticky.partition("t", 8)
    for i, nbytes in enumerate(sends):
        new = sticky.on_bytes("t", 8, p, nbytes, switch_bytes=100)
        if i == switch_after:
            assert new != p
        else:
            assert new == p
        p = new
    assert sticky.partition("t", 8) == p


def test_on_bytes_for_a_stale_partition_neither_counts_nor_moves() -> None:
    sticky = StickyPartitioner(random.Random(9))
    current = sticky.partition("t", 8)
    stale = (current + 1) % 8
    assert sticky.on_bytes("t", 8, stale, 10_000, switch_bytes=100) == current
    assert sticky.on_bytes("t", 8, current, 99, switch_bytes=100) == current  # the stale bytes were not counted


def test_on_bytes_with_one_partition_stays_on_zero() -> None:
    sticky = StickyPartitioner()
    assert sticky.partition("t", 1) == 0
    assert sticky.on_bytes("t", 1, 0, 10_000, switch_bytes=100) == 0


# -- partition_batches: the library's and the front's split of a table into partition batches ---------------------
def _table(keys: list[bytes | None]) -> pa.Table:
    from lakelog.writer.records import normalize_records

    return normalize_records(pa.table({"key": pa.array(keys, pa.binary()), "value": pa.array([b"v" * 100] * len(keys))}))


S = "sticky"  # stands for the topic's sticky partition in the table below


@pytest.mark.parametrize("keys,explicit,expect", [
    # (keys, explicit partitions, the partition of each row) over 4 partitions
    ([None, None, None], None, [S, S, S]),
    ([b"a", None, b"b"], None, [partition_for_key(b"a", 4), S, partition_for_key(b"b", 4)]),
    ([None, b"a", None], [0, 1, None], [0, 1, S]),
    ([None, None], [2, 2], [2, 2]),
])
def test_partition_batches_explicit_then_key_then_sticky(keys, explicit, expect) -> None:
    from lakelog.writer.partitioner import partition_batches

    sticky = StickyPartitioner(random.Random(3))
    current = sticky.partition("t", 4)
    want: dict[int, list[int]] = {}
    for row, p in enumerate(expect):
        want.setdefault(current if p == S else p, []).append(row)
    batches = partition_batches(sticky, "t", _table(keys), 4, explicit=explicit)
    assert [b.partition for b in batches] == sorted(want)
    for b in batches:
        assert b.records.column("key").to_pylist() == [keys[i] for i in want[b.partition]]


@pytest.mark.parametrize("switch_bytes,same_for", [(None, 1), (10**9, 5), (1, 1)])
def test_partition_batches_sticky_moves_per_call_or_per_switch_bytes(switch_bytes, same_for) -> None:
    """Without switch_bytes each call is a batch (legacy rule); with it the partition moves after that many bytes."""
    from lakelog.writer.partitioner import partition_batches

    sticky = StickyPartitioner(random.Random(7))
    chosen = [partition_batches(sticky, "t", _table([None] * 10), 8, switch_bytes=switch_bytes)[0].partition
              for _ in range(5)]
    assert chosen[:same_for] == [chosen[0]] * same_for
    if same_for < 5:
        assert chosen[same_for] != chosen[0]
