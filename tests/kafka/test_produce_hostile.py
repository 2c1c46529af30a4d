"""Hostile and failing Produce requests against a real ``lakelog serve --kafka-listener``, with exact frames
(:class:`wire_client.WireClient`): every refusal is a partition's error code -- never an empty ProduceResponse,
which has no top-level error to carry one -- nothing of a refused partition is written, and the front keeps
answering.

* what the records of one request decode to is bounded for the whole request, not per batch, on the event loop
  and, for a request that decodes past the event loop's share, on a worker thread;
* batches whose numbers overflow int64 (timestamp base + delta, offset deltas) are CORRUPT_MESSAGE;
* a full ``buffer.memory`` refuses the topic it cannot take (THROTTLING_QUOTA_EXCEEDED), the others are answered;
* a failing store is the partition's KAFKA_STORAGE_ERROR, its message naming no path or URL.
"""

from __future__ import annotations

import struct
import time

import pytest
from crc32c import crc32c

from front_process import kafka_front_process, new_topic
from kafka_front.record_batch import compressed_batch, encode_batch
from kafka_frames import uvarint
from wire_client import WireClient

PRODUCE, METADATA = 0, 3
CORRUPT_MESSAGE, KAFKA_STORAGE_ERROR, THROTTLING_QUOTA_EXCEEDED = 2, 56, 89
ZSTD = 4
FRAME_LIMIT = 1 << 20  # the fronts' LAKELOG_MAX_REQUEST_BYTES: the frame limit, and what one request may decode to
SMALL_BUFFER = 256 << 10  # buffer.memory of the back-pressure front
LARGE_FRAME = 8 << 20  # the frame limit of the front whose requests decode past the event loop's share


def batch(values: list[bytes], *, codec: int = 0) -> bytes:
    n = len(values)
    raw = encode_batch(base_offset=0, offset_deltas=list(range(n)), timestamps=[int(time.time() * 1000)] * n,
                       keys=[None] * n, values=values)
    return compressed_batch(raw, codec)


def zz(value: int) -> bytes:
    """A zigzag varint (any 64-bit value)."""
    return uvarint((value << 1) ^ (value >> 63))


def raw_batch(records: list[tuple[int, int, bytes]], *, base_ts: int, last_delta: int, headers: bool = False) -> bytes:
    """A batch with a valid CRC built field by field: ``records`` are (timestamp delta, offset delta, value);
    ``headers``: every record has one header (the per-record decoder), else none (the columnar one)."""
    body = bytearray()
    for ts_delta, off_delta, value in records:
        rec = b"\x00" + zz(ts_delta) + zz(off_delta) + zz(-1) + zz(len(value)) + value
        rec += zz(1) + zz(1) + b"h" + zz(1) + b"x" if headers else zz(0)
        body += zz(len(rec)) + rec
    tail = struct.pack(">hiqqqhii", 0, last_delta, base_ts, base_ts, -1, -1, -1, len(records)) + bytes(body)
    return struct.pack(">qiibI", 0, len(tail) + 9, 0, 2, crc32c(tail)) + tail


def produce(w: WireClient, data: dict[str, dict[int, bytes]], *, acks: int = -1):
    """Produce v9 of ``{topic: {partition: records}}``; the response (or None for acks=0)."""
    values = {"acks": acks, "timeout": 30000, "topic_data": [
        {"name": t, "partition_data": [{"index": p, "records": r} for p, r in parts.items()]}
        for t, parts in data.items()]}
    if acks == 0:
        w.send_raw(w.frame(PRODUCE, 9, values))
        return None
    return w.request(PRODUCE, 9, values)


def answers(response) -> dict[tuple[str, int], object]:
    """(topic, partition) -> its partition response."""
    return {(t.name, p.index): p for t in response.responses for p in t.partition_responses}


def hw(http, topic: str, partition: int = 0) -> int:
    return http.get(f"/v1/topics/{topic}").json()["partitions"][partition]["high_watermark"]


@pytest.fixture(scope="module")
def kafka_front(tmp_path_factory):
    """This module's front (conftest's ``http`` and ``bootstrap`` use it): a frame limit of its own."""
    f = kafka_front_process(str(tmp_path_factory.mktemp("hostile-root") / "root"),
                            tmp_path_factory.mktemp("hostile-logs"),
                            env={"LAKELOG_MAX_REQUEST_BYTES": str(FRAME_LIMIT)})
    f.start()
    yield f
    f.stop()


