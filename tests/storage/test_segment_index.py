"""The Arrow segment index: lookups by offset and timestamp, removes, Arrow round trip (pure)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakelog.storage.segment_index import SEGMENT_NAME, Segment, SegmentIndex, segment_file_name


def seg(partition: int, base: int, last: int, min_ts: int = 0, max_ts: int = 0, tag: str = "a") -> Segment:
    return Segment(partition, base, last, last - base + 1, 100 * (last - base + 1), min_ts, max_ts,
                   segment_file_name(partition, base, tag))


def test_segment_file_name_matches_the_segment_pattern():
    name = segment_file_name(3, 1234, "0f" * 16)
    m = SEGMENT_NAME.match(name)
    assert name == f"partition=3/{1234:020d}-{'0f' * 16}.parquet"
    assert m and (int(m.group(1)), int(m.group(2))) == (3, 1234)
    assert SEGMENT_NAME.match("partition=3/_tmp.parquet") is None


def test_offset_lookups():
    idx = SegmentIndex([seg(0, 10, 19), seg(0, 0, 9), seg(0, 20, 24), seg(1, 0, 4)])
    assert [s.base_offset for s in idx.segments(0)] == [0, 10, 20]
    assert idx.segment_for_offset(0, 0).base_offset == 0
    assert idx.segment_for_offset(0, 15).base_offset == 10
    assert idx.segment_for_offset(0, 24).base_offset == 20
    assert idx.segment_for_offset(0, 99).base_offset == 20  # past the end: the last segment covers it
    assert idx.segment_for_offset(2, 0) is None
    assert [s.base_offset for s in idx.segments_from(0, 12)] == [10, 20]
    assert idx.segments_from(0, 25) == []
    assert (idx.earliest_offset(0), idx.latest_offset(0)) == (0, 25)
    assert (idx.earliest_offset(5), idx.latest_offset(5)) == (None, None)
    assert idx.partitions() == [0, 1] and len(idx) == 4 and idx.size_bytes(0) == 2500


def test_offset_lookup_below_a_compacted_first_segment():
    idx = SegmentIndex([seg(0, 100, 140), seg(0, 150, 151)])
    assert idx.segment_for_offset(0, 50) is None and idx.segment_position(0, 50) == -1
    assert [s.base_offset for s in idx.segments_from(0, 50)] == [100, 150]
    assert [s.base_offset for s in idx.segments_from(0, 145)] == [150]  # a gap left by compaction


@pytest.mark.parametrize("ts,position", [(0, 0), (100, 0), (101, 2), (150, 2), (200, 2), (201, 4), (60, 0)])
def test_timestamp_lookup_with_non_monotonic_timestamps(ts, position):
    # max timestamps 100, 50, 200, 150: the first segment that can hold a timestamp >= ts
    idx = SegmentIndex([seg(0, 0, 9, 10, 100), seg(0, 10, 19, 20, 50), seg(0, 20, 29, 0, 200),
                        seg(0, 30, 39, 120, 150)])
    assert idx.first_segment_with_max_timestamp_at_least(0, ts) == position


def test_removes_and_re_adds_keep_lookups_right():
    a, b, c = seg(0, 0, 9, 0, 500), seg(0, 10, 19, 0, 100), seg(0, 20, 29, 0, 300)
    idx = SegmentIndex([a, b, c])
    assert idx.first_segment_with_max_timestamp_at_least(0, 200) == 0
    idx.remove(a.path)  # retention drops the oldest segment: the running max must forget it
    assert idx.first_segment_with_max_timestamp_at_least(0, 200) == 1
    assert [s.base_offset for s in idx.segments(0)] == [10, 20] and a.path not in idx
    idx.remove(a.path)  # removing twice is harmless
    merged = seg(0, 10, 29, 0, 300, tag="m")  # a merge replaces b and c by one segment
    idx.remove(b.path)
    idx.remove(c.path)
    idx.add(merged)
    assert idx.segments(0) == [merged] and idx.latest_offset(0) == 30
    idx.add(merged)  # an add replayed twice is recorded once
    assert len(idx) == 1


def test_arrow_round_trip_and_copy():
    idx = SegmentIndex([seg(0, 0, 9, -5, 7), seg(2, 3, 4, 1, 2), seg(0, 10, 10, 9, 9)])
    table = idx.to_arrow()
    again = SegmentIndex.from_arrow(table)
    assert list(again) == list(idx) and table.num_rows == 3
    clone = idx.copy()
    clone.remove(seg(0, 0, 9).path)
    assert len(idx) == 3 and len(clone) == 2


# -- against a brute-force model ------------------------------------------------------------------------
@st.composite
def segment_layouts(draw):
    """Non-overlapping segments of partitions 0-1 (gaps allowed), timestamps in any order."""
    segments = []
    for p in range(2):
        offset = 0
        for i in range(draw(st.integers(0, 12))):
            offset += draw(st.integers(0, 3))  # a compaction gap before it
            n = draw(st.integers(1, 6))
            lo = draw(st.integers(0, 1000))
            hi = lo + draw(st.integers(0, 1000))
            segments.append(seg(p, offset, offset + n - 1, lo, hi, tag=f"s{i}"))
            offset += n
    return segments


@settings(max_examples=150, deadline=None)
@given(layout=segment_layouts(), data=st.data())
def test_index_agrees_with_a_brute_force_model(layout, data):
    """Random adds (in any order), removes and queries; every lookup matches a linear scan."""
    idx, live = SegmentIndex(), {}
    ops = data.draw(st.lists(st.tuples(st.sampled_from(["add", "add", "remove", "query"]),
                                       st.integers(0, max(len(layout) - 1, 0)), st.integers(-2, 60),
                                       st.integers(-10, 2100)), max_size=40))
    for op, i, offset, ts in ops:
        if op == "add" and layout:
            idx.add(layout[i])
            live[layout[i].path] = layout[i]
        elif op == "remove" and layout:
            idx.remove(layout[i].path)
            live.pop(layout[i].path, None)
        for p in range(2):
            model = sorted((s for s in live.values() if s.partition == p), key=lambda s: s.base_offset)
            assert idx.segments(p) == model
            covering = [s for s in model if s.base_offset <= offset]
            assert idx.segment_for_offset(p, offset) == (covering[-1] if covering else None)
            assert idx.segments_from(p, offset) == [s for s in model if s.last_offset >= offset]
            first_ts = next((k for k, s in enumerate(model) if s.max_timestamp >= ts), len(model))
            assert idx.first_segment_with_max_timestamp_at_least(p, ts) == first_ts
            assert idx.earliest_offset(p) == (model[0].base_offset if model else None)
            assert idx.latest_offset(p) == (model[-1].last_offset + 1 if model else None)
    assert list(SegmentIndex.from_arrow(idx.to_arrow())) == list(idx)
    assert len(idx) == len(live)
