"""Fetch read-ahead (kafka_front/fetch_ahead.py): answers read ahead are the same bytes a fresh read gives,
respect the request's budget and the log's start, and stay bounded; over the wire, a consumer reading a
partition chunk by chunk gets every record once and in order, and never a record deleted before it asked."""

from __future__ import annotations

import threading

import pytest

from lakelog.log import Log

from kafka_front.fetch_ahead import FetchAhead
from kafka_front.handlers.fetch import read_chunk
from kafka_front.record_batch import decode_batch, split_batches
from wire_client import WireClient

FETCH = 1
VALUE = b"v" * 100


def offsets_in(records: bytes) -> list[int]:
    out = []
    for raw in split_batches(records):
        b = decode_batch(raw, max_decompressed_bytes=1 << 30)
        out.extend(int(b.base_offset + d) for d in b.offset_deltas)
    return out


@pytest.fixture
def log(tmp_path):
    log = Log(str(tmp_path / "root"))
    log.create_topic("t", 1)
    for i in range(5):
        log.append("t", [{"value": VALUE, "timestamp": 1_700_000_000_000 + i} for _ in range(1000)], partition=0)
    return log


def test_a_chunk_read_ahead_is_what_a_fresh_read_gives(log):
    ahead = FetchAhead(lambda *a: read_chunk(log, *a))
    first = read_chunk(log, "t", 0, 0, 30_000)
    assert offsets_in(first.records) == list(range(first.next_offset)) and 0 < first.next_offset < 5000
    ahead.read_ahead("t", 0, first, 30_000)
    got = ahead.take("t", 0, first.next_offset, 30_000, log_start_offset=0)
    assert got == read_chunk(log, "t", 0, first.next_offset, 30_000)
    assert ahead.hits == 1
    assert ahead.take("t", 0, first.next_offset, 30_000, 0) is None  # taken once
    ahead.close()


@pytest.mark.parametrize("case, budget, log_start, served", [
    ("same budget", 30_000, 0, True),
    ("larger budget: the smaller chunk is still a valid answer", 60_000, 0, True),
    ("smaller budget than the chunk", 5_000, 0, False),
    ("records deleted since (log start past the offset)", 30_000, 4_000, False),
])
def test_take_rules(log, case, budget, log_start, served):
    ahead = FetchAhead(lambda *a: read_chunk(log, *a))
    first = read_chunk(log, "t", 0, 0, 30_000)
    ahead.read_ahead("t", 0, first, 30_000)
    got = ahead.take("t", 0, first.next_offset, budget, log_start)
    assert (got is not None) is served, case
    ahead.close()


def test_nothing_is_read_ahead_past_the_high_watermark_or_beyond_the_bound(log):
    calls = []

    def reader(*a):
        calls.append(a)
        return read_chunk(log, *a)

    ahead = FetchAhead(reader, max_bytes=40_000)
    last = read_chunk(log, "t", 0, 4_990, 30_000)
    assert last.next_offset == last.high_watermark == 5000
    ahead.read_ahead("t", 0, last, 30_000)
    assert calls == []  # nothing follows the high watermark
    first = read_chunk(log, "t", 0, 0, 30_000)
    ahead.read_ahead("t", 0, first, 30_000)
    ahead.take("t", 0, first.next_offset, 30_000, 0)  # wait for it
    held = read_chunk(log, "t", 0, 2_000, 30_000)
    ahead.read_ahead("t", 0, held, 30_000)
    ahead.take("t", 0, held.next_offset, 30_000, 0)
    assert len(calls) == 2
    # One chunk held or being read (not taken) plus another would pass 40 kB: the second is not started.
    # (Judged by take(), which waits for a read started: close() would cancel one still queued.)
    third, fourth = read_chunk(log, "t", 0, 3_000, 30_000), read_chunk(log, "t", 0, 100, 30_000)
    ahead.read_ahead("t", 0, third, 30_000)
    ahead.read_ahead("t", 0, fourth, 30_000)
    assert ahead.take("t", 0, fourth.next_offset, 30_000, 0) is None
    assert ahead.take("t", 0, third.next_offset, 30_000, 0) is not None
    ahead.close()
    assert len(calls) == 3


def test_concurrent_takers_get_a_chunk_once(log):
    ahead = FetchAhead(lambda *a: read_chunk(log, *a))
    first = read_chunk(log, "t", 0, 0, 30_000)
    ahead.read_ahead("t", 0, first, 30_000)
    results = []
    threads = [threading.Thread(target=lambda: results.append(ahead.take("t", 0, first.next_offset, 30_000, 0)))
               for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(r is not None for r in results) == 1
    ahead.close()


def _fetch(wire, topic: str, offset: int, part_max: int):
    f = wire.request(FETCH, 12, {"max_wait": 0, "min_bytes": 1, "max_bytes": 50 << 20, "topics": [
        {"topic": topic, "partitions": [{"partition": 0, "fetch_offset": offset, "partition_max_bytes": part_max}]}]})
    return f.responses[0].partitions[0]


def test_over_the_wire_every_record_once_in_order_and_nothing_deleted(bootstrap, http, topic):
    for _ in range(6):
        r = http.post(f"/v1/topics/{topic}/records",
                      json={"records": [{"value": "x" * 100, "partition": 0} for _ in range(1000)]})
        assert r.status_code == 200, r.text
    seen, offset = [], 0
    with WireClient(bootstrap) as wire:
        while offset < 3000:  # chunk by chunk: each answer after the first was read ahead
            p = _fetch(wire, topic, offset, 20_000)
            assert p.error_code == 0 and p.high_watermark == 6000
            got = offsets_in(p.records)
            assert got and got[0] == offset
            seen += got
            offset = got[-1] + 1
        assert seen == list(range(offset))
        # The next chunk is read ahead now; delete past it, then ask for it: out of range, not the old records.
        r = http.post(f"/v1/topics/{topic}/partitions/0/delete-records", json={"before_offset": 5000})
        assert r.status_code == 200, r.text
        p = _fetch(wire, topic, offset, 20_000)
        assert p.error_code == 1 and p.log_start_offset == -1  # OFFSET_OUT_OF_RANGE, offsets unknown as in Kafka
        p = _fetch(wire, topic, 5000, 20_000)
        assert p.error_code == 0 and offsets_in(p.records)[0] == 5000