def test_decoded_size_is_bounded_per_request_not_per_batch(wire, http):
    a, b = new_topic(http), new_topic(http, partitions=1)
    small = batch([b"\0" * 60_000], codec=ZSTD)
    piece = batch([b"\0" * 200_000], codec=ZSTD)  # each well under the limit alone, six over it together
    assert len(piece) < 200
    r = answers(produce(wire, {a: {0: small, 1: piece * 6}, b: {0: batch([b"after"])}}))
    assert r[(a, 0)].error_code == 0 and r[(a, 0)].base_offset == 0  # decoded within the budget: written
    assert r[(a, 1)].error_code == CORRUPT_MESSAGE, r[(a, 1)]
    assert "all of its batches together" in r[(a, 1)].error_message
    assert r[(b, 0)].error_code == CORRUPT_MESSAGE, r[(b, 0)]  # the budget is spent: the rest of the request fails
    assert (hw(http, a, 0), hw(http, a, 1), hw(http, b, 0)) == (1, 0, 0)

    # many small compressed batches spread over partitions: 20 x 100 KB decoded in 20 batches of ~100 bytes
    r = answers(produce(wire, {a: {0: batch([b"\0" * 100_000], codec=ZSTD) * 10,
                                   1: batch([b"\0" * 100_000], codec=ZSTD) * 10}}))
    assert (r[(a, 0)].error_code, r[(a, 1)].error_code) == (0, CORRUPT_MESSAGE), r
    assert (hw(http, a, 0), hw(http, a, 1)) == (11, 0)

    # the budget is the request's: the next request decodes as much again
    r = answers(produce(wire, {a: {1: piece * 4}, b: {0: batch([b"after"])}}))
    assert (r[(a, 1)].error_code, r[(b, 0)].error_code) == (0, 0), r
    assert (hw(http, a, 1), hw(http, b, 0)) == (4, 1)


@pytest.fixture(scope="module")
def large_frame_front(tmp_path_factory):
    """A front whose requests may decode to LARGE_FRAME: past what one decodes on its event loop (2 MiB)."""
    f = kafka_front_process(str(tmp_path_factory.mktemp("large-root") / "root"),
                            tmp_path_factory.mktemp("large-logs"), env={"LAKELOG_MAX_REQUEST_BYTES": str(LARGE_FRAME)})
    f.start()
    yield f
    f.stop()


def test_a_small_request_that_decodes_past_the_inline_bound_is_decoded_again_on_a_thread(large_frame_front):
    from kafka_front.handlers.produce import INLINE_DECODE_BYTES, INLINE_DECODED_BYTES

    piece = batch([b"\0" * 200_000], codec=ZSTD)
    with large_frame_front.client() as http, WireClient(large_frame_front.bootstrap) as wire:
        topic = new_topic(http, partitions=4)
        # under a kilobyte on the wire, 3.2 MB decoded: the event loop stops at 2 MiB, the thread takes it all
        request = {topic: {p: piece * 4 for p in range(4)}}
        assert sum(len(r) for r in request[topic].values()) < INLINE_DECODE_BYTES < INLINE_DECODED_BYTES < 3_200_000
        r = answers(produce(wire, request))
        assert [r[(topic, p)].error_code for p in range(4)] == [0] * 4, r
        assert [hw(http, topic, p) for p in range(4)] == [4] * 4
        # the request's budget is still the frame limit on the thread: 9.6 MB decoded, the last partition past it
        r = answers(produce(wire, {topic: {p: piece * 12 for p in range(4)}}))
        assert [r[(topic, p)].error_code for p in range(4)] == [0, 0, 0, CORRUPT_MESSAGE], r
        assert [hw(http, topic, p) for p in range(4)] == [16, 16, 16, 4]


def _timestamp_overflow_with_headers() -> bytes:  # base + delta = 2**63 + 5: past int64 (the per-record decoder)
    return raw_batch([(0, 0, b"v"), (2**62 + 5, 1, b"w")], base_ts=2**62, last_delta=1, headers=True)


def _timestamp_wrapping_to_a_valid_one() -> bytes:  # -2**63 + (-2**63 + 1000) wraps in int64 to 1000: epoch + 1 s
    return raw_batch([(-2**63 + 1000, 0, b"v")], base_ts=-2**63, last_delta=0)


def _offset_deltas_wrapping_to_increasing() -> bytes:  # 0, MAX, MIN + 5, 3: np.diff wraps to all positive
    return raw_batch([(0, 0, b"a"), (0, 2**63 - 1, b"b"), (0, -2**63 + 5, b"c"), (0, 3, b"d")],
                     base_ts=int(time.time() * 1000), last_delta=3)


