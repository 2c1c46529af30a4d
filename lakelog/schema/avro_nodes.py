"""The vectorized Avro decoder's nodes: one per schema node, each reading its value for all of a batch's records at
once from each record's current position, bounded by the record's end (:class:`DecodeContext`). The decoder, its
type mapping and its contract are :mod:`lakelog.schema.avro_columns`'.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakelog.schema.parsed_schema import RecordDecodeError, Untypeable
from lakelog.schema.schema_limits import MAX_EMPTY_ITEMS, MAX_NESTING

TIMESTAMP = pa.timestamp("us", tz="UTC")
PADDING = 16  # zero bytes after the data, so a varint's or a double's read never leaves the buffer
UUID_PATTERN = "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
_SHIFTS = np.arange(0, 70, 7, dtype=np.uint64)


class DecodeContext:
    """One batch: its bytes (padded), each record's end, whether to build arrays, the nesting reached."""

    __slots__ = ("buf", "ends", "build", "depth")

    def __init__(self, buf: np.ndarray, ends: np.ndarray, build: bool) -> None:
        self.buf, self.ends, self.build, self.depth = buf, ends, build, 0

    def fail(self, rows: np.ndarray, where: np.ndarray, reason: str):
        raise RecordDecodeError(int(rows[np.flatnonzero(where)[0]]), reason)

    def check_end(self, rows: np.ndarray, pos: np.ndarray, what: str) -> None:
        over = pos > self.ends[rows]
        if over.any():
            self.fail(rows, over, f"the payload ends inside {what}")


def read_varint(ctx: DecodeContext, rows: np.ndarray, pos: np.ndarray, what: str) -> tuple[np.ndarray, np.ndarray]:
    """Zig-zag varints (Avro's int and long) at ``pos``: (values, positions after them)."""
    b = ctx.buf[pos]
    raw = (b & 0x7F).astype(np.uint64)
    p = pos + 1
    cont = b >= 0x80
    if cont.any():  # later rounds only over the records whose varint goes on
        active = np.flatnonzero(cont)
        for i in range(1, 10):
            at = p[active]
            b = ctx.buf[at]
            raw[active] |= (b & 0x7F).astype(np.uint64) << _SHIFTS[i]
            p[active] = at + 1
            if i == 9 and (b > 1).any():
                ctx.fail(rows[active], b > 1, f"{what} is a varint beyond 64 bits")
            cont = b >= 0x80
            if not cont.any():
                break
            active = active[cont]
        else:
            ctx.fail(rows[active], np.ones(len(active), bool), f"{what} is a varint longer than 10 bytes")
    ctx.check_end(rows, p, what)
    values = (raw >> np.uint64(1)).view(np.int64) ^ -(raw & np.uint64(1)).view(np.int64)
    return values, p


def _strided(buf: np.ndarray, size: int) -> np.ndarray:
    """Rows of ``size`` bytes starting at every position of ``buf`` (a view: ``_strided(buf, 8)[pos]`` gathers
    8 bytes per position in one indexing)."""
    return np.lib.stride_tricks.as_strided(buf, shape=(len(buf) - size + 1, size), strides=(1, 1), writeable=False)


def scatter(parts: list[tuple[np.ndarray, pa.Array]], k: int, type_: pa.DataType) -> pa.Array:
    """An array of ``k`` values of ``type_``: each part's values at its row positions, null elsewhere."""
    idx = np.full(k, -1, dtype=np.int64)
    arrays, base = [], 0
    for where, arr in parts:
        if len(where):
            idx[where] = np.arange(base, base + len(where))
            arrays.append(arr.cast(type_) if arr.type != type_ else arr)
            base += len(where)
    arrays.append(pa.nulls(1, type_))
    idx[idx < 0] = base
    return pa.concat_arrays(arrays).take(pa.array(idx))


class Node:
    """A schema node: its Arrow type (None: not typeable), its leaf count, and a vectorized reader."""

    type: pa.DataType | None = None
    min_bytes = 1  # the fewest bytes a value of this node takes

    def leaves(self, memo: dict) -> int:
        return 1

    def read(self, ctx: DecodeContext, rows: np.ndarray, pos: np.ndarray) -> tuple[pa.Array | None, np.ndarray]:
        raise NotImplementedError


