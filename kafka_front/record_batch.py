"""Kafka's record batch v2 (magic 2) as pure functions: bytes <-> :class:`Batch`.

The layout is Kafka's ``DefaultRecordBatch``: a 61-byte header (base offset,
length, leader epoch, magic, CRC32C of everything after the CRC, attributes,
last offset delta, base and max timestamp, producer id, epoch, base sequence,
record count), then the records, each a varint-framed run of zigzag varints and
byte strings.  Message types of the protocol come from kio; the batch codec is
here because it is the hot path of Produce and Fetch (kio's reader builds a
frozen dataclass per record) -- ``tests/kafka/test_record_batch.py`` checks it
against kio's reader and writer.

Input is hostile: every length is checked against what is left of the buffer,
counts against the bytes that could hold them, CRC before anything is parsed,
and the decompressed size is bounded (:mod:`kafka_front.compression`).  Numbers
are range-checked before numpy arithmetic could wrap them (a timestamp delta
near 2**63, an offset delta or a length that would overflow int64).  Any
violation raises :class:`~lakelog.errors.CorruptRecord` (``CORRUPT_MESSAGE``).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from crc32c import crc32c

from lakelog.errors import CorruptRecord, InvalidRecord, UnsupportedCompressionType
from lakelog.storage.record_schema import HEADER_TYPE

from kafka_front import compression
from kafka_front.compression import DecodeLimitExceeded

HEADER = struct.Struct(">qiibIhiqqqhii")  # base offset .. record count: 61 bytes
HEADER_SIZE = HEADER.size
CRC_START = 21  # the CRC covers attributes .. end
LENGTH_OFFSET = 12  # batchLength counts from the partition leader epoch on
MAGIC = 2
COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_BIT = 0x08
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20
NO_TIMESTAMP = -1
_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1
_TIMESTAMP_OVERFLOW = "a record's timestamp (base timestamp + delta) does not fit in 64 bits"


@dataclass
class Batch:
    """One decoded batch: header fields and columns of its records: ``keys``/``values`` binary Arrow arrays,
    ``timestamps`` (epoch ms, absolute) and ``offset_deltas`` int64 numpy arrays, ``headers`` an Arrow array of
    ``HEADER_TYPE`` or None when no record has headers."""

    base_offset: int
    partition_leader_epoch: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    offset_deltas: np.ndarray
    timestamps: np.ndarray
    keys: pa.Array
    values: pa.Array
    headers: pa.Array | None
    records_bytes: int = 0  # the size of the records section, decompressed: what decoding the batch took

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def log_append_time(self) -> bool:
        return bool(self.attributes & TIMESTAMP_TYPE_BIT)

    @property
    def transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_BIT)

    @property
    def control(self) -> bool:
        return bool(self.attributes & CONTROL_BIT)

    def __len__(self) -> int:
        return len(self.values)


@dataclass
class _Lists:
    """The pure-Python decoder's output, converted to :class:`Batch` columns at the end."""

    offset_deltas: list
    timestamps: list
    keys: list
    values: list
    headers: list


def _corrupt(why: str) -> CorruptRecord:
    return CorruptRecord(f"malformed record batch: {why}")


def split_batches(data: bytes | memoryview) -> list[memoryview]:
    """The batches of a produce partition's ``records`` field; each must be whole and of magic 2."""
    mv = memoryview(data)
    out = []
    pos, end = 0, len(mv)
    while pos < end:
        if end - pos < HEADER_SIZE:
            raise _corrupt(f"{end - pos} trailing bytes are shorter than a batch header")
        length = int.from_bytes(mv[pos + 8:pos + 12], "big", signed=True)
        size = LENGTH_OFFSET + length
        if length < HEADER_SIZE - LENGTH_OFFSET or pos + size > end:
            raise _corrupt(f"batch length {length} does not fit the {end - pos} bytes left")
        if mv[pos + 16] != MAGIC:
            raise _corrupt(f"magic {mv[pos + 16]} (only record batch v2, magic 2, is supported)")
        out.append(mv[pos:pos + size])
        pos += size
    return out


