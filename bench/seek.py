"""Seek latency: lakelog's Arrow index versus filtering the Delta snapshot's add actions.

The topic: one partition of 10,000 segments of 10 records each (dense offsets;
timestamps rise by ~1 s per segment with up to 2 s of jitter, so they are not
monotonic), committed as 500 Delta commits of 20 add actions each -- segment
files written by lakelog's segment writer, commit files by lakelog's
put-if-absent writer, then a delta-rs checkpoint as delta-rs would have left.

A *seek* locates the segment holding an offset (offset -> segment) or the first
segment that can hold a timestamp >= T (timestamp -> segment, the step before
reading that segment for the exact offset):

* **lakelog warm**: a ``Log`` that has loaded the index; each lookup is
  ``log.snapshot(topic)`` (one existence probe for a newer commit) plus the
  index's bisection -- what ``fetch`` and ``offsets_for_times`` do.
* **lakelog cold**: a fresh ``Log`` (persisted Arrow index + log tail) and one lookup.
* **add-action scan, warm**: a loaded ``DeltaTable``; each lookup is
  ``get_add_actions(flatten=True)`` and an Arrow filter on the min/max offset or
  timestamp statistics.  Also shown: the filter alone on a cached add-action table.
* **add-action scan, cold**: ``DeltaTable(uri)``, ``get_add_actions`` and the filter.

Also shown: end to end timestamp -> exact offset (``Log.offsets_for_times``,
which reads the located segment's offset and timestamp columns).
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from bench import BenchContext, BenchResult, Goal, md_table, percentile

TITLE = "Seek latency: Arrow index vs Delta add-action scan"
TOPIC = "seek"
SEGMENTS = 10_000
SEGMENTS_PER_COMMIT = 20
RECORDS_PER_SEGMENT = 10
GOAL_WARM_MS = 5.0
GOAL_SPEEDUP = 10.0


def build_topic(root_dir: Path, segments: int, per_commit: int, records: int) -> tuple[int, int, int]:
    """Create the topic; returns (high watermark, min timestamp ms, max timestamp ms)."""
    from deltalake import DeltaTable

    from lakelog import Log
    from lakelog.storage.delta_commit import put_if_absent
    from lakelog.storage.delta_log import commit_path, encode_actions
    from lakelog.storage.record_schema import FILE_SCHEMA, TIMESTAMP_TYPE
    from lakelog.storage.topic_snapshot import leo_app
    from lakelog.writer.segment_writer import write_segment

    log = Log(str(root_dir))
    log.create_topic(TOPIC, 1)
    root = log.root
    rng = np.random.default_rng(1)
    t0_ms = int(time.time() * 1000) - segments * 1000 - 10_000
    value = pa.array([b"v" * 100] * records, pa.binary())
    headers = pa.nulls(records, FILE_SCHEMA.field("headers").type)
    version = 0
    for first in range(0, segments, per_commit):
        adds = []
        for i in range(first, min(first + per_commit, segments)):
            base = i * records
            ts_ms = t0_ms + i * 1000 + rng.integers(0, 2000, size=records)
            table = pa.table({
                "offset": pa.array(np.arange(base, base + records, dtype=np.int64)),
                "timestamp": pa.array(ts_ms * 1000).view(TIMESTAMP_TYPE),
                "timestampType": pa.array(np.zeros(records, np.int32)),
                "key": pa.array([b"k%d" % (base + j) for j in range(records)], pa.binary()),
                "value": value,
                "headers": headers,
                "producerId": pa.array(np.full(records, -1, np.int64)),
                "producerEpoch": pa.array(np.full(records, -1, np.int16)),
                "sequence": pa.array(np.full(records, -1, np.int32)),
            }, schema=FILE_SCHEMA)
            a = write_segment(root, TOPIC, 0, table)
            adds.append({"add": {"path": a.path, "partitionValues": dict(a.partition_values), "size": a.size,
                                 "modificationTime": a.modification_time, "dataChange": True, "stats": a.stats}})
        hw = min(first + per_commit, segments) * records
        version += 1
        now = int(time.time() * 1000)
        put_if_absent(root, commit_path(f"topics/{TOPIC}", version), encode_actions([
            {"commitInfo": {"timestamp": now, "operation": "WRITE",
                            "operationParameters": {"mode": "Append", "partitionBy": json.dumps(["partition"])},
                            "lakelog.operation": "append"}},
            *adds,
            {"txn": {"appId": leo_app(0), "version": hw, "lastUpdated": now}},
        ]), fsync=False)
    DeltaTable(root.uri_for("topics", TOPIC)).create_checkpoint()
    snap = Log(str(root_dir)).snapshot(TOPIC)
    snap.persist(root)  # as a writer leaves it
    return segments * records, t0_ms, t0_ms + segments * 1000 + 2000


def _timed(fn, args_list) -> list[float]:
    """Milliseconds per call of ``fn(*args)`` for each args tuple."""
    out = []
    for args in args_list:
        started = time.perf_counter_ns()
        fn(*args)
        out.append((time.perf_counter_ns() - started) / 1e6)
    return out


def _scan_offset(actions: pa.Table, offset: int) -> str:
    hit = actions.filter(pc.and_(pc.equal(actions["partition.partition"], 0),
                                 pc.and_(pc.less_equal(actions["min.offset"], offset),
                                         pc.greater_equal(actions["max.offset"], offset))))
    return hit["path"][0].as_py()


def _scan_timestamp(actions: pa.Table, ts_ms: int) -> str:
    ts = pa.scalar(ts_ms * 1000, pa.int64()).cast(actions.schema.field("max.timestamp").type)
    hit = actions.filter(pc.and_(pc.equal(actions["partition.partition"], 0),
                                 pc.greater_equal(actions["max.timestamp"], ts)))
    return hit["path"][pc.index(hit["min.offset"], pc.min(hit["min.offset"])).as_py()].as_py()


def run(ctx: BenchContext) -> BenchResult:
    from deltalake import DeltaTable

    from lakelog import Log
    from lakelog.reader.log_reader import offset_for_timestamp

    segments = ctx.size(SEGMENTS, 200)
    lookups = ctx.size(2000, 50)
    scans = ctx.size(100, 10)
    colds = ctx.size(10, 2)
    root_dir = ctx.workdir / "root"
    started = time.perf_counter()
    hw, ts_lo, ts_hi = build_topic(root_dir, segments, SEGMENTS_PER_COMMIT, RECORDS_PER_SEGMENT)
    build_s = time.perf_counter() - started
    ctx.progress(f"built {segments:,} segments in {build_s:.1f} s")
    rnd = random.Random(7)
    offsets = [(rnd.randrange(hw),) for _ in range(lookups)]
    stamps = [(rnd.randrange(ts_lo, ts_hi),) for _ in range(lookups)]
    uri = str(root_dir / "topics" / TOPIC)

    log = Log(str(root_dir))
    snap = log.snapshot(TOPIC)
    assert len(snap.index) == segments, f"index holds {len(snap.index)} segments, expected {segments}"

    def warm_offset(o):
        seg = log.snapshot(TOPIC).index.segment_for_offset(0, o)
        assert seg.base_offset <= o <= seg.last_offset
        return seg

    def warm_timestamp(ts):
        index = log.snapshot(TOPIC).index
        return index.segment_at(0, index.first_segment_with_max_timestamp_at_least(0, ts * 1000))

    def index_offset(o):
        return snap.index.segment_for_offset(0, o)

    def index_timestamp(ts):
        return snap.index.first_segment_with_max_timestamp_at_least(0, ts * 1000)

    dt = DeltaTable(uri)
    cached = pa.table(dt.get_add_actions(flatten=True))

    def scan_offset(o):
        return _scan_offset(pa.table(dt.get_add_actions(flatten=True)), o)

    def scan_timestamp(ts):
        return _scan_timestamp(pa.table(dt.get_add_actions(flatten=True)), ts)

    # the two methods must agree before their speed means anything
    for (o,), (ts,) in zip(offsets[:20], stamps[:20]):
        assert warm_offset(o).path == scan_offset(o), f"offset {o}: index and add actions disagree"
        assert warm_timestamp(ts).path == scan_timestamp(ts), f"timestamp {ts}: index and add actions disagree"

    def cold_lakelog(o):
        return Log(str(root_dir)).snapshot(TOPIC).index.segment_for_offset(0, o)

    def cold_delta(o):
        return _scan_offset(pa.table(DeltaTable(uri).get_add_actions(flatten=True)), o)

    def exact_offset(ts):
        return offset_for_timestamp(log.root, log.snapshot(TOPIC), 0, ts)

    results = {
        ("offset -> segment", "lakelog warm (probe + index)"): _timed(warm_offset, offsets),
        ("offset -> segment", "lakelog index lookup only"): _timed(index_offset, offsets),
        ("offset -> segment", "add-action scan warm (get_add_actions + filter)"): _timed(scan_offset,
                                                                                         offsets[:scans]),
        ("offset -> segment", "add-action filter only (cached Arrow table)"): _timed(
            lambda o: _scan_offset(cached, o), offsets[:scans]),
        ("offset -> segment", "lakelog cold (new Log: index file + tail)"): _timed(cold_lakelog, offsets[:colds]),
        ("offset -> segment", "add-action scan cold (DeltaTable open + scan)"): _timed(cold_delta, offsets[:colds]),
        ("timestamp -> segment", "lakelog warm (probe + index)"): _timed(warm_timestamp, stamps),
        ("timestamp -> segment", "lakelog index lookup only"): _timed(index_timestamp, stamps),
        ("timestamp -> segment", "add-action scan warm (get_add_actions + filter)"): _timed(scan_timestamp,
                                                                                            stamps[:scans]),
        ("timestamp -> segment", "add-action filter only (cached Arrow table)"): _timed(
            lambda ts: _scan_timestamp(cached, ts), stamps[:scans]),
        ("timestamp -> exact offset", "lakelog warm, reads the segment (offsets_for_times)"): _timed(
            exact_offset, stamps[:scans]),
    }
    rows, metrics = [], {"segments": segments, "build_seconds": build_s}
    for (kind, method), ms in results.items():
        p50, p99 = percentile(ms, 50), percentile(ms, 99)
        rows.append([kind, method, len(ms), f"{p50:.3f}", f"{p99:.3f}"])
        key = f"{kind.split()[0]}_{method.split(' (')[0].replace(' ', '_').replace('-', '_')}"
        metrics[f"{key}_p50_ms"], metrics[f"{key}_p99_ms"] = p50, p99

    goals, summary = [], []
    for kind in ("offset -> segment", "timestamp -> segment"):
        warm = results[(kind, "lakelog warm (probe + index)")]
        scan = results[(kind, "add-action scan warm (get_add_actions + filter)")]
        p99, speedup = percentile(warm, 99), percentile(scan, 50) / percentile(warm, 50)
        goals.append(Goal(f"warm {kind} <= {GOAL_WARM_MS:g} ms (p99)", p99 <= GOAL_WARM_MS, f"p99 {p99:.3f} ms"))
        goals.append(Goal(f"warm {kind} >= {GOAL_SPEEDUP:g}x faster than the add-action scan (p50)",
                          speedup >= GOAL_SPEEDUP, f"{speedup:,.0f}x"))
        summary.append(f"{kind}: lakelog warm p50 {percentile(warm, 50):.3f} ms p99 {p99:.3f} ms; add-action "
                       f"scan p50 {percentile(scan, 50):.3f} ms; {speedup:,.0f}x")
    markdown = "\n\n".join([
        f"{segments:,} segments in one partition, {segments // SEGMENTS_PER_COMMIT} commits of "
        f"{SEGMENTS_PER_COMMIT} adds (built in {build_s:.0f} s). Latency in ms over the number of lookups shown "
        "(random offsets / timestamps); the two methods are checked to find the same segment.",
        md_table(["seek", "method", "lookups", "p50 ms", "p99 ms"], rows),
    ])
    return BenchResult(markdown=markdown, summary=summary, metrics=metrics, goals=goals)