class NullNode(Node):
    type = None  # a column of nulls has no Delta type
    min_bytes = 0

    def read(self, ctx, rows, pos):
        return (pa.nulls(len(rows)) if ctx.build else None), pos


class BooleanNode(Node):
    type = pa.bool_()

    def read(self, ctx, rows, pos):
        end = pos + 1
        ctx.check_end(rows, end, "a boolean")
        b = ctx.buf[pos]
        if (b > 1).any():
            ctx.fail(rows, b > 1, "a boolean byte other than 0 or 1")
        return (pa.array(b.astype(bool)) if ctx.build else None), end


class IntNode(Node):
    """int and long, with their logical types."""

    def __init__(self, long: bool, logical: str | None) -> None:
        self.long, self.logical = long, logical
        if logical == "date":
            self.type = pa.date32()
        elif logical in ("timestamp-millis", "timestamp-micros", "local-timestamp-millis", "local-timestamp-micros"):
            self.type = TIMESTAMP
        else:
            self.type = pa.int64() if long else pa.int32()

    def read(self, ctx, rows, pos):
        what = "a long" if self.long else "an int"
        values, end = read_varint(ctx, rows, pos, what)
        if not self.long:
            bad = (values < -(2**31)) | (values >= 2**31)
            if bad.any():
                ctx.fail(rows, bad, "an int outside 32 bits")
        if not ctx.build:
            return None, end
        if self.type == TIMESTAMP:
            if self.logical.endswith("millis"):
                bad = np.abs(values) > 9_223_372_036_854_775  # the microseconds would overflow 64 bits
                if bad.any():
                    ctx.fail(rows, bad, "a timestamp-millis beyond the representable range")
                values = values * 1000
            return pa.array(values, pa.int64()).view(TIMESTAMP), end
        if self.type == pa.date32():
            return pa.array(values.astype(np.int32)).view(pa.date32()), end
        return pa.array(values.astype(np.int64 if self.long else np.int32)), end


class FloatNode(Node):
    def __init__(self, double: bool) -> None:
        self.size = 8 if double else 4
        self.min_bytes = self.size
        self.type = pa.float64() if double else pa.float32()
        self.dtype = np.dtype("<f8") if double else np.dtype("<f4")

    def read(self, ctx, rows, pos):
        end = pos + self.size
        ctx.check_end(rows, end, "a double" if self.size == 8 else "a float")
        if not ctx.build:
            return None, end
        return pa.array(_strided(ctx.buf, self.size)[pos].view(self.dtype).reshape(-1)), end