@pytest.mark.parametrize("make", [_timestamp_overflow_with_headers, _timestamp_wrapping_to_a_valid_one,
                                  _offset_deltas_wrapping_to_increasing], ids=lambda f: f.__name__.strip("_"))
def test_numbers_past_int64_are_corrupt_message(make, wire, http):
    topic = new_topic(http)
    r = answers(produce(wire, {topic: {0: make(), 1: batch([b"fine"])}}))
    assert set(r) == {(topic, 0), (topic, 1)}, r  # an answer per partition, not an empty response
    assert r[(topic, 0)].error_code == CORRUPT_MESSAGE, r[(topic, 0)]
    assert r[(topic, 1)].error_code == 0, r[(topic, 1)]
    assert (hw(http, topic, 0), hw(http, topic, 1)) == (0, 1)
    assert answers(produce(wire, {topic: {0: batch([b"next"])}}))[(topic, 0)].error_code == 0  # still serving


@pytest.fixture(scope="module")
def small_buffer_front(tmp_path_factory):
    f = kafka_front_process(str(tmp_path_factory.mktemp("buffer-root") / "root"),
                            tmp_path_factory.mktemp("buffer-logs"),
                            env={"LAKELOG_MAX_REQUEST_BYTES": str(FRAME_LIMIT),
                                 "LAKELOG_BUFFER_MEMORY": str(SMALL_BUFFER)})
    f.start()
    yield f
    f.stop()


def test_full_buffer_memory_refuses_that_topic_and_answers_the_others(small_buffer_front):
    with small_buffer_front.client() as http, WireClient(small_buffer_front.bootstrap) as wire:
        fits, too_big, after = new_topic(http, partitions=1), new_topic(http, partitions=2), new_topic(http, 1)
        big = batch([b"x" * (SMALL_BUFFER + 50_000)])  # more than buffer.memory: the accumulator refuses it
        r = answers(produce(wire, {fits: {0: batch([b"a"])}, too_big: {0: big, 1: batch([b"b"])},
                                   after: {0: batch([b"c"])}}))
        assert r[(fits, 0)].error_code == 0 and r[(fits, 0)].base_offset == 0, r
        assert r[(too_big, 0)].error_code == THROTTLING_QUOTA_EXCEEDED, r
        assert r[(too_big, 1)].error_code == THROTTLING_QUOTA_EXCEEDED, r  # the topic's batches go together
        assert r[(after, 0)].error_code == 0 and r[(after, 0)].base_offset == 0, r
        assert (hw(http, fits), hw(http, too_big, 0), hw(http, too_big, 1), hw(http, after)) == (1, 0, 0, 1)

        # acks=0: still no response at all; the topics that fit are written
        assert produce(wire, {too_big: {0: big}, fits: {0: batch([b"d"])}}, acks=0) is None
        meta = wire.request(METADATA, 12, {"topics": None})  # the next frame on the connection is this answer
        assert meta.brokers
        deadline = time.monotonic() + 30
        while hw(http, fits) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert (hw(http, fits), hw(http, too_big, 0)) == (2, 0)


def test_a_failing_store_is_each_partitions_storage_error(failing_store):
    front, proxy, prefix = failing_store
    with front.client(timeout=120) as http, WireClient(front.bootstrap, timeout=120) as wire:
        topic = new_topic(http, partitions=1)
        assert answers(produce(wire, {topic: {0: batch([b"before"])}}))[(topic, 0)].error_code == 0
        proxy.fail(lambda method, path: True, times=1_000_000, status=503)
        # a partition past the cached count is checked against the store, which fails
        r = answers(produce(wire, {topic: {3: batch([b"x"])}}))
        assert list(r) == [(topic, 3)], r  # the partition's answer, not an empty response
        entry = r[(topic, 3)]
        assert entry.error_code == KAFKA_STORAGE_ERROR, entry
        for leak in (prefix, "lakelog-test", proxy.url, "http://", "s3://", "_delta_log", "Traceback"):
            assert leak not in (entry.error_message or ""), entry.error_message
        assert "storage failure on Kafka Produce" in front.log_tail(200_000)  # the detail is the operator's
        proxy.clear()
        assert answers(produce(wire, {topic: {0: batch([b"after"])}}))[(topic, 0)].error_code == 0
        assert hw(http, topic) == 2