# A batch's records are decoded in windows: a window is walked (the chain of record lengths, in Python) and then
# checked and decoded at once (numpy), so a batch is refused at its first bad record having done work in
# proportion to the records before it: each window at most WINDOW_GROWTH times the records decoded before it,
# and the first at most FIRST_WINDOW_RECORDS records or FIRST_WINDOW_BYTES bytes.  Compressed records are
# decompressed only as far as the windows reach.  A batch within the first window's bounds is one window: one
# numpy pass, so windowing costs ordinary batches nothing.
FIRST_WINDOW_RECORDS = 16384
FIRST_WINDOW_BYTES = 4 << 20
WINDOW_GROWTH = 4
MIN_RECORD_BYTES = 7  # length, attributes, timestamp delta, offset delta, key length, value length, header count


def decode_batch(data: bytes | memoryview, *, max_decompressed_bytes: int) -> Batch:
    """One batch (as cut by :func:`split_batches`) after checking its CRC32C.  Its records section, decompressed
    if compressed, may take at most ``max_decompressed_bytes`` (:class:`DecodeLimitExceeded` otherwise): a
    compressed one is never decompressed further than that, nor further than its first bad record;
    ``Batch.records_bytes`` is what it took.

    The header's offsets and count are checked as Kafka's ``LogValidator.validateBatch`` checks a client's
    batch (``INVALID_RECORD``: "Batch has an invalid offset range", "Invalid reported count for record batch",
    "Inconsistent batch offset range"); then record i must have offset delta i, which lakelog requires of
    every batch (a broker rewrites such a compressed batch instead)."""
    mv = memoryview(data)
    if len(mv) < HEADER_SIZE:
        raise _corrupt("shorter than a batch header")
    (base_offset, length, leader_epoch, magic, crc, attributes, last_delta, base_ts, max_ts, pid, epoch, base_seq,
     count) = HEADER.unpack_from(mv, 0)
    if magic != MAGIC:
        raise _corrupt(f"magic {magic}")
    if LENGTH_OFFSET + length != len(mv):
        raise _corrupt(f"batch length {length} disagrees with its {len(mv)} bytes")
    actual = crc32c(mv[CRC_START:])
    if actual != crc:
        raise _corrupt(f"CRC32C {actual:#010x} does not match the batch's {crc:#010x}")
    last = base_offset + last_delta
    if last_delta < 0:
        raise InvalidRecord(f"Batch has an invalid offset range: [{base_offset}, {last}]")
    if count <= 0:
        raise InvalidRecord(f"Invalid reported count for record batch: {count}")
    if count != last_delta + 1:
        raise InvalidRecord(f"Inconsistent batch offset range [{base_offset}, {last}] and count of records {count}")
    if count > max_decompressed_bytes // MIN_RECORD_BYTES:
        raise DecodeLimitExceeded(f"{count} records take more than the limit of {max_decompressed_bytes} bytes")
    body = mv[HEADER_SIZE:]
    codec = attributes & COMPRESSION_MASK
    if codec:
        pieces = compression.decompress_pieces(codec, body, max_decompressed_bytes)
        raw = b""
    else:
        if len(body) > max_decompressed_bytes:
            raise DecodeLimitExceeded(f"records of {len(body)} bytes, more than the limit of "
                                      f"{max_decompressed_bytes}")
        if count > len(body) // MIN_RECORD_BYTES:
            raise _corrupt(f"record count {count} cannot fit in {len(body)} bytes")
        pieces = iter(())
        raw = body.obj if isinstance(body.obj, bytes) and body.nbytes == len(body.obj) else bytes(body)
    try:
        cols, taken = _decode_windows(raw, pieces, count, base_ts, exhausted=not codec)
    except IndexError:
        raise _corrupt("a record runs past the end of the batch") from None
    except (OverflowError, ValueError) as e:  # a field numpy or Arrow cannot hold (pyarrow's errors are ValueErrors)
        if isinstance(e, CorruptRecord):
            raise
        raise _corrupt("a record field is out of range") from None
    return Batch(base_offset, leader_epoch, attributes, last_delta, base_ts, max_ts, pid, epoch, base_seq, *cols,
                 records_bytes=taken)


