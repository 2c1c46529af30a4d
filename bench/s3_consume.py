"""A sequential consumer on object storage with S3's latency and per-connection bandwidth.

One partition of 100-byte random values in 1 MB segments (the size a group commit of 10,000 records
writes) is filled on a moto server, then drained from the earliest offset by :class:`lakelog.client.Consumer`
(reading the segments itself, as it does; ``poll_arrow``, Kafka's default ``max.partition.fetch.bytes``
of 1 MiB) through :class:`bench.s3_proxy.S3FaultProxy` with no added latency, then the ``s3-express`` and
``s3-standard`` profiles, and from a local root for reference. Reported: records/s and MB/s of values,
the time to the first records (assignment, the first snapshot of the topic, the first fetch), then
records/s and MB/s of values from there to the end (also through a front's HTTP fetch), the share of the profile's per-connection bandwidth (the issue's goal: at least 50 % under
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
READERS = ("Consumer", "HTTP fetch")
HTTP_RECORDS = 20_000  # records per HTTP fetch


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


def _http_drain(url: str, topic: str, expected: int) -> tuple[float, float]:
    """The same as :func:`_drain`, through a front's fetch (``GET .../records``, :data:`HTTP_RECORDS` a request)."""
    import httpx

    with httpx.Client(base_url=url, timeout=120) as http:
        seen, offset, first, start = 0, 0, None, time.perf_counter()
        while seen < expected:
            r = http.get(f"/v1/topics/{topic}/partitions/0/records",
                         params={"offset": offset, "max_records": HTTP_RECORDS, "encoding": "base64"})
            r.raise_for_status()
            body = r.json()
            if first is None:
                first, first_rows = time.perf_counter(), len(body["records"])
            seen += len(body["records"])
            offset = body["next_offset"]
        return first - start, (expected - first_rows) / max(time.perf_counter() - first, 1e-9)


def _measure(ctx: BenchContext, moto, segments: int, proxies: dict, fronts: dict) -> tuple[int, dict, dict]:
    """Fill the topic, then drain it ``ctx.repeats`` times per root and reader, interleaved."""
    from bench.http_produce import FrontProcess, MotoProcess
    from bench.s3_proxy import PROFILES, S3FaultProxy, bench_roots
    from lakelog import Log

    s3_root, local_root, topic = f"s3://{MotoProcess.BUCKET}/consume", str(ctx.workdir / "s3-consume"), "c"
    ctx.progress(f"filling {segments} segments on moto and on a local root")
    expected = _fill(Log(s3_root), topic, segments)
    _fill(Log(local_root), topic, segments)
    backends = bench_roots(ctx.quick)
    for name in backends[1:]:
        proxies[name] = S3FaultProxy(moto.endpoint, latency=PROFILES.get(name)).start()
    for name in backends:
        root, env = (local_root, {}) if name == "local" else (s3_root, {"AWS_ENDPOINT_URL": proxies[name].url})
        fronts[name] = FrontProcess(root, ctx.workdir, env=env)
    times: dict[tuple[str, str], list[tuple[float, float]]] = {}
    gets: dict[tuple[str, str], int] = {}
    for rep in range(ctx.repeats):
        for b in backends:
            for reader in READERS:
                if b != "local":
                    proxies[b].reset_stats()
                if reader == "Consumer":
                    options = {} if b == "local" else {"aws_endpoint_url": proxies[b].url}
                    t = _drain(local_root if b == "local" else s3_root, options, topic, expected)
                else:
                    t = _http_drain(fronts[b].url, topic, expected)
                times.setdefault((b, reader), []).append(t)
                if b != "local":
                    gets[(b, reader)] = proxies[b].reset_stats().requests["GET"]
                ctx.progress(f"{b} {reader} run {rep + 1}: {t[1]:,.0f} records/s")
    return expected, times, gets


def run(ctx: BenchContext) -> BenchResult:
    from bench.http_produce import MotoProcess
    from bench.s3_proxy import PROFILES, S3FaultProxy

    segments = ctx.size(100, 3)
    moto = MotoProcess()
    proxies: dict[str, S3FaultProxy] = {}
    fronts: dict = {}
    try:
        with moto.environment():
            expected, times, gets = _measure(ctx, moto, segments, proxies, fronts)
    finally:
        for f in fronts.values():
            f.close()
        for p in proxies.values():
            p.stop()
        moto.close()
    rows, metrics = [], {}
    for (b, reader), runs in times.items():
        first_ms = statistics.median(t for t, _ in runs) * 1000
        rate = statistics.median(r for _, r in runs)
        mb_s = rate * VALUE_BYTES / 1e6
        limit = PROFILES[b].mb_per_s if b in PROFILES else None
        share = mb_s / limit if limit else None
        rows.append([b, reader, f"{first_ms:,.0f}", f"{rate:,.0f}", f"{mb_s:.1f}",
                     f"{limit:.0f}" if limit else "(none)", f"{share:.0%}" if share is not None else "",
                     f"{gets[(b, reader)]:,}" if (b, reader) in gets else "(local disk)"])
        metrics[f"{b}_{reader.replace(' ', '_')}_mb_s"] = mb_s
    share = metrics["s3-standard_Consumer_mb_s"] / PROFILES["s3-standard"].mb_per_s
    goals = [Goal(f"s3-standard: a sequential consumer reaches >= {GOAL_SHARE:.0%} of the per-connection bandwidth",
                  share >= GOAL_SHARE, f"{share:.0%} ({metrics['s3-standard_Consumer_mb_s']:.1f} of "
                  f"{PROFILES['s3-standard'].mb_per_s:.0f} MB/s)")]
    header = ["root", "reader", "ms to the first records", "records/s after them", "MB/s of values",
              "proxy MB/s per connection", "share", "GETs per drain"]
    text = (f"One partition, {expected:,} records of {VALUE_BYTES} random bytes in {segments} segments of "
            f"{RECORDS_PER_SEGMENT:,} records (about 1 MB each); `Consumer(root=...)` with Kafka's default "
            f"max.partition.fetch.bytes (1 MiB), `poll_arrow`; HTTP fetch: a `lakelog serve` front on the same root, "
            f"`GET .../records` of {HTTP_RECORDS:,} records (base64) a request; median of {ctx.repeats} interleaved "
            f"drains.\n\n"
            + md_table(header, rows))
    return BenchResult(markdown=text, summary=[" | ".join(r[:7]) for r in rows], metrics=metrics, goals=goals)
