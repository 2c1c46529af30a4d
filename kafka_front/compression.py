"""Record batch codecs (Kafka's compression.type ids 1-4), decompression bounded in size and done on demand.

A compressed batch from a client is hostile: a few KiB of zstd can claim
gigabytes.  :func:`decompress_pieces` decodes in pieces of at most
:data:`PIECE_BYTES`, only as far as its reader asks, and raises
``CORRUPT_MESSAGE`` once the output would pass ``max_bytes`` rather than
allocating more: a reader that refuses a batch at its first bad record stops
decompressing there.  Snappy comes in two framings: raw (librdkafka), one block
whose declared size is checked before it is decoded whole, and xerial's chunked
stream (the Java client), decoded a chunk at a time, each chunk's declared size
checked first.
"""

from __future__ import annotations

import gzip
import zlib
from typing import Iterator

import cramjam
import lz4.frame
import zstandard

from lakelog.errors import CorruptRecord, UnsupportedCompressionType

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
CODECS = {GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
_XERIAL_MAGIC = b"\x82SNAPPY\x00"


class DecodeLimitExceeded(CorruptRecord):
    """Records that decode to more than the limit they were given (``CORRUPT_MESSAGE``, as every other refusal
    of the decoder): told apart so that a caller sharing one limit over several batches knows it is spent."""


def _too_large(codec: int, limit: int) -> DecodeLimitExceeded:
    return DecodeLimitExceeded(f"{CODECS[codec]} records decompress to more than {limit} bytes")


PIECE_BYTES = 1 << 20  # what one step of decompression yields at most


def decompress(codec: int, data, max_bytes: int) -> bytes:
    """The records of a batch compressed with ``codec``, at most ``max_bytes`` long."""
    return b"".join(decompress_pieces(codec, data, max_bytes))


def decompress_pieces(codec: int, data, max_bytes: int) -> Iterator[bytes]:
    """The records of a batch compressed with ``codec``, in pieces of at most :data:`PIECE_BYTES`, decoded as
    they are asked for; :class:`DecodeLimitExceeded` before more than ``max_bytes`` in all, CorruptRecord for
    data that does not decompress (possibly only once the pieces before it were taken)."""
    if codec not in CODECS:
        raise UnsupportedCompressionType(f"compression codec {codec} is not one of Kafka's (1 gzip, 2 snappy, "
                                         f"3 lz4, 4 zstd)")
    data = bytes(data)
    total = 0
    try:
        for piece in _PIECES[codec](data, max_bytes):
            total += len(piece)
            if total > max_bytes:
                raise _too_large(codec, max_bytes)
            yield piece
    except CorruptRecord:
        raise
    except (zlib.error, RuntimeError, zstandard.ZstdError, cramjam.DecompressionError, ValueError, OSError) as e:
        raise CorruptRecord(f"{CODECS[codec]} records do not decompress: {e}") from None


def _gzip(data: bytes, max_bytes: int) -> Iterator[bytes]:
    d = zlib.decompressobj(wbits=47)  # gzip or zlib header
    pending = data
    while not d.eof:
        out = d.decompress(pending, PIECE_BYTES)
        pending = d.unconsumed_tail
        if out:
            yield out
        elif not pending:
            raise CorruptRecord("gzip records are truncated")


def _lz4(data: bytes, max_bytes: int) -> Iterator[bytes]:
    d = lz4.frame.LZ4FrameDecompressor()
    out = d.decompress(data, max_length=PIECE_BYTES)
    while True:
        if out:
            yield out
        if d.eof:
            return
        if d.needs_input:
            raise CorruptRecord("lz4 records are truncated")
        out = d.decompress(b"", max_length=PIECE_BYTES)


def _zstd(data: bytes, max_bytes: int) -> Iterator[bytes]:
    with zstandard.ZstdDecompressor().stream_reader(data, read_across_frames=True) as r:
        while out := r.read(PIECE_BYTES):
            yield out


def _snappy_length(block: bytes) -> int:
    """The uncompressed length a raw snappy block declares (its varint preamble)."""
    result = shift = 0
    for i in range(min(5, len(block))):
        result |= (block[i] & 0x7F) << shift
        if block[i] < 0x80:
            return result
        shift += 7
    raise CorruptRecord("snappy block has no length preamble")


def _snappy(data: bytes, max_bytes: int) -> Iterator[bytes]:
    if data[:8] != _XERIAL_MAGIC:
        if _snappy_length(data) > max_bytes:
            raise _too_large(SNAPPY, max_bytes)
        yield bytes(cramjam.snappy.decompress_raw(data))
        return
    total = 0
    pos = 16  # magic, version, compatible version
    while pos < len(data):
        if pos + 4 > len(data):
            raise CorruptRecord("xerial snappy chunk header is truncated")
        n = int.from_bytes(data[pos:pos + 4], "big")
        chunk = data[pos + 4:pos + 4 + n]
        if len(chunk) != n:
            raise CorruptRecord("xerial snappy chunk is truncated")
        total += _snappy_length(chunk)
        if total > max_bytes:
            raise _too_large(SNAPPY, max_bytes)
        yield bytes(cramjam.snappy.decompress_raw(chunk))
        pos += 4 + n


_PIECES = {GZIP: _gzip, SNAPPY: _snappy, LZ4: _lz4, ZSTD: _zstd}


def compress(codec: int, data: bytes) -> bytes:
    """``data`` compressed as a Kafka client would (tests and benchmarks build batches with it)."""
    if codec == GZIP:
        return gzip.compress(data)
    if codec == SNAPPY:
        return bytes(cramjam.snappy.compress_raw(data))
    if codec == LZ4:
        return lz4.frame.compress(data)
    if codec == ZSTD:
        return zstandard.ZstdCompressor().compress(data)
    raise UnsupportedCompressionType(f"compression codec {codec}")
