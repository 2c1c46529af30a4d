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
and the decompressed size is bounded (:mod:`kafka_front.compression`).  Any
violation raises :class:`~lakelog.errors.CorruptRecord` (``CORRUPT_MESSAGE``).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from crc32c import crc32c

from lakelog.errors import CorruptRecord, InvalidRecord, UnsupportedCompressionType

from kafka_front import compression

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


@dataclass
class Batch:
    """One decoded batch: header fields and columns of its records (parallel lists)."""

    base_offset: int
    partition_leader_epoch: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    offset_deltas: list[int]
    timestamps: list[int]  # epoch ms, absolute
    keys: list[bytes | None]
    values: list[bytes | None]
    headers: list[list[tuple[str, bytes | None]] | None]  # None: the record has no headers

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


def decode_batch(data: bytes | memoryview, *, max_decompressed_bytes: int) -> Batch:
    """One batch (as cut by :func:`split_batches`) after checking its CRC32C; records are decompressed into at
    most ``max_decompressed_bytes``."""
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
    if count < 0 or count > last_delta + 1 or (count == 0 and last_delta != -1 and last_delta != 0):
        raise _corrupt(f"record count {count} with last offset delta {last_delta}")
    body = mv[HEADER_SIZE:]
    codec = attributes & COMPRESSION_MASK
    if codec:
        body = memoryview(compression.decompress(codec, body, max_decompressed_bytes))
    if count > len(body) // 7 + 1:  # a record takes at least 7 bytes (length, attributes, 5 varints)
        raise _corrupt(f"record count {count} cannot fit in {len(body)} bytes")
    batch = Batch(base_offset, leader_epoch, attributes, last_delta, base_ts, max_ts, pid, epoch, base_seq,
                  [], [], [], [], [])
    try:
        end = _decode_records(body, count, base_ts, batch)
    except IndexError:
        raise _corrupt("a record runs past the end of the batch") from None
    if end != len(body):
        raise _corrupt(f"{len(body) - end} bytes after the last of {count} records")
    return batch


def _decode_records(buf: memoryview, count: int, base_ts: int, batch: Batch) -> int:
    """Append ``count`` records from ``buf`` to ``batch``'s columns; returns the end position.

    Varints are inlined with a one-byte fast path: almost every varint of a record (lengths under 64,
    deltas under 64, no headers) is one byte, and a call per varint was most of the decode time."""
    b = buf.obj if isinstance(buf.obj, bytes) and buf.nbytes == len(buf.obj) else bytes(buf)
    n = len(b)
    pos = 0
    offset_deltas, timestamps, keys, values = batch.offset_deltas, batch.timestamps, batch.keys, batch.values
    headers_col = batch.headers
    last_delta = batch.last_offset_delta
    prev_delta = -1
    for _ in range(count):
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
        if off_delta <= prev_delta or off_delta > last_delta:
            raise _corrupt(f"offset delta {off_delta} after {prev_delta} (last offset delta {last_delta})")
        prev_delta = off_delta
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
