"""A sequential consumer on object storage with S3's latency and per-connection bandwidth.

One partition of 100-byte random values in 1 MB segments (the size a group commit of 10,000 records
writes) is filled on a moto server, then drained from the earliest offset by :class:`lakelog.client.Consumer`
(reading the segments itself, as it does; ``poll_arrow``, Kafka's default ``max.partition.fetch.bytes``
of 1 MiB) through :class:`bench.s3_proxy.S3FaultProxy` with no added latency, then the ``s3-express`` and
``s3-standard`` profiles, and from a local root for reference. Reported: records/s and MB/s of values,
the time to the first records (assignment, the first snapshot of the topic, the first fetch), then
records/s and MB/s of values from there to the end, the share of the profile's per-connection bandwidth (the issue's goal: at least 50 % under
``s3-standard``), and the GETs made. Each root's figure is the median of ``repeats`` drains, interleaved.
"""

from __future__ import annotations

import os
import statistics
import time

from bench import BenchContext, BenchResult, Goal, md_table

TITLE = "A sequential consumer on object storage: local, moto, S3 Express and S3 Standard latency"
RECORDS_PER_SEGMENT, VALUE_BYTES = 10_000, 100
GOAL_SHARE = 0.5


def _fill(log, topic: str, segments: int) -> int:
    from lakelog import PartitionBatch
    from lakelog.writer.records import normalize_records

    log.create_topic(topic, 1)
    for _ in range(segments):
        values = os.urandom(RECORDS_PER_SEGMENT * VALUE_BYTES)
        recs = normalize_records([{"value": values[i:i + VALUE_BYTES]}
                                  for i in range(0, len(values), VALUE_BYTES)])
        res = log.append_batches(topic, [PartitionBatch(0, recs)])[0]
        assert not isinstance(res, Exception), res
    return segments * RECORDS_PER_SEGMENT


def _drain(root: str, options: dict, topic: str, expected: int) -> tuple[float, float]:
    """(seconds to the first records, records/s after them) of a consumer reading from the earliest offset."""
    from lakelog.client import Consumer

    consumer = Consumer(root=root, storage_options=options, auto_offset_reset="earliest",
                        max_poll_records=100_000)
    try:
        consumer.assign([(topic, 0)])
        seen, first, start = 0, None, time.perf_counter()
        while seen < expected:
            for table in consumer.poll_arrow(timeout_ms=1000).values():
                if first is None:
                    first, first_rows = time.perf_counter(), table.num_rows
                seen += table.num_rows
        return first - start, (expected - first_rows) / (time.perf_counter() - first)
    finally:
        consumer.close()


def _measure(ctx: BenchContext, moto, segments: int, proxies: dict) -> tuple[int, dict, dict]:
    """Fill the topic, then drain it ``ctx.repeats`` times per root, interleaved."""
    from bench.http_produce import MotoProcess
    from bench.s3_proxy import PROFILES, S3FaultProxy
    from lakelog import Log

    s3_root, local_root, topic = f"s3://{MotoProcess.BUCKET}/consume", str(ctx.workdir / "s3-consume"), "c"
    ctx.progress(f"filling {segments} segments on moto and on a local root")
    expected = _fill(Log(s3_root), topic, segments)
    _fill(Log(local_root), topic, segments)
    backends = ("local", "moto", "s3-express", "s3-standard")
    for name in backends[1:]:
        proxies[name] = S3FaultProxy(moto.endpoint, latency=PROFILES.get(name)).start()
    times: dict[str, list[tuple[float, float]]] = {b: [] for b in backends}
    gets: dict[str, int] = {}
    for rep in range(ctx.repeats):
        for b in backends:
            if b == "local":
                times[b].append(_drain(local_root, {}, topic, expected))
                continue
            proxies[b].reset_stats()
            times[b].append(_drain(s3_root, {"aws_endpoint_url": proxies[b].url}, topic, expected))
            gets[b] = proxies[b].reset_stats().requests["GET"]
            ctx.progress(f"{b} run {rep + 1}: {times[b][-1][1]:,.0f} records/s")
    return expected, times, gets


def run(ctx: BenchContext) -> BenchResult:
    from bench.http_produce import MotoProcess
    from bench.s3_proxy import PROFILES, S3FaultProxy

    segments = ctx.size(100, 3)
    moto = MotoProcess()
    proxies: dict[str, S3FaultProxy] = {}
    try:
        with moto.environment():
            expected, times, gets = _measure(ctx, moto, segments, proxies)
    finally:
        for p in proxies.values():
            p.stop()
        moto.close()
    rows, metrics = [], {}
    for b in ("local", "moto", "s3-express", "s3-standard"):
        first_ms = statistics.median(t for t, _ in times[b]) * 1000
        rate = statistics.median(r for _, r in times[b])
        mb_s = rate * VALUE_BYTES / 1e6
        limit = PROFILES[b].mb_per_s if b in PROFILES else None
        share = mb_s / limit if limit else None
        rows.append([b, f"{first_ms:,.0f}", f"{rate:,.0f}", f"{mb_s:.1f}", f"{limit:.0f}" if limit else "(none)",
                     f"{share:.0%}" if share is not None else "", f"{gets[b]:,}" if b in gets else "(local disk)"])
        metrics[f"{b}_mb_s"] = mb_s
    share = metrics["s3-standard_mb_s"] / PROFILES["s3-standard"].mb_per_s
    goals = [Goal(f"s3-standard: a sequential consumer reaches >= {GOAL_SHARE:.0%} of the per-connection bandwidth",
                  share >= GOAL_SHARE, f"{share:.0%} ({metrics['s3-standard_mb_s']:.1f} of "
                  f"{PROFILES['s3-standard'].mb_per_s:.0f} MB/s)")]
    header = ["root", "ms to the first records", "records/s after them", "MB/s of values",
              "proxy MB/s per connection", "share", "GETs per drain"]
    text = (f"One partition, {expected:,} records of {VALUE_BYTES} random bytes in {segments} segments of "
            f"{RECORDS_PER_SEGMENT:,} records (about 1 MB each); `Consumer(root=...)` with Kafka's default "
            f"max.partition.fetch.bytes (1 MiB), `poll_arrow`; median of {ctx.repeats} interleaved drains.\n\n"
            + md_table(header, rows))
    return BenchResult(markdown=text, summary=[" | ".join(r[:6]) for r in rows], metrics=metrics, goals=goals)
