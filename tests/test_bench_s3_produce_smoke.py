"""``bench/s3_produce.py`` runs end to end in quick mode: produce over the S3 latency proxy, its request counts
included (numbers are judged by ``make bench``, not here)."""

from __future__ import annotations

import re

from bench_support import run_bench, section


def test_s3_produce_runs_end_to_end(tmp_path):
    """Each root of a quick run (a local directory and S3 Standard's latency, the latter also with two copies
    of each commit PUT; the others differ only in the proxy's latency) and body reports its rates, half-rate
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

    # S3 Standard again with commit_put_copies=2, JSON and Arrow only, and its p99s beside the goal's
    copies = re.escape("s3-standard, commit_put_copies=2")
    for body in ("JSON", "ARROW"):
        assert re.search(rf"\| {copies} \| {body} \| [\d,]+ \| \d+\.\d \| [\d,]+ \| \d+\.\d \| \d+\.\d \| PUT \d+",
                         s3), (body, s3)
    assert not re.search(rf"\| {copies} \| KAFKA", s3)
    assert re.search(r"with commit_put_copies=2: JSON \d+\.\d, ARROW \d+\.\d", s3), s3