def _gather_bytes(ctx: DecodeContext, starts: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(int32 offsets, the bytes) of the byte strings at ``starts`` of ``lengths``, concatenated."""
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    total = int(offsets[-1])
    if total >= 2**31:
        raise RecordDecodeError(0, "a batch's strings exceed 2 GiB")
    idx = np.repeat(starts - offsets[:-1], lengths) + np.arange(total, dtype=np.int64)
    return offsets.astype(np.int32), ctx.buf[idx]


class BytesNode(Node):
    """bytes and string (with logical types decimal and uuid)."""

    def __init__(self, string: bool, logical: str | None = None, precision: int = 0, scale: int = 0) -> None:
        self.string, self.logical, self.precision, self.scale = string, logical, precision, scale
        if logical == "decimal":
            self.type = pa.decimal128(precision, scale) if precision <= 38 else pa.binary()
        else:
            self.type = pa.string() if string else pa.binary()

    def read(self, ctx, rows, pos):
        what = "a string" if self.string else "bytes"
        lengths, start = read_varint(ctx, rows, pos, f"the length of {what}")
        if (lengths < 0).any():
            ctx.fail(rows, lengths < 0, f"a negative length of {what}")
        end = start + lengths
        ctx.check_end(rows, end, what)
        if not ctx.build and not self.string and self.logical != "decimal":
            return None, end
        offsets, data = _gather_bytes(ctx, start, lengths)
        binary = pa.Array.from_buffers(pa.binary(), len(rows), [None, pa.py_buffer(offsets), pa.py_buffer(data)])
        if self.logical == "decimal" and self.precision <= 38:
            return decimal_from_twos_complement(ctx, rows, binary, lengths, self.precision, self.scale), end
        if not self.string:
            return (binary if ctx.build else None), end
        text = check_utf8(ctx, rows, binary)
        if self.logical == "uuid":
            ok = pc.match_substring_regex(text, UUID_PATTERN)
            if not pc.all(ok).as_py():
                ctx.fail(rows, ~np.asarray(ok.to_numpy(zero_copy_only=False)), "a uuid that is not one")
        return (text if ctx.build else None), end


def check_utf8(ctx: DecodeContext, rows: np.ndarray, binary: pa.Array) -> pa.Array:
    """``binary`` as a string array; a record with invalid UTF-8 fails."""
    try:
        return binary.cast(pa.string())
    except pa.ArrowInvalid:
        for i, v in enumerate(binary.to_pylist()):
            try:
                v.decode("utf-8")
            except UnicodeDecodeError:
                raise RecordDecodeError(int(rows[i]), "a string that is not UTF-8") from None
        raise


def decimal_from_twos_complement(ctx: DecodeContext, rows: np.ndarray, binary: pa.Array, lengths: np.ndarray,
                                 precision: int, scale: int) -> pa.Array:
    """Avro's decimals (big-endian two's complement, up to 16 bytes) as decimal128(precision, scale)."""
    if (lengths > 16).any():
        ctx.fail(rows, lengths > 16, "a decimal of more than 16 bytes")
    k = len(rows)
    offsets = binary.buffers()[1]
    offs = np.frombuffer(offsets, dtype=np.int32)[:k + 1]
    data = np.frombuffer(binary.buffers()[2], dtype=np.uint8) if binary.buffers()[2] is not None else np.zeros(0, np.uint8)
    out = np.zeros((k, 16), dtype=np.uint8)
    if len(data):
        first = data[np.minimum(offs[:-1], len(data) - 1)]
        negative = (lengths > 0) & (first >= 0x80)
        out[negative] = 0xFF
        col = 16 - lengths  # right-aligned big-endian
        r = np.repeat(np.arange(k), lengths)
        c = np.repeat(col, lengths) + (np.arange(int(offs[-1])) - np.repeat(offs[:-1], lengths))
        out[r, c] = data[:int(offs[-1])]
    little = np.ascontiguousarray(out[:, ::-1])
    wide = pa.Array.from_buffers(pa.decimal128(38, scale), k, [None, pa.py_buffer(little.tobytes())])
    try:
        return wide.cast(pa.decimal128(precision, scale))
    except pa.ArrowInvalid:
        limit = 10 ** precision
        for i, v in enumerate(wide.to_pylist()):
            if abs(v.scaleb(scale)) >= limit:
                raise RecordDecodeError(int(rows[i]), f"a decimal wider than its precision {precision}") from None
        raise


class FixedNode(Node):
    def __init__(self, size: int, logical: str | None = None, precision: int = 0, scale: int = 0) -> None:
        self.size, self.logical, self.precision, self.scale = size, logical, precision, scale
        self.min_bytes = size
        decimal = logical == "decimal" and precision <= 38 and size <= 16
        self.type = pa.decimal128(precision, scale) if decimal else pa.binary()

    def read(self, ctx, rows, pos):
        end = pos + self.size
        ctx.check_end(rows, end, f"a fixed of {self.size} bytes")
        if not ctx.build:
            return None, end
        lengths = np.full(len(rows), self.size, dtype=np.int64)
        offsets, data = _gather_bytes(ctx, pos, lengths)
        binary = pa.Array.from_buffers(pa.binary(), len(rows), [None, pa.py_buffer(offsets), pa.py_buffer(data)])
        if pa.types.is_decimal(self.type):
            return decimal_from_twos_complement(ctx, rows, binary, lengths, self.precision, self.scale), end
        return binary, end


class EnumNode(Node):
    type = pa.string()

    def __init__(self, symbols: list[str]) -> None:
        self.symbols = pa.array(symbols, pa.string())

    def read(self, ctx, rows, pos):
        index, end = read_varint(ctx, rows, pos, "an enum index")
        bad = (index < 0) | (index >= len(self.symbols))
        if bad.any():
            ctx.fail(rows, bad, f"an enum index outside its {len(self.symbols)} symbols")
        return (self.symbols.take(pa.array(index)) if ctx.build else None), end


class RecordNode(Node):
    def __init__(self, name: str) -> None:
        self.name = name
        self.fields: list[tuple[str, Node]] = []
        self.min_bytes = 0

    def finish(self) -> None:
        self.min_bytes = sum(n.min_bytes for _, n in self.fields) if self.fields else 0
        if self.fields and all(n.type is not None for _, n in self.fields):  # (Parquet holds no empty struct)
            self.type = pa.struct([pa.field(name, n.type) for name, n in self.fields])

    def leaves(self, memo: dict) -> int:
        if id(self) in memo:
            got = memo[id(self)]
            if got is None:
                raise Untypeable(f"record {self.name} contains itself")
            return got
        memo[id(self)] = None
        total = sum(n.leaves(memo) for _, n in self.fields) or 1
        memo[id(self)] = total
        return total

    def read(self, ctx, rows, pos):
        ctx.depth += 1
        if ctx.depth > MAX_NESTING:
            ctx.fail(rows, np.ones(len(rows), bool), f"records nested deeper than {MAX_NESTING}")
        children = []
        for _, node in self.fields:
            arr, pos = node.read(ctx, rows, pos)
            children.append(arr)
        ctx.depth -= 1
        if not ctx.build:
            return None, pos
        return pa.StructArray.from_arrays(children, fields=list(self.type)), pos


def _read_blocks(ctx: DecodeContext, rows: np.ndarray, pos: np.ndarray, min_bytes: int, what: str,
                 read_item: Callable[[np.ndarray, np.ndarray], tuple[list, np.ndarray]]):
    """Avro's blocked encoding of arrays and maps: (per-row item counts, the items' arrays in row order, the
    positions after the final zero block)."""
    k = len(rows)
    counts = np.zeros(k, dtype=np.int64)
    pos = pos.copy()
    pieces: list[tuple[np.ndarray, np.ndarray, list]] = []  # (row positions, sequence numbers, item arrays)
    active = np.arange(k)
    empty_items = np.zeros(k, dtype=np.int64)
    while len(active):
        sub_rows = rows[active]
        n, p = read_varint(ctx, sub_rows, pos[active], f"the item count of {what}")
        negative = n < 0
        if negative.any():  # a negative count is followed by the block's size in bytes
            size, p2 = read_varint(ctx, sub_rows[negative], p[negative], f"the block size of {what}")
            if (size < 0).any():
                ctx.fail(sub_rows[negative], size < 0, f"a negative block size of {what}")
            n = np.abs(n)
            p[negative] = p2
        pos[active] = p
        more = n > 0
        active, n = active[more], n[more]
        if not len(active):
            break
        if min_bytes > 0:
            room = (ctx.ends[rows[active]] - pos[active]) // min_bytes
            if (n > room).any():
                ctx.fail(rows[active], n > room, f"{what} declares more items than its bytes can hold")
        else:
            empty_items[active] += n
            if (empty_items > MAX_EMPTY_ITEMS).any():
                ctx.fail(rows, empty_items > MAX_EMPTY_ITEMS, f"{what} holds more than {MAX_EMPTY_ITEMS} "
                                                              f"items that take no bytes")
        for j in range(int(n.max())):
            taking = active[n > j]
            arrays, pos[taking] = read_item(rows[taking], pos[taking])
            pieces.append((taking, counts[taking].copy(), arrays))
            counts[taking] += 1
    return counts, pieces, pos


def _order(pieces, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(the take order putting the pieces' items in row order, list offsets)."""
    row = np.concatenate([t for t, _, _ in pieces]) if pieces else np.zeros(0, np.int64)
    seq = np.concatenate([s for _, s, _ in pieces]) if pieces else np.zeros(0, np.int64)
    order = np.lexsort((seq, row))
    counts = np.bincount(row, minlength=k)
    offsets = np.zeros(k + 1, dtype=np.int32)
    np.cumsum(counts, out=offsets[1:])
    return order, offsets


