"""Arrow IPC produce bodies, read as hostile input: bounded, then fully validated, before anything uses them.

A body is an Arrow IPC stream. It is read in three steps, and nothing else touches its data before the last:

1. **Bound.** Every message's metadata is read (pyarrow verifies the flatbuffers) and the decoded size of each
   record batch is computed from its header without decoding it: the buffer lengths, or for a compressed
   batch (LZ4 frame or ZSTD per buffer) the uncompressed length each buffer declares in its first 8 bytes.
   A stream whose decoded size exceeds ``max_decoded_bytes`` is refused with ``MESSAGE_TOO_LARGE`` before
   any buffer is decompressed, so a 33 KB body cannot make the process allocate a gigabyte. A compressed
   batch's buffers must lie inside its message's body; an uncompressed batch decodes to its body. Arrays
   without buffers decode to nothing, yet the produce path builds columns for them: each row is charged the
   record columns normalisation builds (:data:`NORMALIZED_ROW_BITS`, from ``INPUT_SCHEMA``), and so is each
   element of a null-typed array at any depth (its field node's length; a ``headers`` item or field of type
   null is cast to strings and binaries). So a 144-byte body declaring two million rows of no columns is
   refused, not normalised to 41 MB.
2. **Shape.** The schema may only use the plain types a produce body needs (no dictionary encoding,
   extension types, unions, maps or large nesting): dictionary batches (whose deltas are concatenated
   while reading, touching data) never reach the reader.
3. **Validate.** The batches are read and ``validate(full=True)`` checks every buffer, offset, length and
   null count, and UTF-8 where the schema says string, so corrupt offsets that would make Arrow read
   outside its buffers (a crash, or foreign memory in the log) are ``CORRUPT_MESSAGE``.

Pure functions over bytes; thread-safe.
"""

from __future__ import annotations

import struct

import pyarrow as pa

from lakelog.errors import CorruptRecord, MessageTooLarge
from lakelog.writer.records import INPUT_SCHEMA

# Arrow's Message flatbuffer (format/Message.fbs): the fields this module reads, by vtable slot.
_MESSAGE_HEADER_TYPE, _MESSAGE_HEADER = 1, 2
_HEADER_DICTIONARY_BATCH, _HEADER_RECORD_BATCH = 2, 3
_BATCH_LENGTH, _BATCH_NODES, _BATCH_BUFFERS, _BATCH_COMPRESSION = 0, 1, 2, 3
_DICTIONARY_DATA = 1
_NO_COMPRESSION_MARKER = -1  # a compressed batch's buffer stored as is: its 8-byte prefix says -1


def _row_bits(t: pa.DataType) -> int:
    """Bits one row of a column of type ``t`` takes when built of nulls: its validity bit, and its fixed-width
    value or, for a variable-width column (binary, string, list), its 32-bit offset."""
    if pa.types.is_binary(t) or pa.types.is_string(t) or pa.types.is_list(t):
        return 1 + 32
    return 1 + t.bit_width


# What a row of a produce body costs once normalised (lakelog/writer/records.py normalize_records builds every
# column of INPUT_SCHEMA a body lacks as nulls): 164 bits, 20.5 bytes.
NORMALIZED_ROW_BITS = sum(_row_bits(field.type) for field in INPUT_SCHEMA)


