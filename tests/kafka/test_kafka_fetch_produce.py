"""Produce acks and Fetch's waiting and limits, with exact requests on the wire (kio types).

acks 0 gets no answer and still commits; acks 1 and -1 answer after the commit.  A Fetch at the high
watermark with ``max_wait`` waits, and wakes when a commit lands rather than at the deadline; ``min_bytes``
holds it until enough is there; ``max_bytes`` and ``partition_max_bytes`` bound the answer but the first
batch always goes out whole; every answer carries the log start offset and the high watermark.
"""

from __future__ import annotations

import threading
import time

import pytest

from kafka_front.record_batch import decode_batch, encode_batch, split_batches
from wire_client import WireClient

PRODUCE, FETCH = 0, 1


def batch(values: list[bytes]) -> bytes:
    n = len(values)
    return encode_batch(base_offset=0, offset_deltas=list(range(n)), timestamps=[int(time.time() * 1000)] * n,
                        keys=[None] * n, values=values)


def produce_frame(w: WireClient, topic: str, values: list[bytes], acks: int) -> bytes:
    return w.frame(PRODUCE, 9, {"acks": acks, "timeout": 30000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": batch(values)}]}]})


def fetch(w: WireClient, topic: str, offset: int, *, max_wait: int = 0, min_bytes: int = 1,
          max_bytes: int = 50 << 20, part_max: int = 1 << 20, isolation: int = 0):
    r = w.request(FETCH, 12, {"max_wait": max_wait, "min_bytes": min_bytes, "max_bytes": max_bytes,
                              "isolation_level": isolation, "topics": [
                                  {"topic": topic, "partitions": [{"partition": 0, "fetch_offset": offset,
                                                                   "partition_max_bytes": part_max}]}]})
    return r.responses[0].partitions[0]


def values_in(records: bytes) -> list[bytes]:
    out = []
    for raw in split_batches(records):
        out.extend(decode_batch(raw, max_decompressed_bytes=1 << 30).values.to_pylist())
    return out


def hw(http, topic: str) -> int:
    return http.get(f"/v1/topics/{topic}").json()["partitions"][0]["high_watermark"]


@pytest.mark.parametrize("acks", [1, -1])
def test_acks_one_and_all_answer_after_the_commit(bootstrap, http, topic, acks):
    with WireClient(bootstrap) as w:
        w.send_raw(produce_frame(w, topic, [b"a", b"b"], acks))
        r = w.response(PRODUCE, 9).responses[0].partition_responses[0]
        assert r.error_code == 0 and r.base_offset == 0
        assert hw(http, topic) == 2  # committed before the answer


def test_acks_zero_gets_no_answer_and_commits(bootstrap, http, topic):
    with WireClient(bootstrap) as w:
        w.send_raw(produce_frame(w, topic, [b"fire", b"forget"], 0))
        deadline = time.monotonic() + 30
        while hw(http, topic) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert hw(http, topic) == 2
        # The next answer on the connection is the next request's: nothing was sent for acks 0.
        p = fetch(w, topic, 0)
        assert p.error_code == 0 and values_in(p.records) == [b"fire", b"forget"]


def test_a_long_poll_wakes_on_a_commit(bootstrap, http, topic):
    with WireClient(bootstrap) as w, WireClient(bootstrap) as producer:
        def later():
            time.sleep(0.5)
            producer.send_raw(produce_frame(producer, topic, [b"wake"], -1))
            producer.response(PRODUCE, 9)

        t = threading.Thread(target=later)
        started = time.monotonic()
        t.start()
        p = fetch(w, topic, 0, max_wait=20_000)
        waited = time.monotonic() - started
        t.join()
        assert p.error_code == 0 and values_in(p.records) == [b"wake"]
        assert 0.4 < waited < 15, waited  # woken by the commit, not by the 20 s deadline


def test_an_empty_long_poll_answers_at_max_wait(bootstrap, topic):
    with WireClient(bootstrap) as w:
        started = time.monotonic()
        p = fetch(w, topic, 0, max_wait=700)
        waited = time.monotonic() - started
        assert p.error_code == 0 and p.records in (None, b"") and p.high_watermark == 0
        assert 0.6 < waited < 10, waited


def test_min_bytes_holds_the_answer_until_enough_is_there(bootstrap, topic):
    with WireClient(bootstrap) as w, WireClient(bootstrap) as producer:
        producer.send_raw(produce_frame(producer, topic, [b"x" * 10], -1))
        producer.response(PRODUCE, 9)

        def later():
            time.sleep(0.5)
            producer.send_raw(produce_frame(producer, topic, [b"y" * 2000], -1))
            producer.response(PRODUCE, 9)

        t = threading.Thread(target=later)
        t.start()
        p = fetch(w, topic, 0, max_wait=20_000, min_bytes=1000)
        t.join()
        assert values_in(p.records) == [b"x" * 10, b"y" * 2000]  # not answered with the first 10 bytes alone


def test_byte_limits_bound_the_answer_but_the_first_batch_goes_whole(bootstrap, topic):
    with WireClient(bootstrap) as w:
        for i in range(5):
            w.send_raw(produce_frame(w, topic, [bytes([65 + i]) * 1000] * 10, -1))
            assert w.response(PRODUCE, 9).responses[0].partition_responses[0].error_code == 0
        whole = fetch(w, topic, 0)
        assert len(values_in(whole.records)) == 50
        small = fetch(w, topic, 0, part_max=100)  # smaller than any batch: the first one still comes
        assert values_in(small.records) and len(values_in(small.records)) < 50
        capped = fetch(w, topic, 0, max_bytes=100)
        assert values_in(capped.records) and len(values_in(capped.records)) < 50
        assert whole.high_watermark == small.high_watermark == 50 and whole.log_start_offset == 0


@pytest.mark.parametrize("isolation", [0, 1])
def test_both_isolation_levels_read_committed_records(bootstrap, topic, isolation):
    with WireClient(bootstrap) as w:
        w.send_raw(produce_frame(w, topic, [b"c"], -1))
        w.response(PRODUCE, 9)
        p = fetch(w, topic, 0, isolation=isolation)
        assert p.error_code == 0 and values_in(p.records) == [b"c"] and p.last_stable_offset == 1


def test_list_offsets_earliest_latest_by_timestamp_and_max_timestamp(bootstrap, http, topic):
    base = 1_700_000_000_000
    stamps = [base + 5000, base + 1000, base + 9000, base + 3000]  # not monotonic: max is offset 2
    with WireClient(bootstrap) as w:
        raw = encode_batch(base_offset=0, offset_deltas=[0, 1, 2, 3], timestamps=stamps, keys=[None] * 4,
                           values=[b"a", b"b", b"c", b"d"])
        w.send_raw(w.frame(PRODUCE, 9, {"acks": -1, "timeout": 30000, "topic_data": [
            {"name": topic, "partition_data": [{"index": 0, "records": raw}]}]}))
        assert w.response(PRODUCE, 9).responses[0].partition_responses[0].error_code == 0
        r = http.post(f"/v1/topics/{topic}/partitions/0/delete-records", json={"before_offset": 1})
        assert r.status_code == 200, r.text

        def ask(spec: int):
            resp = w.request(2, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
                {"name": topic, "partitions": [{"partition_index": 0, "timestamp": spec}]}]})
            p = resp.topics[0].partitions[0]
            assert p.error_code == 0
            return p.timestamp, p.offset

        assert ask(-2)[1] == 1  # earliest: the log start offset after DeleteRecords
        assert ask(-1)[1] == 4  # latest: the high watermark
        assert ask(-3) == (base + 9000, 2)  # max timestamp: its record's offset and timestamp
        assert ask(base + 4000) == (base + 9000, 2)  # the first live record at or after it
        assert ask(base + 9500)[1] == -1  # no record that late
        # A second segment; then delete the record holding the maximum: the next largest still in the log wins.
        raw = encode_batch(base_offset=0, offset_deltas=[0, 1], timestamps=[base + 7000, base + 2000],
                           keys=[None] * 2, values=[b"e", b"f"])
        w.send_raw(w.frame(PRODUCE, 9, {"acks": -1, "timeout": 30000, "topic_data": [
            {"name": topic, "partition_data": [{"index": 0, "records": raw}]}]}))
        assert w.response(PRODUCE, 9).responses[0].partition_responses[0].error_code == 0
        assert ask(-3) == (base + 9000, 2)
        r = http.post(f"/v1/topics/{topic}/partitions/0/delete-records", json={"before_offset": 3})
        assert r.status_code == 200, r.text
        assert ask(-3) == (base + 7000, 4)
