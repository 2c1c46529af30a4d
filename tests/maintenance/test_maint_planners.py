"""The pure planners, table-driven: retention eligibility, cleanable ranges, rewrite groups, merge groups,
vacuum eligibility, tombstone stamps -- plus a hypothesis check of retention against Kafka's rules."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakelog.maintenance.cleaner_plan import SegmentOutcome, group_rewrites, plan_partition_cleaning
from lakelog.maintenance.segment_merge_plan import plan_partition_merge
from lakelog.maintenance.retention_plan import BY_LOG_START, BY_SIZE, BY_TIME, plan_partition_retention
from lakelog.maintenance.tombstone_horizon import TombstoneStamps, expired, runs_for
from lakelog.maintenance.vacuum_plan import ORPHAN, REMOVED, StoredFile, plan_vacuum

from maint_support import T0, seg

DAY = 86_400_000


def three_segments(**kw):
    return [seg(0, 9, max_ts_ms=T0, **kw), seg(10, 19, max_ts_ms=T0 + DAY, **kw), seg(20, 29, max_ts_ms=T0 + 2 * DAY, **kw)]


# ---- retention ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("now, retention_ms, retention_bytes, floor, removed, reasons, new_start", [
    # nothing expired
    (T0 + DAY, 2 * DAY, -1, 0, 0, [], 0),
    # the oldest is past retention.ms (strictly older than now - retention)
    (T0 + 2 * DAY + 1, 2 * DAY, -1, 0, 1, [BY_TIME], 10),
    (T0 + 2 * DAY, 2 * DAY, -1, 0, 0, [], 0),
    # everything expired: the newest segment stays
    (T0 + 100 * DAY, DAY, -1, 0, 2, [BY_TIME, BY_TIME], 20),
    # retention.ms = -1 keeps forever
    (T0 + 100 * DAY, -1, -1, 0, 0, [], 0),
    # retention.bytes: 300 bytes, limit 150 -> the oldest goes (300-150 >= 100), the next does not (50 < 100)
    (T0, -1, 150, 0, 1, [BY_SIZE], 10),
    (T0, -1, 100, 0, 2, [BY_SIZE, BY_SIZE], 20),
    (T0, -1, 0, 0, 2, [BY_SIZE, BY_SIZE], 20),
    # delete-records floor: a segment goes once the next starts at or below it; the start sits at the floor
    (T0, -1, -1, 15, 1, [BY_LOG_START], 15),
    (T0, -1, -1, 20, 2, [BY_LOG_START, BY_LOG_START], 20),
    (T0, -1, -1, 30, 2, [BY_LOG_START, BY_LOG_START], 30),
    # rules compose in Kafka's order: time, then size, then log start
    (T0 + DAY * 2 + 1, 2 * DAY, 200, 0, 1, [BY_TIME], 10),
    (T0 + DAY * 2 + 1, 2 * DAY, 100, 25, 2, [BY_TIME, BY_SIZE], 25),
])
def test_retention_table(now, retention_ms, retention_bytes, floor, removed, reasons, new_start):
    segs = three_segments()
    plan = plan_partition_retention(segs, partition=0, log_start_floor=floor, high_watermark=30, now_ms=now,
                                    retention_ms=retention_ms, retention_bytes=retention_bytes)
    assert plan.removed == tuple(segs[:removed])
    assert list(plan.reasons) == reasons
    assert plan.new_log_start_offset == new_start
    assert plan.new_log_start_floor == max(floor, new_start)


def test_retention_without_delete_policy_only_applies_the_log_start_offset():
    segs = three_segments()
    plan = plan_partition_retention(segs, partition=0, log_start_floor=8, high_watermark=30, now_ms=T0 + 99 * DAY,
                                    retention_ms=1, retention_bytes=0, delete_policy=False)
    assert plan.removed == () and plan.new_log_start_offset == 8
    plan = plan_partition_retention(segs, partition=0, log_start_floor=22, high_watermark=30, now_ms=T0,
                                    retention_ms=1, retention_bytes=0, delete_policy=False)
    assert list(plan.reasons) == [BY_LOG_START, BY_LOG_START]


def test_retention_stops_at_the_first_segment_that_is_not_expired():
    """Timestamps need not be monotonic: a young segment protects the older ones behind it (as in Kafka)."""
    segs = [seg(0, 9, max_ts_ms=T0), seg(10, 19, max_ts_ms=T0 + 50 * DAY), seg(20, 29, max_ts_ms=T0), seg(30, 39)]
    plan = plan_partition_retention(segs, partition=0, log_start_floor=0, high_watermark=40, now_ms=T0 + 10 * DAY,
                                    retention_ms=DAY, retention_bytes=-1)
    assert plan.removed == (segs[0],)


def test_retention_uses_the_commit_time_of_a_segment_without_timestamps():
    from dataclasses import replace

    empty = replace(seg(0, -1, records=0, mtime=T0), max_timestamp=2**63 - 1)  # no timestamp statistics
    segs = [empty, seg(5, 9, max_ts_ms=T0 + 5 * DAY)]
    plan = plan_partition_retention(segs, partition=0, log_start_floor=0, high_watermark=10, now_ms=T0 + 2 * DAY,
                                    retention_ms=DAY, retention_bytes=-1)
    assert plan.removed == (empty,)


def test_retention_of_an_empty_partition():
    plan = plan_partition_retention([], partition=0, log_start_floor=0, high_watermark=0, now_ms=T0,
                                    retention_ms=0, retention_bytes=0)
    assert plan.removed == () and plan.new_log_start_offset == 0


def _kafka_retention(segs, now, retention_ms, retention_bytes, floor):
    """Brute force: the longest deletable prefix under each rule in turn, never the newest segment."""
    n = 0
    while n < len(segs) - 1 and retention_ms >= 0 and now - segs[n].max_timestamp // 1000 > retention_ms:
        n += 1
    if retention_bytes >= 0:
        while n < len(segs) - 1 and sum(s.bytes for s in segs[n + 1:]) >= retention_bytes:
            n += 1
    while n < len(segs) - 1 and segs[n + 1].base_offset <= floor:
        n += 1
    return n


@settings(max_examples=300, deadline=None)
@given(sizes=st.lists(st.tuples(st.integers(1, 5), st.integers(1, 500), st.integers(0, 10)), min_size=0, max_size=12),
       now_days=st.integers(0, 12), retention=st.sampled_from([-1, 0, DAY, 3 * DAY]),
       limit=st.sampled_from([-1, 0, 100, 700, 5000]), floor_frac=st.floats(0, 1.2))
def test_retention_matches_kafkas_rules(sizes, now_days, retention, limit, floor_frac):
    segs, base = [], 0
    for count, size, day in sizes:
        segs.append(seg(base, base + count - 1, bytes=size, max_ts_ms=T0 + day * DAY))
        base += count
    floor = int(base * floor_frac)
    floor = min(floor, base)
    plan = plan_partition_retention(segs, partition=0, log_start_floor=floor, high_watermark=base,
                                    now_ms=T0 + now_days * DAY, retention_ms=retention, retention_bytes=limit)
    n = _kafka_retention(segs, T0 + now_days * DAY, retention, limit, floor)
    assert plan.removed == tuple(segs[:n])
    if segs:
        assert plan.kept and plan.kept[-1] == segs[-1]  # never the newest
        assert plan.new_log_start_offset == min(max(floor, segs[n].base_offset), base)


# ---- compaction planning ---------------------------------------------------------------------------------------
def test_cleanable_range_of_a_never_cleaned_partition():
    segs = three_segments()
    pc = plan_partition_cleaning(segs, partition=0, log_start_offset=0, checkpoint=None, now_ms=T0 + 9 * DAY)
    assert (pc.first_dirty_offset, pc.first_uncleanable_offset) == (0, 20)
    assert pc.clean == () and pc.dirty == tuple(segs[:2])
    assert pc.dirty_ratio == 1.0 and pc.needs_cleaning(0.5)


def test_checkpoint_splits_clean_and_dirty_and_sets_the_ratio():
    segs = [seg(0, 9, bytes=300), seg(10, 19, bytes=100), seg(20, 29, bytes=100), seg(30, 39)]
    pc = plan_partition_cleaning(segs, partition=0, log_start_offset=0, checkpoint=10, now_ms=T0)
    assert pc.clean == (segs[0],) and pc.dirty == (segs[1], segs[2])
    assert pc.dirty_ratio == pytest.approx(200 / 500)
    assert pc.needs_cleaning(0.3) and not pc.needs_cleaning(0.4) and not pc.needs_cleaning(0.5)


@pytest.mark.parametrize("checkpoint, log_start, first_dirty", [
    (None, 0, 0), (20, 0, 20), (30, 0, 30),  # a checkpoint at the newest base: nothing dirty
    (5, 10, 10),  # below the log start offset: reset to it (Kafka)
    (99, 0, 0),  # past the newest segment: reset to the log start offset (Kafka)
])
def test_checkpoint_validation(checkpoint, log_start, first_dirty):
    segs = [seg(0, 9), seg(10, 19), seg(20, 29), seg(30, 39)]
    pc = plan_partition_cleaning(segs, partition=0, log_start_offset=log_start, checkpoint=checkpoint, now_ms=T0)
    assert pc.first_dirty_offset == first_dirty
    assert pc.first_uncleanable_offset == 30


def test_min_compaction_lag_holds_back_young_dirty_segments():
    segs = [seg(0, 9, max_ts_ms=T0), seg(10, 19, max_ts_ms=T0 + 5000), seg(20, 29, max_ts_ms=T0 + 9000), seg(30, 39)]
    pc = plan_partition_cleaning(segs, partition=0, log_start_offset=0, checkpoint=None, now_ms=T0 + 10_000,
                                 min_compaction_lag_ms=6000)
    assert pc.first_uncleanable_offset == 10 and pc.dirty == (segs[0],)
    pc = plan_partition_cleaning(segs, partition=0, log_start_offset=0, checkpoint=None, now_ms=T0 + 10_000,
                                 min_compaction_lag_ms=20_000)
    assert pc.first_uncleanable_offset == 0 and pc.dirty == () and not pc.needs_cleaning(0.0)


def test_segments_below_the_log_start_offset_are_set_apart_and_a_single_segment_is_not_cleanable():
    segs = [seg(0, 9), seg(10, 19), seg(20, 29), seg(30, 39)]
    pc = plan_partition_cleaning(segs, partition=0, log_start_offset=21, checkpoint=None, now_ms=T0)
    assert pc.below_start == (segs[0], segs[1]) and pc.dirty == (segs[2],) and pc.first_dirty_offset == 21
    pc = plan_partition_cleaning([seg(0, 9)], partition=0, log_start_offset=0, checkpoint=None, now_ms=T0)
    assert pc.cleanable == () and pc.first_uncleanable_offset == 0


def outcome(base, kept, dropped, unstamped=0, size=100):
    return SegmentOutcome(seg(base, base + 9, bytes=size), kept, dropped, unstamped)


def test_rewrite_groups_join_adjacent_losers_only_up_to_segment_bytes():
    outs = [outcome(0, 5, 5), outcome(10, 10, 0), outcome(20, 2, 8), outcome(30, 0, 10), outcome(40, 10, 0, 1),
            outcome(50, 10, 0)]
    groups = group_rewrites(outs, segment_bytes=1000)
    assert [[s.base_offset for s in g] for g in groups] == [[0], [20, 30, 40]]
    # estimated output sizes: 20 + 0 + 100 > 100 -> split before 40
    groups = group_rewrites(outs, segment_bytes=100)
    assert [[s.base_offset for s in g] for g in groups] == [[0], [20, 30], [40]]


# ---- merge planning ----------------------------------------------------------------------------------------------
def test_merge_groups_by_segment_bytes_and_segment_ms():
    segs = [seg(0, 9, bytes=40, max_ts_ms=T0), seg(10, 19, bytes=40, max_ts_ms=T0 + 10),
            seg(20, 29, bytes=40, max_ts_ms=T0 + 20), seg(30, 39, bytes=200), seg(40, 49, bytes=40, max_ts_ms=T0 + 30),
            seg(50, 59, bytes=40, max_ts_ms=T0 + 40)]
    groups = plan_partition_merge(segs, partition=0, segment_bytes=100, segment_ms=10**9)
    assert [[s.base_offset for s in g.segments] for g in groups] == [[0, 10], [40, 50]]  # 20 alone, 30 full
    groups = plan_partition_merge(segs, partition=0, segment_bytes=1000, segment_ms=25)
    assert [[s.base_offset for s in g.segments] for g in groups] == [[0, 10, 20, 30], [40, 50]]
    groups = plan_partition_merge(segs, partition=0, segment_bytes=1000, segment_ms=15)
    assert [[s.base_offset for s in g.segments] for g in groups] == [[0, 10], [40, 50]]
    groups = plan_partition_merge(segs, partition=0, segment_bytes=1000, segment_ms=10**9, boundaries=[30])
    assert [[s.base_offset for s in g.segments] for g in groups] == [[0, 10, 20], [30, 40, 50]]


# ---- vacuum planning ---------------------------------------------------------------------------------------------
def test_vacuum_eligibility():
    now = T0 + DAY
    files = [StoredFile("partition=0/live", 1, 0), StoredFile("partition=0/removed-old", 2, 0),
             StoredFile("partition=0/removed-new", 3, 0), StoredFile("partition=0/orphan-old", 4, now - 120_000),
             StoredFile("partition=0/orphan-new", 5, now - 10)]
    plan = plan_vacuum(files, live={"partition=0/live"},
                       removed_at={"partition=0/removed-old": now - 60_000, "partition=0/removed-new": now - 59_999,
                                   "partition=0/live": 0},
                       now_ms=now, delete_delay_ms=60_000, orphan_min_age_ms=1000)
    assert [(d.file.path, d.reason) for d in plan.deletions] == [
        ("partition=0/orphan-old", ORPHAN), ("partition=0/removed-old", REMOVED)]
    assert plan.waiting == 2 and plan.live == 1 and plan.bytes == 6
    # the orphan age is at least the delete delay
    plan = plan_vacuum(files, live=set(), removed_at={}, now_ms=now, delete_delay_ms=20_000, orphan_min_age_ms=0)
    assert [d.file.path for d in plan.deletions] == ["partition=0/live", "partition=0/orphan-old",
                                                     "partition=0/removed-new", "partition=0/removed-old"]


# ---- tombstone stamps --------------------------------------------------------------------------------------------
def test_tombstone_stamps_round_trip_and_lookup():
    runs = runs_for([3, 5, 9, 12], [100, 100, 200, 200])
    assert runs == ((3, 5, 100), (9, 12, 200))
    stamps = TombstoneStamps.from_metadata(TombstoneStamps(4, runs).to_metadata())
    assert stamps.count == 4 and stamps.runs == runs
    assert stamps.pass_times([3, 4, 5, 6, 9, 13]) == [100, 100, 100, None, 200, None]
    assert TombstoneStamps.from_metadata(None).may_have_tombstones
    assert not TombstoneStamps(0).may_have_tombstones
    assert TombstoneStamps.from_metadata({b"lakelog.tombstones": b"not json"}) == TombstoneStamps()
    assert expired(100, 150, 50) and not expired(100, 149, 50) and not expired(None, 10**15, 0)


# ---- the cleaner's rule -------------------------------------------------------------------------------------------
def test_the_cleaner_rule_per_record():
    import pyarrow as pa

    from lakelog.maintenance.key_map import MAP_SCHEMA, CleaningRange, KeyMap, decide

    key_map = KeyMap(pa.table({"partition": [0, 0, 1], "key": [b"a", b"b", b"a"], "latest": [7, 3, 99]},
                              schema=MAP_SCHEMA))
    assert len(key_map) == 3
    offsets = pa.array([1, 2, 3, 4, 5, 6, 7, 8], pa.int64())
    keys = pa.array([b"a", b"b", b"b", None, b"c", b"t", b"a", b"a"], pa.binary())
    tombs = pa.array([False, False, False, False, False, True, False, False])
    stamped = TombstoneStamps(1, ((6, 6, 1000),))
    # range [2, 8): offset 1 and 8 are outside and kept as they are
    d = decide(offsets, keys, tombs, stamped, key_map, 0, CleaningRange(2, 8, now_ms=1500, delete_retention_ms=500))
    #                    1     2      3     4(no key) 5(c)  6(tomb expired) 7 (latest a) 8
    assert d.keep.tolist() == [True, False, True, False, True, False, True, True]
    assert d.dropped == 3 and d.unstamped == 0
    d = decide(offsets, keys, tombs, stamped, key_map, 0, CleaningRange(2, 8, now_ms=1499, delete_retention_ms=500))
    assert d.keep[5]  # the horizon is 1500: not yet
    d = decide(offsets, keys, tombs, TombstoneStamps(), key_map, 0, CleaningRange(2, 8, 10**15, 0))
    assert d.keep[5] and d.stamp.tolist() == [False] * 5 + [True, False, False]  # first reached: stamped, kept
    d = decide(offsets, keys, None, TombstoneStamps(0), key_map, 1, CleaningRange(0, 100, 0, 0))
    assert d.keep.tolist() == [False, True, True, False, True, True, False, False]  # partition 1: a -> 99
