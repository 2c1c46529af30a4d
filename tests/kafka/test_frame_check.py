"""kafka_front.frame_check against kio's reader, in-process, over every API and version the listener advertises:
valid frames from hypothesis over the generated schemas pass and read back equal; mutated frames are refused
or read by kio without surprises (kio never meets a length the check did not verify); the review's crafted
frames are refused with Kafka's messages.  The live listener's side is in test_hostile_clients.py and
test_kafka_fuzz.py."""

from __future__ import annotations

import struct
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.serial import entity_reader
from kio.serial.errors import BufferUnderflow, InvalidUnicode, NegativeByteLength, UnexpectedNull

from kafka_frames import (encode_frame, huge_count_frames, mutated, null_array_frames, request_values, served_versions,
                          uvarint)
from hostile_support import FUZZ_SECONDS, fuzz_rounds
from kafka_front import frame_check
from kafka_front.frame_check import FrameError, check_header, check_request
from kafka_front.messages import build, is_flexible, read_header, read_request, request_type

VERSIONS = served_versions()
FUZZ_EXAMPLES = 120  # per round (make test: one round, < 30 s); LAKELOG_FUZZ_SECONDS=N runs rounds for N seconds
# What kio may still raise on a frame whose lengths passed: values the check does not look at (a bool that is
# not 0 or 1, text that is not UTF-8) -- the connection closes on these too.
KIO_VALUE_ERRORS = (ValueError, UnicodeDecodeError, BufferUnderflow, InvalidUnicode, NegativeByteLength,
                    UnexpectedNull, KeyError)


def _check(frame: bytes) -> tuple[int, int, int]:
    """(api_key, version, end of body) of a whole frame, checked."""
    api_key, version = struct.unpack_from(">hh", frame, 4)
    body = frame[4:]
    offset = check_header(body, is_flexible(api_key, version))
    return api_key, version, check_request(api_key, version, body, offset) + 4


def test_every_served_version_passes_with_its_defaults():
    for api_key, version in VERSIONS:
        cls = request_type(api_key, version)
        frame = encode_frame(api_key, version, {})
        assert _check(frame)[2] == len(frame), (api_key, version)
        _, size = read_header(frame[4:], is_flexible(api_key, version))
        assert read_request(api_key, version, frame[4:], size) == build(cls, {})


@st.composite
def valid_frames(draw):
    api_key, version = draw(st.sampled_from(VERSIONS))
    values = draw(request_values(request_type(api_key, version)))
    return api_key, version, values


@given(valid_frames())
@settings(max_examples=60, deadline=None, database=None, suppress_health_check=list(HealthCheck))
def test_valid_frames_pass_and_read_back(case):
    api_key, version, values = case
    frame = encode_frame(api_key, version, values)
    assert _check(frame)[2] == len(frame)
    _, size = read_header(frame[4:], is_flexible(api_key, version))
    assert read_request(api_key, version, frame[4:], size) == build(request_type(api_key, version), values)


@pytest.mark.fuzz
@pytest.mark.timeout(600 + 2 * FUZZ_SECONDS)  # a long run past pytest's 600 s
def test_mutated_frames_are_refused_or_read_as_checked():
    counts: Counter = Counter()

    @settings(max_examples=FUZZ_EXAMPLES, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(st.data())
    def check(data):
        api_key, version, values = data.draw(valid_frames())
        frame = data.draw(mutated(encode_frame(api_key, version, values)))
        counts["frames"] += 1
        try:
            _, _, end = _check(frame)
        except FrameError:
            counts["refused by the check"] += 1
            return
        body = frame[4:]
        try:  # only frames that passed reach kio: one the check missed would abort this process here
            _, size = read_header(body, is_flexible(api_key, version))
            _, body_size = entity_reader(request_type(api_key, version))(body, size)
        except KIO_VALUE_ERRORS:
            counts["refused by kio (values)"] += 1
            return
        counts["read"] += 1
        assert 4 + size + body_size == end  # kio read exactly what the check walked

    fuzz_rounds(check)
    print("\nframe check, mutated frames: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))


@pytest.mark.parametrize("name", sorted(huge_count_frames()))
def test_huge_declared_counts_are_refused_before_kio(name):
    frame = huge_count_frames()[name]
    assert 27 <= len(frame) <= 51  # a few dozen bytes (finding 1)
    with pytest.raises(FrameError, match="Tried to allocate a collection of size"):
        _check(frame)


@pytest.mark.parametrize("name", sorted(null_array_frames()))
def test_null_where_kafka_has_no_null_is_refused(name):
    with pytest.raises(FrameError, match="non-nullable field .* was serialized as null"):
        _check(null_array_frames()[name])


def test_nullable_arrays_stay_nullable():
    frame = encode_frame(3, 12, {"topics": None})  # Metadata: null means every topic
    assert _check(frame)[2] == len(frame)


def test_strings_longer_than_kafkas_limit_are_refused():
    ok = encode_frame(15, 5, {"groups": ["g" * 0x7FFF]})
    assert _check(ok)[2] == len(ok)
    at = ok.index(uvarint(0x7FFF + 1) + b"g")
    long = ok[:at] + uvarint(0x8000 + 1) + b"g" * 0x8000 + ok[at + 3 + 0x7FFF:]  # kio's writer refuses to
    with pytest.raises(FrameError, match="had invalid length 32768"):
        _check(struct.pack(">i", len(long) - 4) + long[4:])


def test_lengths_past_the_frame_are_refused():
    frame = bytearray(encode_frame(0, 3, {"acks": -1, "timeout": 1000, "topic_data": [
        {"name": "t", "partition_data": [{"index": 0, "records": b"x" * 10}]}]}))
    at = bytes(frame).index(struct.pack(">i", 10) + b"x" * 10)
    frame[at:at + 4] = struct.pack(">i", 11)
    with pytest.raises(FrameError, match="bytes field records of 11 bytes, but there are only 10"):
        _check(bytes(frame))


def test_unknown_tagged_fields_are_refused():
    frame = encode_frame(18, 3, {"client_software_name": "a", "client_software_version": "b"})
    tagged = frame[:-1] + b"\x01\x07\x01\x00"  # one tagged field, tag 7, one byte
    with pytest.raises(FrameError, match="no tagged field 7"):
        _check(struct.pack(">i", len(tagged) - 4) + tagged[4:])


def test_elements_per_frame_are_capped():
    """2**20 broker ids are present in the frame (4 MiB, within any frame limit), but more elements than that
    in one request are refused: kio would make a Python object of each."""
    def create_topics(n: int) -> bytes:
        frame = encode_frame(19, 7, {"topics": [{"name": "t", "num_partitions": -1, "replication_factor": -1,
                                                 "assignments": [{"partition_index": 0, "broker_ids": [1]}],
                                                 "configs": []}], "timeout": 1000})
        at = frame.index(b"\x02\x00\x00\x00\x01")  # broker_ids: compact count 1 + 1, broker 1
        frame = frame[:at] + uvarint(n + 1) + b"\x00\x00\x00\x01" * n + frame[at + 5:]
        return struct.pack(">i", len(frame) - 4) + frame[4:]

    ok = create_topics(frame_check.MAX_ELEMENTS - 2)  # with the topic and its assignment
    assert _check(ok)[2] == len(ok)
    with pytest.raises(FrameError, match=f"more than {frame_check.MAX_ELEMENTS} array elements"):
        _check(create_topics(frame_check.MAX_ELEMENTS))
