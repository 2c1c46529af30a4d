"""``bench/s3_produce.py`` runs end to end in quick mode: produce over the S3 latency proxy, its request counts
included (numbers are judged by ``make bench``, not here)."""

from __future__ import annotations

import re

from bench_support import run_bench, section


def test_s3_produce_runs_end_to_end(tmp_path):
    """Each root of a quick run (a local directory and S3 Standard's latency, the latter also with the front set for
    latency; the others differ only in the proxy's latency) and body reports its rates, half-rate
    latency, stages, floors and PUTs."""
    s3 = section(run_bench(tmp_path, ["s3_produce"], timeout=600, scale=0.2), "s3_produce")
    for root in ("local", "s3-standard"):
        for body in ("JSON", "ARROW", "KAFKA"):  # the maximum rate, then the paced run's rate, p50 and p99
            assert re.search(rf"\| {root} \| {body} \| [\d,]+ \| \d+\.\d \| [\d,]+ \| \d+\.\d \| \d+\.\d \|",
                             s3), (root, body, s3)
    # librdkafka again with the settings advised on object stores
    assert re.search(r"\| s3-standard \| KAFKA, S3 settings \| [\d,]+ \| \d+\.\d \| [\d,]+ \| \d+\.\d \| \d+\.\d \|"
                     r" PUT \d+", s3), s3
    assert re.search(r"\| s3-standard \| JSON \|.*PUT \d+", s3), "the proxy counted no PUTs"
    # where the half-rate runs' group commits spent their time, from the front's stage histogram
    for body in ("JSON", "ARROW"):
        assert re.search(rf"\| local \| {body} \| \d+\.\d \| - \| - \| - \| \d+\.\d \|", s3), body
        assert re.search(rf"\| s3-standard \| {body} \|( \d+\.\d \|){{5}}", s3), (body, s3)
        # the floor under the half-rate run, from the PUT times the proxy measured in it (no hedging, hedged,
        # every commit PUT sent twice), and the PUTs per request of each
        pair, puts = r"\d+\.\d / \d+\.\d", r"\d+\.\d\d / \d+\.\d\d / \d+\.\d\d"
        assert re.search(rf"\| s3-standard \| {body} \|( {pair} \|){{5}} {puts} \|", s3), (body, s3)

    # S3 Standard again with the front set for latency, JSON and Arrow only, and the goals judged for it too
    tuned = re.escape("s3-standard, latency-tuned")
    for body in ("JSON", "ARROW"):
        assert re.search(rf"\| {tuned} \| {body} \| [\d,]+ \| \d+\.\d \| [\d,]+ \| \d+\.\d \| \d+\.\d \| PUT \d+",
                         s3), (body, s3)
        assert re.search(rf"\| {tuned} \| {body} \|( \d+\.\d \|){{5}}", s3), (body, s3)
    assert not re.search(rf"\| {tuned} \| KAFKA", s3)
    # the goal's p99: both roots' half-rate loads again, at one printed rate, taking turns (one round in quick
    # mode), and their median
    assert re.search(r"maximum rates found above \([\d,]+ and [\d,]+ records/s: the same load on both", s3), s3
    # and the goal's other reading, Arrow at half the goal's own 100 MB/s
    assert "half the goal's own 100 MB/s (500,000 records/s of 100 bytes" in s3, s3
    for root in ("s3-standard", tuned):
        for body in ("JSON", "ARROW", "ARROW at 50 MB/s"):
            assert re.search(rf"\| {root} \| {body} \| \d+\.\d / \d+\.\d \| [\d,]+ \| \d+\.\d \|", s3), (root, body, s3)
        assert re.search(rf"(NOT )?MET: {root}: p99 acknowledgement <= 150 ms at half the goal's rate \(Arrow at 50 "
                         rf"MB/s\) -- p99 \d+\.\d ms \(median of the interleaved runs\)", s3), (root, s3)
        assert re.search(rf"(NOT )?MET: {root}: p99 acknowledgement <= 150 ms at half the maximum rate \(JSON or "
                         rf"Arrow\) -- p99 \d+\.\d ms \(JSON \d+\.\d, Arrow \d+\.\d; medians of the "
                         rf"interleaved runs\)", s3), (root, s3)
        assert re.search(rf"MET: {root}: <= 1 PUT per 4 MB ingested -- 1 PUT per \d+\.\d\d MB", s3), (root, s3)
