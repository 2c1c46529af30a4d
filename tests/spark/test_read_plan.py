"""Read planning and admission control, without Spark: plans cover exactly the ranges, splits and packing."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from lakelog.storage.producer_state import ProducerStateManager
from lakelog.spark.read_plan import OPEN_COST_BYTES, OffsetRange, plan_reads
from lakelog.spark.source_offsets import from_json_dict, rate_limit, to_json_dict
from lakelog.storage.segment_index import Segment, SegmentIndex
from lakelog.storage.topic_snapshot import TopicSnapshot, leo_app
from lakelog.writer.segment_writer import ROW_GROUP_SIZE

MIB = 1024 * 1024


def snapshot(topic: str, segments: dict[int, list[tuple[int, int, int]]]) -> TopicSnapshot:
    """A snapshot whose partitions hold segments (base, last, bytes); dense unless last - base + 1 differs."""
    index = SegmentIndex()
    txns = {}
    for p, segs in segments.items():
        for base, last, size in segs:
            index.add(Segment(p, base, last, last - base + 1, size, 0, 0, f"partition={p}/{base:020d}-x.parquet"))
        txns[leo_app(p)] = segs[-1][1] + 1 if segs else 0
    return TopicSnapshot(topic, 1, {"lakelog.partitions": str(len(segments))}, index, txns, ProducerStateManager())


def covered(tasks) -> dict[tuple[str, int], list[tuple[int, int]]]:
    out: dict[tuple[str, int], list[tuple[int, int]]] = {}
    for t in tasks:
        for s in t.slices:
            out.setdefault((s.topic, s.partition), []).append((s.start, s.end))
    return out


def test_slices_follow_segments_and_ranges():
    snap = snapshot("t", {0: [(0, 9, 100), (10, 19, 100), (20, 29, 100)], 1: [(0, 4, 50)]})
    tasks = plan_reads({"t": snap}, [OffsetRange("t", 0, 5, 25), OffsetRange("t", 1, 0, 5), OffsetRange("t", 1, 3, 3)])
    assert covered(tasks) == {("t", 0): [(5, 10), (10, 20), (20, 25)], ("t", 1): [(0, 5)]}
    assert len(tasks) == 1  # tiny segments pack into one task, like small files in Spark


def test_open_cost_bounds_files_per_task():
    segs = [(i * 10, i * 10 + 9, 1000) for i in range(100)]
    tasks = plan_reads({"t": snapshot("t", {0: segs})}, [OffsetRange("t", 0, 0, 1000)])
    per_task = 128 * MIB // (OPEN_COST_BYTES + 1000)
    assert [len(t.slices) for t in tasks] == [per_task] * (100 // per_task) + [100 % per_task]
    starts = [s.start for t in tasks for s in t.slices]
    assert starts == sorted(starts)  # offset order is kept across tasks


def test_large_segment_splits_at_row_groups():
    n = 10 * ROW_GROUP_SIZE
    snap = snapshot("t", {0: [(0, n - 1, 1000 * MIB)]})
    tasks = plan_reads({"t": snap}, [OffsetRange("t", 0, 0, n)])
    pieces = covered(tasks)[("t", 0)]
    assert pieces[0][0] == 0 and pieces[-1][1] == n and len(tasks) == len(pieces) >= 8
    assert all((e - s) % ROW_GROUP_SIZE == 0 for s, e in pieces[:-1])
    assert all(b[0] == a[1] for a, b in zip(pieces, pieces[1:]))


@settings(max_examples=60, deadline=None)
@given(sizes=st.lists(st.lists(st.integers(1, 40), min_size=0, max_size=6), min_size=1, max_size=3),
       min_partitions=st.one_of(st.none(), st.integers(1, 12)), data=st.data())
def test_plans_cover_exactly_the_ranges(sizes, min_partitions, data):
    segments, ranges = {}, []
    for p, lens in enumerate(sizes):
        base, segs = 0, []
        for n in lens:
            segs.append((base, base + n - 1, n * 3 * MIB))
            base += n
        segments[p] = segs
        lo = data.draw(st.integers(0, base))
        hi = data.draw(st.integers(lo, base))
        ranges.append(OffsetRange("t", p, lo, hi))
    tasks = plan_reads({"t": snapshot("t", segments)}, ranges, min_partitions=min_partitions)
    got = covered(tasks)
    for r in ranges:
        offsets = [o for s, e in got.get(("t", r.partition), []) for o in range(s, e)]
        assert offsets == list(range(r.start, r.end))
    total = sum(r.end - r.start for r in ranges)
    if min_partitions and total:
        # at least min_partitions tasks unless there are fewer offsets than that
        assert len(tasks) >= min(min_partitions, total)


@settings(max_examples=200, deadline=None)
@given(lags=st.lists(st.integers(0, 1000), min_size=1, max_size=6), limit=st.integers(1, 3000))
def test_rate_limit_bounds_the_total_exactly(lags, limit):
    start = {("t", p): 100 for p in range(len(lags))}
    latest = {("t", p): 100 + lag for p, lag in enumerate(lags)}
    end = rate_limit(start, latest, limit)
    taken = [end[tp] - start[tp] for tp in start]
    assert sum(taken) == min(limit, sum(lags))
    assert all(0 <= t <= lag for t, lag in zip(taken, lags))


def test_rate_limit_rotates_when_the_limit_is_below_the_partition_count():
    start = {("t", p): 0 for p in range(3)}
    latest = {("t", p): 10 for p in range(3)}
    served = set()
    for _ in range(3):
        end = rate_limit(start, latest, 1)
        served |= {tp for tp in start if end[tp] > start[tp]}
        start = end
    assert served == set(latest)


def test_offsets_json_roundtrip():
    offsets = {("b", 10): 7, ("a", 0): 3, ("a", 2): 0}
    assert to_json_dict(offsets) == {"a": {"0": 3, "2": 0}, "b": {"10": 7}}
    assert from_json_dict(to_json_dict(offsets)) == offsets
