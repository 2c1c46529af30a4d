"""The record batch v2 codec and the bounded codecs: table-driven, cross-checked with kio's reader and writer."""

from __future__ import annotations

import datetime
import io
import struct

import pytest
from kio.records.readers import read_batch
from kio.records.schema import NewRecordBatch, Record, RecordHeader
from kio.records.writers import write_batch

from lakelog.errors import CorruptRecord, InvalidRecord, InvalidTimestamp, UnsupportedCompressionType

from kafka_front import compression
from kafka_front.record_batch import (HEADER_SIZE, compressed_batch, decode_batch, encode_batch, split_batches)
from kafka_front.record_table import batch_table

LIMIT = 1 << 20


def headers_of(b) -> list:
    """The batch's headers as lists of (key, value) per record (None: no headers)."""
    if b.headers is None:
        return [None] * len(b)
    return [None if hs is None else [(h["key"], h["value"]) for h in hs] for hs in b.headers.to_pylist()]

CASES = [
    # (name, keys, values, headers)
    ("one value", [None], [b"v"], None),
    ("null value (tombstone)", [b"k"], [None], None),
    ("empty key and value", [b""], [b""], None),
    ("long values (multi-byte varints)", [b"k" * 300], [b"v" * 70_000], None),
    ("headers, null header value", [b"a", b"b"], [b"1", b"2"], [[("h1", b"x"), ("h2", None)], None]),
    ("unicode header key", [None], [b"v"], [[("ключ", b"\x00\xff")]]),
    ("many records", [None] * 500, [bytes([i % 256]) * (i % 97) for i in range(500)], None),
]


@pytest.mark.parametrize("name,keys,values,headers", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_encode_decode_round_trip(name, keys, values, headers, codec):
    n = len(values)
    stamps = [1_700_000_000_000 + 7 * i for i in range(n)]
    raw = encode_batch(base_offset=42, offset_deltas=list(range(n)), timestamps=stamps, keys=keys, values=values,
                       headers=headers, producer_id=9, producer_epoch=3, base_sequence=100)
    data = compressed_batch(raw, codec)
    [one] = split_batches(data)
    b = decode_batch(one, max_decompressed_bytes=LIMIT)
    assert (b.base_offset, b.producer_id, b.producer_epoch, b.base_sequence, b.compression) == (42, 9, 3, 100, codec)
    assert b.keys.to_pylist() == keys and b.values.to_pylist() == values and b.timestamps.tolist() == stamps
    assert headers_of(b) == (headers or [None] * n)
    assert b.max_timestamp == max(stamps) and b.last_offset_delta == n - 1


@pytest.mark.parametrize("name,keys,values,headers", CASES, ids=[c[0] for c in CASES])
def test_our_encoding_reads_back_with_kio(name, keys, values, headers):
    n = len(values)
    raw = encode_batch(base_offset=5, offset_deltas=list(range(n)), timestamps=[1000 + i for i in range(n)],
                       keys=keys, values=values, headers=headers)
    kb, size = read_batch(raw, 0)
    assert size == len(raw)
    assert [r.key for r in kb.records] == keys and [r.value for r in kb.records] == values
    assert [r.offset for r in kb.records] == [5 + i for i in range(n)]
    want_headers = [tuple(RecordHeader(key=k.encode(), value=v) for k, v in hs) if hs else ()
                    for hs in (headers or [None] * n)]
    assert [r.headers for r in kb.records] == want_headers


def test_kio_encoding_decodes_with_ours():
    t0 = datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc)
    records = tuple(Record(attributes=0, timestamp=t0 + datetime.timedelta(milliseconds=i), offset=i,
                           key=b"k%d" % i, value=b"v" * i, headers=(RecordHeader(key=b"h", value=b"%d" % i),))
                    for i in range(10))
    buf = io.BytesIO()
    write_batch(buf, NewRecordBatch(producer_id=7, producer_epoch=1, base_sequence=0, records=records,
                                    attributes=0))
    b = decode_batch(split_batches(buf.getvalue())[0], max_decompressed_bytes=LIMIT)
    assert b.values.to_pylist() == [b"v" * i for i in range(10)]
    assert b.keys.to_pylist() == [b"k%d" % i for i in range(10)]
    assert headers_of(b) == [[("h", b"%d" % i)] for i in range(10)]
    assert b.producer_id == 7


def _valid() -> bytes:
    return encode_batch(base_offset=0, offset_deltas=[0, 1], timestamps=[1, 2], keys=[None, b"k"], values=[b"a", b"b"])


def _flip(data: bytes, at: int) -> bytes:
    out = bytearray(data)
    out[at] ^= 0xFF
    return bytes(out)


def _with_crc(data: bytes) -> bytes:
    """``data`` with its CRC recomputed, so the corruption reaches the record parser."""
    from crc32c import crc32c

    out = bytearray(data)
    struct.pack_into(">I", out, 17, crc32c(bytes(out[21:])))
    return bytes(out)