class ArrayNode(Node):
    def __init__(self, items: Node) -> None:
        self.items = items
        self.type = pa.list_(items.type) if items.type is not None else None

    def leaves(self, memo):
        return self.items.leaves(memo)

    def read(self, ctx, rows, pos):
        def item(r, p):
            arr, p = self.items.read(ctx, r, p)
            return [arr], p

        counts, pieces, end = _read_blocks(ctx, rows, pos, self.items.min_bytes, "an array", item)
        if not ctx.build:
            return None, end
        order, offsets = _order(pieces, len(rows))
        values = (pa.concat_arrays([a[0] for _, _, a in pieces]).take(pa.array(order)) if pieces
                  else pa.array([], self.items.type))
        return pa.ListArray.from_arrays(pa.array(offsets), values, type=self.type), end


class MapNode(Node):
    def __init__(self, values: Node) -> None:
        self.keys = BytesNode(string=True)
        self.values = values
        self.type = pa.map_(pa.string(), values.type) if values.type is not None else None

    def leaves(self, memo):
        return 1 + self.values.leaves(memo)

    def read(self, ctx, rows, pos):
        def item(r, p):
            key, p = self.keys.read(ctx, r, p)
            value, p = self.values.read(ctx, r, p)
            return [key, value], p

        counts, pieces, end = _read_blocks(ctx, rows, pos, 1 + self.values.min_bytes, "a map", item)
        if not ctx.build:
            return None, end
        order, offsets = _order(pieces, len(rows))
        take = pa.array(order)
        keys = pa.concat_arrays([a[0] for _, _, a in pieces]).take(take) if pieces else pa.array([], pa.string())
        values = (pa.concat_arrays([a[1] for _, _, a in pieces]).take(take) if pieces
                  else pa.array([], self.values.type))
        return pa.MapArray.from_arrays(pa.array(offsets), keys, values, type=self.type), end