def _decode_windows(raw: bytes, pieces, count: int, base_ts: int, exhausted: bool) -> tuple[tuple, int]:
    """The batch's ``count`` records as columns, decoded window by window (see ``FIRST_WINDOW_RECORDS``) from
    ``raw`` and then ``pieces`` (the rest of the decompressed records, pulled as needed, unless
    ``exhausted``); and how many bytes the records took."""
    taken = len(raw)
    windows: list[tuple] = []
    done, start = 0, 0  # records decoded; where the window begins in raw
    most_records, most_bytes = FIRST_WINDOW_RECORDS, FIRST_WINDOW_BYTES
    while done < count:
        if not exhausted and len(raw) - start < most_bytes:  # the window's bytes, or all there are
            got = [raw[start:]]
            have = len(got[0])
            while have < most_bytes:
                piece = next(pieces, None)
                if piece is None:
                    exhausted = True
                    break
                got.append(piece)
                have += len(piece)
                taken += len(piece)
            raw, start = b"".join(got), 0
        want = min(count - done, most_records)
        begins: list[int] = []
        if exhausted:
            pos = _walk_all(raw, start, want, begins)
            if pos > len(raw):
                raise _corrupt(f"record {done + len(begins) - 1} runs past the end of the batch")
        else:
            pos = _walk(raw, start, want, begins, start + most_bytes)
            if not begins:  # one record larger than the window: decompress further
                most_bytes *= WINDOW_GROWTH
                continue
        windows.append(_decode_window(raw[start:pos], [b - start for b in begins] if start else begins, done,
                                      base_ts))
        done += len(begins)
        start = pos
        most_records, most_bytes = most_records * WINDOW_GROWTH, most_bytes * WINDOW_GROWTH
    left = len(raw) - start
    for piece in pieces:  # decompresses at most one more piece, unless it is empty
        left += len(piece)
        if left:
            break
    if left:
        raise _corrupt(f"bytes after the last of {count} records")
    return (windows[0] if len(windows) == 1 else _concat(windows)), taken


def _walk_all(raw: bytes, pos: int, n: int, begins: list[int]) -> int:
    """Append to ``begins`` where each of the next ``n`` records begins, from ``pos``; ``raw`` holds every
    byte the records may take.  Only the chain of record lengths is read here (in Python, the minimum per
    record): their values are checked with the rest of the window's fields; the position returned is past
    ``raw``'s end if a record is."""
    append = begins.append
    for _ in range(n):
        append(pos)
        v = raw[pos]
        if v < 0x80:
            pos += 1 + ((v >> 1) ^ -(v & 1))
        elif raw[pos + 1] < 0x80:  # records of 64 to 8191 bytes: two bytes
            v = (v & 0x7F) | (raw[pos + 1] << 7)
            pos += 2 + ((v >> 1) ^ -(v & 1))
        else:
            rec_len, after = _varint(raw, pos)
            pos = after + rec_len
        if pos < 0:
            raise _corrupt(f"a negative record length before byte {pos}")
    return pos


def _walk(raw: bytes, pos: int, n: int, begins: list[int], stop: int) -> int:
    """:func:`_walk_all` where more records may follow what is decompressed so far: stops before a record
    that does not lie wholly in ``raw`` and at byte ``stop``."""
    end = len(raw)
    append = begins.append
    try:
        for _ in range(n):
            if pos >= stop:
                break
            v = raw[pos]
            if v < 0x80:
                nxt = pos + 1 + ((v >> 1) ^ -(v & 1))
            elif raw[pos + 1] < 0x80:
                v = (v & 0x7F) | (raw[pos + 1] << 7)
                nxt = pos + 2 + ((v >> 1) ^ -(v & 1))
            else:
                rec_len, after = _varint(raw, pos)
                nxt = after + rec_len
            if nxt > end or nxt <= pos:
                if nxt <= pos:
                    raise _corrupt(f"a negative record length at byte {pos}")
                break
            append(pos)
            pos = nxt
    except IndexError:  # a record length cut by the end of what is decompressed so far
        pass
    return pos