def _normalized_bytes(elements: int) -> int:
    return -(-elements * NORMALIZED_ROW_BITS // 8)


class _Table:
    """A flatbuffers table inside ``data`` (bounds-checked: a bad offset raises ``struct.error``/ValueError)."""

    def __init__(self, data: memoryview, pos: int) -> None:
        self.data, self.pos = data, pos
        (soffset,) = struct.unpack_from("<i", data, pos)
        self.vtable = pos - soffset
        (self.vtable_len,) = struct.unpack_from("<H", data, self.vtable)

    def _field(self, slot: int) -> int | None:
        entry = 4 + 2 * slot
        if entry + 2 > self.vtable_len:
            return None
        (off,) = struct.unpack_from("<H", self.data, self.vtable + entry)
        return self.pos + off if off else None

    def scalar(self, slot: int, fmt: str, default: int = 0) -> int:
        at = self._field(slot)
        return default if at is None else struct.unpack_from(fmt, self.data, at)[0]

    def table(self, slot: int) -> "_Table | None":
        at = self._field(slot)
        return None if at is None else _Table(self.data, at + struct.unpack_from("<I", self.data, at)[0])

    def structs(self, slot: int, fmt: str) -> list[tuple]:
        """A vector of fixed-size structs."""
        at = self._field(slot)
        if at is None:
            return []
        start = at + struct.unpack_from("<I", self.data, at)[0]
        (n,) = struct.unpack_from("<I", self.data, start)
        size = struct.calcsize(fmt)
        if start + 4 + n * size > len(self.data):
            raise ValueError("vector runs past the metadata")
        return [struct.unpack_from(fmt, self.data, start + 4 + i * size) for i in range(n)]


def _root(metadata: pa.Buffer) -> _Table:
    data = memoryview(metadata)
    (root,) = struct.unpack_from("<I", data, 0)
    return _Table(data, root)


def batch_decoded_size(metadata: pa.Buffer, body: pa.Buffer) -> tuple[int, int]:
    """``(rows, decoded bytes)`` of a record or dictionary batch message, from its header alone.

    Raises :class:`~lakelog.errors.CorruptRecord` for a header that does not fit its body.
    """
    try:
        message = _root(metadata)
        header_type = message.scalar(_MESSAGE_HEADER_TYPE, "<B")
        header = message.table(_MESSAGE_HEADER)
        if header is not None and header_type == _HEADER_DICTIONARY_BATCH:
            header = header.table(_DICTIONARY_DATA)
        if header is None or header_type not in (_HEADER_RECORD_BATCH, _HEADER_DICTIONARY_BATCH):
            raise CorruptRecord("an Arrow batch message without a batch header")
        rows = header.scalar(_BATCH_LENGTH, "<q")
        if rows < 0:
            raise CorruptRecord(f"an Arrow batch of {rows} rows")
        body_view = memoryview(body)
        if header.table(_BATCH_COMPRESSION) is None:
            # Uncompressed: the buffers are the body's bytes (the reader refuses ranges outside it, and
            # validate() lengths that do not fit), so the body's size bounds the decoded size.
            return rows, len(body_view)
        decoded = 0
        for offset, length in header.structs(_BATCH_BUFFERS, "<qq"):
            if offset < 0 or length < 0 or offset + length > len(body_view):
                raise CorruptRecord(f"an Arrow buffer [{offset}, {offset + length}) lies outside its message body "
                                    f"of {len(body_view)} bytes")
            if length == 0:
                continue
            if length < 8:
                raise CorruptRecord(f"a compressed Arrow buffer of {length} bytes has no length prefix")
            (declared,) = struct.unpack_from("<q", body_view, offset)
            if declared == _NO_COMPRESSION_MARKER:
                decoded += length - 8
            elif declared < 0:
                raise CorruptRecord(f"a compressed Arrow buffer declares {declared} bytes")
            else:
                decoded += declared
    except (struct.error, ValueError) as e:
        raise CorruptRecord(f"an Arrow batch header is malformed ({e})") from None
    return rows, decoded


def batch_node_lengths(metadata: pa.Buffer) -> list[int]:
    """The length of every array of a record batch message (its field nodes, the schema's fields in pre-order),
    from its header alone; raises :class:`~lakelog.errors.CorruptRecord` for a malformed header."""
    try:
        header = _root(metadata).table(_MESSAGE_HEADER)
        if header is None:
            raise CorruptRecord("an Arrow batch message without a batch header")
        lengths = [length for length, _ in header.structs(_BATCH_NODES, "<qq")]
    except (struct.error, ValueError) as e:
        raise CorruptRecord(f"an Arrow batch header is malformed ({e})") from None
    if any(n < 0 for n in lengths):
        raise CorruptRecord("an Arrow array of negative length")
    return lengths


def _null_nodes(schema: pa.Schema) -> list[bool]:
    """For each field node of a batch of ``schema`` (pre-order), whether it is null-typed: an array of that type
    has no buffers, so its length costs nothing in the body."""
    out: list[bool] = []

    def walk(t: pa.DataType) -> None:
        out.append(pa.types.is_null(t))
        if pa.types.is_list(t) or pa.types.is_large_list(t):
            walk(t.value_type)
        elif pa.types.is_struct(t):
            for i in range(t.num_fields):
                walk(t.field(i).type)

    for field in schema:
        walk(field.type)
    return out


def _plain(t: pa.DataType, depth: int = 0) -> bool:
    """The types a produce body may use: scalars, strings and binaries, and lists and structs of them."""
    if depth > 3:
        return False
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return _plain(t.value_type, depth + 1)
    if pa.types.is_struct(t):
        return all(_plain(t.field(i).type, depth + 1) for i in range(t.num_fields))
    return (pa.types.is_integer(t) or pa.types.is_boolean(t) or pa.types.is_floating(t) or pa.types.is_null(t)
            or pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t)
            or pa.types.is_large_binary(t) or pa.types.is_timestamp(t))