HOSTILE = [
    ("truncated header", lambda: _valid()[:30]),
    ("batch length beyond the data", lambda: _valid()[:-1]),
    ("bad magic", lambda: _flip(_valid(), 16)),
    ("bad CRC", lambda: _flip(_valid(), len(_valid()) - 1)),
    ("record length past the end", lambda: _with_crc(_valid()[:61] + b"\x7e" + _valid()[62:])),
    ("trailing bytes after the last record", lambda: _with_crc(
        _valid()[:8] + struct.pack(">i", len(_valid()) - 12 + 1) + _valid()[12:] + b"\x00")),
]


def _header_field(fmt: str, at: int, value: int) -> bytes:
    out = bytearray(_valid())
    struct.pack_into(fmt, out, at, value)
    return _with_crc(bytes(out))


# Kafka's LogValidator.validateBatch, for a client's batch: INVALID_RECORD with its messages
INVALID_HEADERS = [
    ("record count larger than offsets", lambda: _header_field(">i", 57, 1000), "Inconsistent batch offset range"),
    ("negative count", lambda: _header_field(">i", 57, -5), "Invalid reported count"),
    ("zero count", lambda: _header_field(">i", 57, 0), "Invalid reported count"),
    ("negative last offset delta", lambda: _header_field(">i", 23, -1), "invalid offset range"),
    # finding 9a of the hostile-clients review: 3 records, last offset delta 2**31-1
    ("last offset delta 2**31-1", lambda: _header_field(">i", 23, 2**31 - 1), "Inconsistent batch offset range"),
]


@pytest.mark.parametrize("name,make,message", INVALID_HEADERS, ids=[h[0] for h in INVALID_HEADERS])
def test_batch_offsets_and_count_are_checked_as_kafka_does(name, make, message):
    with pytest.raises(InvalidRecord, match=message):
        decode_batch(split_batches(make())[0], max_decompressed_bytes=LIMIT)


@pytest.mark.parametrize("name,make", HOSTILE, ids=[h[0] for h in HOSTILE])
def test_hostile_batches_are_corrupt_message(name, make):
    with pytest.raises(CorruptRecord):
        for raw in split_batches(make()):
            decode_batch(raw, max_decompressed_bytes=LIMIT)


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_decompression_is_bounded(codec):
    bomb = encode_batch(base_offset=0, offset_deltas=[0], timestamps=[0], keys=[None], values=[b"\0" * (4 << 20)])
    data = compressed_batch(bomb, codec)
    assert len(data) < (1 << 20)  # small on the wire
    with pytest.raises(CorruptRecord, match="more than"):
        decode_batch(split_batches(data)[0], max_decompressed_bytes=1 << 20)


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_garbage_compressed_payload_is_corrupt(codec):
    head = bytearray(_valid()[:HEADER_SIZE])
    body = b"\x01\x02garbage-not-compressed" * 3
    struct.pack_into(">h", head, 21, codec)
    struct.pack_into(">i", head, 8, HEADER_SIZE - 12 + len(body))
    with pytest.raises(CorruptRecord):
        decode_batch(_with_crc(bytes(head) + body), max_decompressed_bytes=LIMIT)


def test_unknown_codec_is_unsupported_compression_type():
    with pytest.raises(UnsupportedCompressionType):
        compression.decompress(6, b"xx", LIMIT)


def test_xerial_framed_snappy_is_accepted():
    import cramjam

    payload = b"hello snappy " * 100
    block = bytes(cramjam.snappy.compress_raw(payload))
    framed = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1) + struct.pack(">i", len(block)) + block
    assert compression.decompress(compression.SNAPPY, framed, LIMIT) == payload
    with pytest.raises(CorruptRecord):
        compression.decompress(compression.SNAPPY, framed, 100)


@pytest.mark.parametrize("stamps,ok", [([0, 5], True), ([-1, 5], True), ([-2], False), ([253402300800000], False)])
def test_record_timestamps_are_checked(stamps, ok):
    n = len(stamps)
    raw = encode_batch(base_offset=0, offset_deltas=list(range(n)), timestamps=stamps, keys=[None] * n,
                       values=[b"v"] * n)
    b = decode_batch(raw, max_decompressed_bytes=LIMIT)
    if ok:
        t = batch_table(b)
        assert t.num_rows == n
        assert t.column("timestamp").null_count == stamps.count(-1)
    else:
        with pytest.raises(InvalidTimestamp):
            batch_table(b)