def _decode_window(raw: bytes, begins: list[int], first_delta: int, base_ts: int) -> tuple:
    """The records beginning at ``begins`` of ``raw`` (which they fill), the first with offset delta
    ``first_delta``, as columns: offset deltas, timestamps, keys, values, headers (None if none has any)."""
    cols = _decode_columns(raw, begins, first_delta, base_ts)
    if cols is not None:
        return cols
    lists = _Lists([], [], [], [], [])  # records with headers: the per-record decoder
    _decode_records(raw, len(begins), base_ts, first_delta, lists)
    try:
        stamps = np.array(lists.timestamps, np.int64)  # Python ints: base + delta may exceed 64 bits
    except OverflowError:
        raise _corrupt(_TIMESTAMP_OVERFLOW) from None
    return (np.array(lists.offset_deltas, np.int64), stamps,
            pa.array(lists.keys, pa.binary()), pa.array(lists.values, pa.binary()),
            pa.array([None if h is None else [{"key": k, "value": v} for k, v in h] for h in lists.headers],
                     HEADER_TYPE) if any(h is not None for h in lists.headers) else None)


def _concat(windows: list[tuple]) -> tuple:
    """The columns of consecutive windows as one."""
    headers = None
    if any(w[4] is not None for w in windows):
        headers = pa.concat_arrays([w[4] if w[4] is not None else pa.nulls(len(w[0]), HEADER_TYPE)
                                    for w in windows])
    return (np.concatenate([w[0] for w in windows]), np.concatenate([w[1] for w in windows]),
            pa.concat_arrays([w[2] for w in windows]), pa.concat_arrays([w[3] for w in windows]), headers)


_U7 = np.uint64(0x7F)


def _varints(buf: np.ndarray, pos: np.ndarray, ends: np.ndarray, what: str) -> tuple[np.ndarray, np.ndarray]:
    """The zigzag varints at ``pos`` (one per record, all at once) → (values, positions after them).  ``buf``
    is padded so reading 10 bytes past any position within the data stays in bounds."""
    result = np.zeros(len(pos), np.uint64)
    done = np.zeros(len(pos), bool)
    size = np.zeros(len(pos), np.int64)
    for k in range(10):
        byte = buf[pos + k].astype(np.uint64)
        active = ~done
        result |= np.where(active, (byte & _U7) << np.uint64(7 * k), np.uint64(0))
        size += active
        done |= byte < 0x80
        if done.all():
            break
    else:
        raise _corrupt(f"a {what} varint longer than 10 bytes")
    after = pos + size
    if (after > ends).any():
        raise _corrupt(f"a record's {what} runs past the record's end")
    return (result >> np.uint64(1)).astype(np.int64) ^ -(result & np.uint64(1)).astype(np.int64), after


def _gather(buf: np.ndarray, n: int, starts: np.ndarray, lengths: np.ndarray) -> pa.Array:
    """A binary Arrow array of the slices ``buf[start:start+length]`` (length -1: null) of the first ``n``
    bytes.  The slices are disjoint and in order, so the buffer is runs of bytes outside and inside them:
    one ``repeat`` of alternating flags over the run lengths makes the mask that selects them all."""
    valid = lengths >= 0
    lens = np.where(valid, lengths, 0)
    offsets = np.zeros(len(lens) + 1, np.int64)
    np.cumsum(lens, out=offsets[1:])
    if offsets[-1] >= 2**31:
        raise _corrupt("record keys or values larger than 2 GiB")
    runs = np.empty(2 * len(lens) + 1, np.int64)
    runs[1:-1:2] = lens
    runs[0] = starts[0]
    runs[2:-1:2] = starts[1:] - (starts[:-1] + lens[:-1])
    runs[-1] = n - (starts[-1] + lens[-1])
    flags = np.zeros(len(runs), bool)
    flags[1::2] = True
    data = buf[:n][np.repeat(flags, runs)]
    nulls = int(len(lens) - valid.sum())
    bitmap = pa.py_buffer(np.packbits(valid, bitorder="little")) if nulls else None
    return pa.Array.from_buffers(pa.binary(), len(lens), [bitmap, pa.py_buffer(offsets.astype(np.int32)),
                                                          pa.py_buffer(data)], null_count=nulls)


