"""Record batch codecs (Kafka's compression.type ids 1-4), decompression bounded in size.

A compressed batch from a client is hostile: a few KiB of zstd can claim
gigabytes.  :func:`decompress` stops at ``max_bytes`` of output and raises
``CORRUPT_MESSAGE`` rather than allocating more; every codec's streaming
decoder is told the limit before it produces output.  Snappy comes in two
framings: raw (librdkafka) and xerial's chunked stream (the Java client); both
are accepted, each chunk's declared size checked before it is decoded.
"""

from __future__ import annotations

import gzip
import zlib

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


def decompress(codec: int, data, max_bytes: int) -> bytes:
    """The records of a batch compressed with ``codec``, at most ``max_bytes`` long."""
    data = bytes(data)
    try:
        if codec == GZIP:
            d = zlib.decompressobj(wbits=47)  # gzip or zlib header
            out = d.decompress(data, max_bytes + 1)
            if len(out) > max_bytes or d.unconsumed_tail:
                raise _too_large(codec, max_bytes)
            if not d.eof:
                raise CorruptRecord("gzip records are truncated")
            return out
        if codec == LZ4:
            d = lz4.frame.LZ4FrameDecompressor()
            out = d.decompress(data, max_length=max_bytes + 1)
            if len(out) > max_bytes:
                raise _too_large(codec, max_bytes)
            if not d.eof:
                raise CorruptRecord("lz4 records are truncated")
            return out
        if codec == ZSTD:
            # A stream reader stops at the limit (decompressobj has no output limit).
            with zstandard.ZstdDecompressor().stream_reader(data, read_across_frames=True) as r:
                out = r.read(max_bytes + 1)
            if len(out) > max_bytes:
                raise _too_large(codec, max_bytes)
            return out
        if codec == SNAPPY:
            return _snappy(data, max_bytes)
    except CorruptRecord:
        raise
    except (zlib.error, RuntimeError, zstandard.ZstdError, cramjam.DecompressionError, ValueError, OSError) as e:
        raise CorruptRecord(f"{CODECS.get(codec, codec)} records do not decompress: {e}") from None
    raise UnsupportedCompressionType(f"compression codec {codec} is not one of Kafka's (1 gzip, 2 snappy, "
                                     f"3 lz4, 4 zstd)")


def _snappy_length(block: bytes) -> int:
    """The uncompressed length a raw snappy block declares (its varint preamble)."""
    result = shift = 0
    for i in range(min(5, len(block))):
        result |= (block[i] & 0x7F) << shift
        if block[i] < 0x80:
            return result
        shift += 7
    raise CorruptRecord("snappy block has no length preamble")


def _snappy(data: bytes, max_bytes: int) -> bytes:
    if data[:8] != _XERIAL_MAGIC:
        if _snappy_length(data) > max_bytes:
            raise _too_large(SNAPPY, max_bytes)
        return bytes(cramjam.snappy.decompress_raw(data))
    out = bytearray()
    pos = 16  # magic, version, compatible version
    while pos < len(data):
        if pos + 4 > len(data):
            raise CorruptRecord("xerial snappy chunk header is truncated")
        n = int.from_bytes(data[pos:pos + 4], "big")
        chunk = data[pos + 4:pos + 4 + n]
        if len(chunk) != n:
            raise CorruptRecord("xerial snappy chunk is truncated")
        if len(out) + _snappy_length(chunk) > max_bytes:
            raise _too_large(SNAPPY, max_bytes)
        out += bytes(cramjam.snappy.decompress_raw(chunk))
        pos += 4 + n
    return bytes(out)


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