class DecodesLarge(Exception):
    """The body decodes to more than the caller's ``max_inline_bytes``: decode it where a long task may run."""


def read_arrow_body(body: bytes, *, max_decoded_bytes: int, max_inline_bytes: int | None = None) -> pa.Table:
    """The body's table, bounded and fully validated (see the module doc).

    Raises ``CORRUPT_MESSAGE`` for anything malformed and ``MESSAGE_TOO_LARGE`` when the decoded batches, with
    the record columns normalisation builds for their rows, would exceed ``max_decoded_bytes``; nothing has
    been decompressed beyond that bound when either is raised.
    With ``max_inline_bytes`` (a caller on an event loop), :class:`DecodesLarge` is raised, before any
    decompression, for a body that decodes to more than that.
    """
    buf = pa.py_buffer(body)
    decoded = 0
    try:
        messages = pa.ipc.MessageReader.open_stream(buf)
        first = next(iter(messages), None)
        if first is None:
            raise CorruptRecord("an empty Arrow IPC stream")
        if first.type != "schema":
            raise CorruptRecord("an Arrow IPC stream must start with its schema")
        schema = pa.ipc.read_schema(first)
        for field in schema:
            if not _plain(field.type):
                raise CorruptRecord(f"Arrow column {field.name!r} has type {field.type}, which a produce body "
                                    f"may not use (plain binary, string, integer and timestamp columns, and "
                                    f"lists and structs of them)")
        null_nodes = _null_nodes(schema)
        batches = []
        for message in messages:  # one pass: each batch is bounded from its header, then read from its body
            if message.type == "dictionary batch":
                raise CorruptRecord("dictionary-encoded Arrow columns are not accepted in a produce body")
            if message.type != "record batch":
                raise CorruptRecord(f"unexpected Arrow IPC message {message.type!r}")
            n, size = batch_decoded_size(message.metadata, message.body)
            nodes = batch_node_lengths(message.metadata)
            if len(nodes) != len(null_nodes):
                raise CorruptRecord(f"an Arrow batch of {len(nodes)} arrays for a schema of {len(null_nodes)}")
            # the buffers, and the columns built for arrays that have none: the record columns of each row,
            # and what each element of a null-typed array is cast to (charged as much as a row)
            built = n + sum(length for length, null in zip(nodes, null_nodes) if null)
            decoded += size + _normalized_bytes(built)
            if decoded > max_decoded_bytes:
                raise MessageTooLarge(f"the Arrow body decodes to more than {max_decoded_bytes} bytes "
                                      f"(max_request_bytes, counting {NORMALIZED_ROW_BITS / 8:g} bytes a row for "
                                      f"the record columns it is normalised to); it was refused before "
                                      f"decompression")
            if max_inline_bytes is not None and decoded > max_inline_bytes:
                raise DecodesLarge()
            batches.append(pa.ipc.read_record_batch(message, schema))
        table = pa.Table.from_batches(batches, schema)
        table.validate(full=True)
    except (pa.ArrowInvalid, pa.ArrowException, OSError, ValueError, EOFError) as e:
        raise CorruptRecord(f"the body is not a valid Arrow IPC stream: {_one_line(e)}") from None
    return table


def _one_line(e: Exception) -> str:
    """An Arrow error's first line, without the C++ source locations some builds append."""
    text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    return text[:300]