def _decode_columns(raw: bytes, begins: list[int], first_delta: int, base_ts: int):
    """The records beginning at ``begins`` as columns, every field of every record decoded at once with numpy;
    None if a record has headers (the per-record decoder handles those)."""
    n = len(raw)
    count = len(begins)
    buf = np.frombuffer(raw + bytes(16), np.uint8)
    b = np.array(begins, np.int64)
    rec_len, p = _varints(buf, b, np.full(count, n, np.int64), "record length")
    # Lengths are compared with the room left before they are added: int64 arithmetic wraps silently.
    if (rec_len < 6).any() or (rec_len > n - p).any():
        raise _corrupt("a record length below 6 or past the batch's end")
    e = p + rec_len
    p = p + 1  # past the record attributes
    ts_delta, p = _varints(buf, p, e, "timestamp delta")
    if (ts_delta < _I64_MIN - min(base_ts, 0)).any() or (ts_delta > _I64_MAX - max(base_ts, 0)).any():
        raise _corrupt(_TIMESTAMP_OVERFLOW)
    off_delta, p = _varints(buf, p, e, "offset delta")
    wrong = np.flatnonzero(off_delta != np.arange(first_delta, first_delta + count))
    if len(wrong):
        i = int(wrong[0])
        raise _corrupt(f"record {first_delta + i} has offset delta {int(off_delta[i])}")
    klen, p = _varints(buf, p, e, "key length")
    if (klen < -1).any():
        raise _corrupt("a key length below -1")
    if (klen > e - p).any():
        raise _corrupt("a key runs past its record's end")
    kstart = p
    p = p + np.maximum(klen, 0)
    vlen, p = _varints(buf, p, e, "value length")
    if (vlen < -1).any():
        raise _corrupt("a value length below -1")
    if (vlen > e - p).any():
        raise _corrupt("a value runs past its record's end")
    vstart = p
    p = p + np.maximum(vlen, 0)
    hcount, p = _varints(buf, p, e, "header count")
    if hcount.any():
        return None
    if (p != e).any():
        raise _corrupt("a record's fields do not end where its length says")
    keys = pa.nulls(count, pa.binary()) if (klen == -1).all() else _gather(buf, n, kstart, klen)
    return off_delta, ts_delta + base_ts, keys, _gather(buf, n, vstart, vlen), None


def _decode_records(b: bytes, count: int, base_ts: int, first_delta: int, batch: _Lists) -> int:
    """Append ``count`` records from ``b`` to ``batch``'s lists, the first with offset delta ``first_delta``;
    returns the end position.

    Varints are inlined with a one-byte fast path: almost every varint of a record (lengths under 64,
    deltas under 64, no headers) is one byte, and a call per varint was most of the decode time."""
    n = len(b)
    pos = 0
    offset_deltas, timestamps, keys, values = batch.offset_deltas, batch.timestamps, batch.keys, batch.values
    headers_col = batch.headers
    for expected in range(first_delta, first_delta + count):
        # record length
        v = b[pos]
        if v < 0x80:
            pos += 1
            rec_len = (v >> 1) ^ -(v & 1)
        else:
            rec_len, pos = _varint(b, pos)
        rec_end = pos + rec_len
        if rec_len < 6 or rec_end > n:
            raise _corrupt(f"record length {rec_len} at byte {pos} of {n}")
        pos += 1  # record attributes (unused in v2)
        v = b[pos]
        if v < 0x80:
            pos += 1
            ts_delta = (v >> 1) ^ -(v & 1)
        else:
            ts_delta, pos = _varint(b, pos)
        v = b[pos]
        if v < 0x80:
            pos += 1
            off_delta = (v >> 1) ^ -(v & 1)
        else:
            off_delta, pos = _varint(b, pos)
        if off_delta != expected:
            raise _corrupt(f"record {expected} has offset delta {off_delta}")
        v = b[pos]
        if v < 0x80:
            pos += 1
            klen = (v >> 1) ^ -(v & 1)
        else:
            klen, pos = _varint(b, pos)
        if klen < 0:
            if klen != -1:
                raise _corrupt(f"key length {klen}")
            key = None
        else:
            key = b[pos:pos + klen]
            pos += klen
        v = b[pos]
        if v < 0x80:
            pos += 1
            vlen = (v >> 1) ^ -(v & 1)
        else:
            vlen, pos = _varint(b, pos)
        if vlen < 0:
            if vlen != -1:
                raise _corrupt(f"value length {vlen}")
            value = None
        else:
            value = b[pos:pos + vlen]
            pos += vlen
        v = b[pos]
        if v < 0x80:
            pos += 1
            hcount = (v >> 1) ^ -(v & 1)
        else:
            hcount, pos = _varint(b, pos)
        if hcount:
            if hcount < 0 or hcount > rec_end - pos:
                raise _corrupt(f"header count {hcount}")
            hs = []
            for _h in range(hcount):
                hk_len, pos = _varint(b, pos)
                if hk_len < 0 or pos + hk_len > rec_end:
                    raise _corrupt(f"header key length {hk_len}")
                try:
                    hk = b[pos:pos + hk_len].decode()
                except UnicodeDecodeError:
                    raise _corrupt("a header key is not UTF-8") from None
                pos += hk_len
                hv_len, pos = _varint(b, pos)
                if hv_len < -1 or pos + max(hv_len, 0) > rec_end:
                    raise _corrupt(f"header value length {hv_len}")
                hv = None if hv_len < 0 else b[pos:pos + hv_len]
                pos += max(hv_len, 0)
                hs.append((hk, hv))
            headers_col.append(hs)
        else:
            headers_col.append(None)
        if pos != rec_end:
            raise _corrupt(f"record at offset delta {off_delta} ends at byte {pos}, its length says {rec_end}")
        offset_deltas.append(off_delta)
        timestamps.append(base_ts + ts_delta)
        keys.append(key)
        values.append(value)
    return pos