@pytest.mark.fuzz
@pytest.mark.parametrize("with_headers", [False, True])  # the columnar decoder, and the per-record one
def test_mutated_batches_decode_or_fail_as_corrupt(with_headers):
    from hypothesis import given, settings
    from hypothesis import strategies as st

    n = 20
    raw = encode_batch(base_offset=0, offset_deltas=list(range(n)), timestamps=[1000 + 300 * i for i in range(n)],
                       keys=[b"k" * (i * 7 % 90) if i % 3 else None for i in range(n)],
                       values=[b"v" * (i * 13 % 150) for i in range(n)],
                       headers=[[("h", b"x")] if with_headers and i % 4 == 0 else None for i in range(n)])

    @settings(max_examples=300, deadline=None)
    @given(st.lists(st.tuples(st.integers(HEADER_SIZE, len(raw) - 1), st.integers(0, 255)), min_size=1,
                    max_size=4))
    def check(mutations):
        data = bytearray(raw)
        for at, value in mutations:
            data[at] = value
        try:
            b = decode_batch(_with_crc(bytes(data)), max_decompressed_bytes=LIMIT)
        except CorruptRecord:
            return
        assert len(b) == n and len(b.keys) == len(b.values) == len(b.timestamps) == n

    check()


@pytest.mark.parametrize("name,keys,values,headers", [c for c in CASES if c[3] is None],
                         ids=[c[0] for c in CASES if c[3] is None])
def test_columnar_encoder_writes_the_same_bytes(name, keys, values, headers):
    import numpy as np
    import pyarrow as pa

    from kafka_front.record_batch import encode_columns

    n = len(values)
    offsets = [1000 + 3 * i for i in range(n)]  # gaps, as after compaction
    stamps = [1_700_000_000_000 + (-1) ** i * i for i in range(n)]
    want = encode_batch(base_offset=1000, offset_deltas=[o - 1000 for o in offsets], timestamps=stamps, keys=keys,
                        values=values, producer_id=3, producer_epoch=2, base_sequence=7, log_append_time=True)
    got = encode_columns(base_offset=1000, offsets=np.array(offsets), timestamps=np.array(stamps),
                         keys=pa.array(keys, pa.binary()), values=pa.array(values, pa.binary()), producer_id=3,
                         producer_epoch=2, base_sequence=7, log_append_time=True)
    assert got == want


@pytest.mark.parametrize("room", [0, 61, 200, 1_000, 5_000, 1 << 20])
def test_a_prefix_of_columns_fits_its_room(room):
    import numpy as np
    import pyarrow as pa

    from kafka_front.record_batch import encode_columns, encode_columns_within

    n = 100
    offsets = np.arange(1000, 1000 + n)
    stamps = np.array([1_700_000_000_000 + (i * 37) % 500 for i in range(n)])  # not ascending: a prefix's min is larger
    keys = pa.array([None if i % 3 else b"k%d" % i for i in range(n)], pa.binary())
    values = pa.array([b"v" * (i % 50) for i in range(n)], pa.binary())
    data, k = encode_columns_within(room, base_offset=1000, offsets=offsets, timestamps=stamps, keys=keys,
                                    values=values)
    assert len(data) <= room
    if k == n:
        assert data == encode_columns(base_offset=1000, offsets=offsets, timestamps=stamps, keys=keys, values=values)
    if k:
        b = decode_batch(data, max_decompressed_bytes=LIMIT)
        assert b.keys.to_pylist() == keys.to_pylist()[:k] and b.values.to_pylist() == values.to_pylist()[:k]
        assert b.timestamps.tolist() == stamps[:k].tolist() and b.max_timestamp == int(stamps[:k].max())
        bigger, k2 = encode_columns_within(len(data) + 1_000, base_offset=1000, offsets=offsets, timestamps=stamps,
                                           keys=keys, values=values)
        assert k2 > k or k == n  # the longest prefix that fits
    else:
        assert data == b"" and room < 100


@pytest.mark.parametrize("headers", [False, True])
def test_stored_records_are_cut_to_the_limit_at_record_boundaries(headers):
    import pyarrow as pa

    from kafka_front.record_table import table_batches
    from lakelog.storage.record_schema import FILE_SCHEMA

    n = 50
    rows = {"offset": list(range(n)), "timestamp": [1_700_000_000_000_000] * n, "timestampType": [0] * n,
            "producerId": [-1] * n, "producerEpoch": [-1] * n, "sequence": [-1] * n, "key": [None] * n,
            "value": [b"x" * 1000] * n,
            "headers": [[{"key": "h", "value": b"1"}] if headers else None for _ in range(n)]}
    table = pa.table({f.name: pa.array(rows[f.name], f.type) for f in FILE_SCHEMA if f.name in rows})
    for f in FILE_SCHEMA:
        if f.name not in rows:
            table = table.append_column(f, pa.nulls(n, f.type))
    table = table.select([f.name for f in FILE_SCHEMA])
    data, done = table_batches(table, max_bytes=10_500)
    assert len(data) <= 10_500 and done == 10  # ten records of about 1 kB and a batch header
    data, done = table_batches(table, max_bytes=500)  # not even one: min_one sends the first alone
    assert done == 1 and len(data) > 500
    assert table_batches(table, max_bytes=500, min_one=False) == (b"", 0)