class UnionNode(Node):
    def __init__(self, branches: list[Node], kinds: list[str]) -> None:
        self.branches = branches
        self.min_bytes = 1
        non_null = [(i, b) for i, b in enumerate(branches) if not isinstance(b, NullNode)]
        self.non_null = non_null
        self.merged: pa.DataType | None = None
        types = [b.type for _, b in non_null]
        if not non_null or any(t is None for t in types):
            self.type = None
        elif len(non_null) == 1:
            self.type = types[0]
        elif set(kinds) - {"null"} <= {"int", "long"}:
            self.type = self.merged = pa.int64()
        elif set(kinds) - {"null"} <= {"float", "double"}:
            self.type = self.merged = pa.float64()
        else:
            self.type = pa.struct([pa.field(f"member{m}", t) for m, t in enumerate(types)])

    def leaves(self, memo):
        return sum(b.leaves(memo) for _, b in self.non_null) or 1

    def read(self, ctx, rows, pos):
        index, pos = read_varint(ctx, rows, pos, "a union branch")
        bad = (index < 0) | (index >= len(self.branches))
        if bad.any():
            ctx.fail(rows, bad, f"a union branch outside its {len(self.branches)} branches")
        end = pos.copy()
        parts: list[tuple[np.ndarray, pa.Array | None]] = []
        for i, branch in enumerate(self.branches):
            where = np.flatnonzero(index == i)
            if not len(where):
                if not isinstance(branch, NullNode):
                    parts.append((where, None))
                continue
            arr, end[where] = branch.read(ctx, rows[where], pos[where])
            if not isinstance(branch, NullNode):
                parts.append((where, arr))
        if not ctx.build:
            return None, end
        k = len(rows)
        if not pa.types.is_struct(self.type) or len(self.non_null) == 1:
            present = [(w, a) for w, a in parts if a is not None]
            return scatter(present, k, self.type), end
        members = [scatter([(w, a)] if a is not None else [], k, f.type) for (w, a), f in zip(parts, self.type)]
        valid = index != next((i for i, b in enumerate(self.branches) if isinstance(b, NullNode)), -1)
        return pa.StructArray.from_arrays(members, fields=list(self.type),
                                          mask=pa.array(~valid) if not valid.all() else None), end