def _varint(b: bytes, pos: int) -> tuple[int, int]:
    """A zigzag varint (at most 10 bytes) at ``pos`` → (value, next position)."""
    result = shift = 0
    while True:
        byte = b[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift > 63:
            raise _corrupt("a varint longer than 10 bytes")


_ZZ1 = [bytes([(i << 1) if i >= 0 else ((-i << 1) - 1)]) for i in range(-64, 64)]  # one-byte zigzag varints


def _zz(value: int) -> bytes:
    if -64 <= value < 64:
        return _ZZ1[value + 64]
    v = (value << 1) ^ (value >> 63)
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


_NULL = _zz(-1)


def encode_batch(*, base_offset: int, offset_deltas: list[int], timestamps: list[int],
                 keys: list[bytes | None], values: list[bytes | None],
                 headers: list[list[tuple[str, bytes | None]] | None] | None = None,
                 producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1,
                 log_append_time: bool = False, partition_leader_epoch: int = 0) -> bytes:
    """An uncompressed batch of the given records (offset deltas ascending; timestamps in epoch ms)."""
    n = len(values)
    if n == 0:
        raise InvalidRecord("a record batch needs at least one record")
    base_ts = min(timestamps)
    max_ts = max(timestamps)
    parts = []
    append = parts.append
    zz, zz1, null = _zz, _ZZ1, _NULL
    for i in range(n):
        k = keys[i]
        v = values[i]
        hs = headers[i] if headers is not None else None
        td = timestamps[i] - base_ts
        od = offset_deltas[i]
        fields = [b"\x00", zz1[td + 64] if td < 64 else zz(td), zz1[od + 64] if od < 64 else zz(od)]
        if k is None:
            fields.append(null)
        else:
            fields.append(zz(len(k)))
            fields.append(k)
        if v is None:
            fields.append(null)
        else:
            lv = len(v)
            fields.append(zz1[lv + 64] if lv < 64 else zz(lv))
            fields.append(v)
        if hs:
            fields.append(zz(len(hs)))
            for hk, hv in hs:
                hkb = hk.encode()
                fields.append(zz(len(hkb)))
                fields.append(hkb)
                if hv is None:
                    fields.append(null)
                else:
                    fields.append(zz(len(hv)))
                    fields.append(hv)
        else:
            fields.append(b"\x00")
        rec = b"".join(fields)
        append(zz(len(rec)))
        append(rec)
    body = b"".join(parts)
    attributes = TIMESTAMP_TYPE_BIT if log_append_time else 0
    tail = struct.pack(">hiqqqhii", attributes, offset_deltas[-1], base_ts, max_ts, producer_id, producer_epoch,
                       base_sequence, n) + body
    crc = crc32c(tail)
    return struct.pack(">qiibI", base_offset, len(tail) + 9, partition_leader_epoch, MAGIC, crc) + tail


def compressed_batch(batch_bytes: bytes, codec: int) -> bytes:
    """``batch_bytes`` (an uncompressed batch) with its records compressed by ``codec`` (for tests and bench)."""
    if codec == 0:
        return batch_bytes
    if codec not in compression.CODECS:
        raise UnsupportedCompressionType(f"compression codec {codec}")
    head = bytearray(batch_bytes[:HEADER_SIZE])
    body = compression.compress(codec, batch_bytes[HEADER_SIZE:])
    attributes = struct.unpack_from(">h", head, CRC_START)[0] | codec
    struct.pack_into(">h", head, CRC_START, attributes)
    struct.pack_into(">i", head, 8, HEADER_SIZE - LENGTH_OFFSET + len(body))
    crc = crc32c(bytes(head[CRC_START:]) + body)
    struct.pack_into(">I", head, 17, crc)
    return bytes(head) + body


def _zigzag_sizes(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(zigzag-encoded values as uint64, their varint sizes in bytes)."""
    zz = ((values << 1) ^ (values >> 63)).astype(np.uint64)
    size = np.ones(len(zz), np.int64)
    for k in range(1, 10):
        more = zz >= np.uint64(1 << (7 * k))
        if not more.any():
            break
        size += more
    return zz, size


def _put_varints(out: np.ndarray, pos: np.ndarray, zz: np.ndarray, size: np.ndarray) -> None:
    for k in range(int(size.max())):
        sel = size > k
        byte = (zz[sel] >> np.uint64(7 * k)) & np.uint64(0x7F)
        byte |= np.where(size[sel] > k + 1, np.uint64(0x80), np.uint64(0))
        out[pos[sel] + k] = byte.astype(np.uint8)


def _binary_parts(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(lengths with -1 for nulls, the concatenated bytes) of a binary Arrow array."""
    n = len(arr)
    validity, offsets_buf, data_buf = arr.buffers()
    offsets = np.frombuffer(offsets_buf, np.int32)[arr.offset:arr.offset + n + 1].astype(np.int64)
    lengths = np.diff(offsets)
    if arr.null_count:
        lengths = np.where(arr.is_valid().to_numpy(zero_copy_only=False), lengths, -1)
    data = np.frombuffer(data_buf, np.uint8)[offsets[0]:offsets[-1]] if data_buf is not None else \
        np.zeros(0, np.uint8)
    return lengths, data


def _scatter(out: np.ndarray, starts: np.ndarray, lengths: np.ndarray, data: np.ndarray, n: int) -> None:
    """Write the concatenated ``data`` into ``out`` as slices of ``lengths`` (-1: none) at ``starts``."""
    lens = np.maximum(lengths, 0)
    if not lens.any():
        return
    runs = np.empty(2 * len(lens) + 1, np.int64)
    runs[1:-1:2] = lens
    runs[0] = starts[0]
    runs[2:-1:2] = starts[1:] - (starts[:-1] + lens[:-1])
    runs[-1] = n - (starts[-1] + lens[-1])
    flags = np.zeros(len(runs), bool)
    flags[1::2] = True
    out[:n][np.repeat(flags, runs)] = data


def _column_fields(base_offset: int, base_ts: int, offsets: np.ndarray, timestamps: np.ndarray, keys: pa.Array,
                   values: pa.Array):
    """Every field of every record of :func:`encode_columns`, zigzag-encoded with its varint size, and each
    record's body size."""
    ts = _zigzag_sizes(timestamps - base_ts)
    od = _zigzag_sizes(offsets - base_offset)
    klen, kdata = _binary_parts(keys)
    vlen, vdata = _binary_parts(values)
    kl = _zigzag_sizes(klen)
    vl = _zigzag_sizes(vlen)
    body = 1 + ts[1] + od[1] + kl[1] + np.maximum(klen, 0) + vl[1] + np.maximum(vlen, 0) + 1
    return ts, od, (klen, kdata, *kl), (vlen, vdata, *vl), body, _zigzag_sizes(body)


def encode_columns(*, base_offset: int, offsets: np.ndarray, timestamps: np.ndarray, keys: pa.Array,
                   values: pa.Array, producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1,
                   log_append_time: bool = False, partition_leader_epoch: int = 0) -> bytes:
    """An uncompressed batch of records without headers, every record encoded at once with numpy: the same
    bytes :func:`encode_batch` writes (offsets absolute and ascending; timestamps in epoch ms)."""
    if len(offsets) == 0:
        raise InvalidRecord("a record batch needs at least one record")
    return encode_columns_within(None, base_offset=base_offset, offsets=offsets, timestamps=timestamps, keys=keys,
                                 values=values, producer_id=producer_id, producer_epoch=producer_epoch,
                                 base_sequence=base_sequence, log_append_time=log_append_time,
                                 partition_leader_epoch=partition_leader_epoch)[0]


def encode_columns_within(max_bytes: int | None, *, base_offset: int, offsets: np.ndarray, timestamps: np.ndarray,
                          keys: pa.Array, values: pa.Array, producer_id: int = -1, producer_epoch: int = -1,
                          base_sequence: int = -1, log_append_time: bool = False,
                          partition_leader_epoch: int = 0) -> tuple[bytes, int]:
    """(batch, records in it): :func:`encode_columns` of the longest prefix of the records whose batch takes at
    most ``max_bytes`` (None: all of them); (b"", 0) if not even the first fits.  The fields are encoded once,
    against the base timestamp of all the records (a prefix's deltas are then never negative)."""
    base_ts = int(timestamps.min())
    (ts_zz, ts_size), (od_zz, od_size), (klen, kdata, kl_zz, kl_size), (vlen, vdata, vl_zz, vl_size), body, \
        (len_zz, len_size) = _column_fields(base_offset, base_ts, offsets, timestamps, keys, values)
    total = len_size + body
    n = len(offsets)
    if max_bytes is not None and HEADER_SIZE + int(total.sum()) > max_bytes:
        n = int(np.searchsorted(np.cumsum(total), max_bytes - HEADER_SIZE, side="right"))
        if n == 0:
            return b"", 0
        kdata = kdata[:int(np.maximum(klen[:n], 0).sum())]
        vdata = vdata[:int(np.maximum(vlen[:n], 0).sum())]
        ts_zz, ts_size, od_zz, od_size, klen, kl_zz, kl_size, vlen, vl_zz, vl_size, len_zz, len_size, total = (
            a[:n] for a in (ts_zz, ts_size, od_zz, od_size, klen, kl_zz, kl_size, vlen, vl_zz, vl_size, len_zz,
                            len_size, total))
    starts = np.zeros(n, np.int64)
    np.cumsum(total[:-1], out=starts[1:])
    size = int(total.sum())
    out = np.zeros(size, np.uint8)  # record attributes and header counts stay 0
    _put_varints(out, starts, len_zz, len_size)
    p = starts + len_size + 1
    _put_varints(out, p, ts_zz, ts_size)
    p = p + ts_size
    _put_varints(out, p, od_zz, od_size)
    p = p + od_size
    _put_varints(out, p, kl_zz, kl_size)
    p = p + kl_size
    _scatter(out, p, klen, kdata, size)
    p = p + np.maximum(klen, 0)
    _put_varints(out, p, vl_zz, vl_size)
    p = p + vl_size
    _scatter(out, p, vlen, vdata, size)
    attributes = TIMESTAMP_TYPE_BIT if log_append_time else 0
    max_ts = int(timestamps[:n].max())
    tail = struct.pack(">hiqqqhii", attributes, int(offsets[n - 1] - base_offset), base_ts, max_ts, producer_id,
                       producer_epoch, base_sequence, n) + out.tobytes()
    crc = crc32c(tail)
    return struct.pack(">qiibI", base_offset, len(tail) + 9, partition_leader_epoch, MAGIC, crc) + tail, n
