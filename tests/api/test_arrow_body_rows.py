"""An Arrow produce body's decoded size counts what normalisation builds for arrays that have no buffers
(api/arrow_body.py): the record columns of every row (a body of no columns, or of a null-typed ``headers``
column, is turned into null key, value, headers and timestamp columns: 20.5 bytes a row) and every element of a
null-typed array nested in ``headers`` (cast to header keys and values). Before, a 144-byte body declaring 200,000
rows counted 0 bytes: it was accepted up to one row per byte of the limit (20 times the limit once normalised),
parsed on the event loop, and written; a 600-byte body with a ``headers`` column of millions of null-typed items
was normalised to hundreds of MB before being refused.

Against the real shared fronts (local and moto S3 roots; LAKELOG_MAX_REQUEST_BYTES of 1 MiB) and against
:func:`api.arrow_body.read_arrow_body` on real Arrow IPC bytes, with the row limit's neighbour: a legitimate body
of many small rows under the limit still goes in.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from api.arrow_body import NORMALIZED_ROW_BITS, DecodesLarge, read_arrow_body
from api.produce_lane import ARROW_STREAM, INLINE_PARSE_BYTES
from front_process import MAX_REQUEST_BYTES
from hostile_support import arrow_bytes, refused_untouched
from lakelog.errors import MessageTooLarge
from lakelog.writer.records import normalize_records

ARROW = {"content-type": "application/vnd.apache.arrow.stream"}
INLINE = INLINE_PARSE_BYTES[ARROW_STREAM]  # what the front parses on its event loop


@pytest.fixture
def storage(front_root):
    root, _, options = front_root
    return root, options


def no_columns(rows: int) -> bytes:
    """A batch of ``rows`` rows and no columns: no buffers at all (144 bytes whatever ``rows``)."""
    return arrow_bytes(pa.table({"x": pa.nulls(rows)}).drop_columns(["x"]))


def null_headers(rows: int) -> bytes:
    """A ``headers`` column of type null: no buffers; cast to null header lists."""
    return arrow_bytes(pa.table({"headers": pa.nulls(rows)}))


def null_typed_header_items(items: int) -> bytes:
    """One record whose ``headers`` list holds ``items`` header structs of null-typed key and value: no buffers
    for the items, each cast to a string key and a binary value."""
    child = pa.StructArray.from_arrays([pa.nulls(items), pa.nulls(items)], names=["key", "value"])
    headers = pa.ListArray.from_arrays(pa.array([0, items], pa.int32()), child)
    return arrow_bytes(pa.table({"value": pa.array([b"v"]), "headers": headers}))


def high_watermarks(http, topic: str) -> dict[int, int]:
    return {p["partition"]: p["high_watermark"] for p in http.get(f"/v1/topics/{topic}").json()["partitions"]}


HOSTILE = {
    "no columns, 200k rows": no_columns(200_000),
    "no columns, 1M rows": no_columns(1_000_000),  # one row per byte of the limit: the old bound let it in
    "null headers column, 200k rows": null_headers(200_000),
    "5M null-typed header items": null_typed_header_items(5_000_000),
}


@pytest.mark.parametrize("body", HOSTILE.values(), ids=HOSTILE.keys())
def test_a_body_of_buffer_free_arrays_is_charged_what_it_normalises_to(body):
    """Accepted only if what normalisation builds of it fits the limit; refused before any buffer is read."""
    assert len(body) < 1024
    with pytest.raises(MessageTooLarge) as e:
        read_arrow_body(body, max_decoded_bytes=MAX_REQUEST_BYTES)
    assert e.value.code == 10 and "before decompression" in e.value.message


def test_what_an_accepted_body_normalises_to_fits_the_limit():
    """The charge is what normalize_records builds, to the few bytes of rounding its buffers add per batch: a
    body of no columns is accepted exactly while its normalised columns fit."""
    limit = 1 << 20
    for rows in (1, 1000, 40_000, limit * 8 // NORMALIZED_ROW_BITS, limit * 8 // NORMALIZED_ROW_BITS + 1, 400_000):
        body, normalised = no_columns(rows), -(-rows * NORMALIZED_ROW_BITS // 8)
        if normalised > limit:
            with pytest.raises(MessageTooLarge):
                read_arrow_body(body, max_decoded_bytes=limit)
            continue
        built = normalize_records(read_arrow_body(body, max_decoded_bytes=limit)).nbytes
        assert built <= limit and abs(built - normalised) <= 16, (rows, built, normalised)


def test_a_body_that_normalises_large_is_not_parsed_on_the_event_loop():
    """The inline threshold counts the same: 300,000 rows of no columns (6 MB normalised, 144 bytes sent) go
    to a thread; a few thousand do not."""
    with pytest.raises(DecodesLarge):
        read_arrow_body(no_columns(300_000), max_decoded_bytes=64 << 20, max_inline_bytes=INLINE)
    with pytest.raises(DecodesLarge):
        read_arrow_body(null_typed_header_items(300_000), max_decoded_bytes=64 << 20, max_inline_bytes=INLINE)
    assert read_arrow_body(no_columns(5000), max_decoded_bytes=64 << 20, max_inline_bytes=INLINE).num_rows == 5000


def test_rows_without_buffers_are_refused_by_a_front_and_small_rows_still_go_in(front, http, storage, topic):
    for what, body in HOSTILE.items():
        error = refused_untouched(storage, http, topic, lambda: http.post(
            f"/v1/topics/{topic}/records", content=body, headers=ARROW, params={"partition": 0}),
            413, "MESSAGE_TOO_LARGE")
        assert error["error_code"] == 10, (what, error)
    assert high_watermarks(http, topic) == {0: 0, 1: 0}
    # a legitimate body of many small rows under the limit: 30,000 values of 4 bytes (about 250 KB sent, 855 KB
    # counted with the normalised record columns) goes in whole
    rows = 30_000
    small = arrow_bytes(pa.table({"value": pa.array([b"%04d" % (i % 10_000) for i in range(rows)])}))
    assert len(small) + rows * NORMALIZED_ROW_BITS // 8 < MAX_REQUEST_BYTES
    r = http.post(f"/v1/topics/{topic}/records", content=small, headers=ARROW, params={"partition": 0})
    assert r.status_code == 200, r.text
    assert high_watermarks(http, topic) == {0: rows, 1: 0}
    # and a few null-typed header items (an all-None field, as pyarrow infers it) are still fine
    few = pa.table({"value": pa.array([b"v"]),
                    "headers": pa.array([[{"key": "k", "value": None}]],
                                        pa.list_(pa.struct([("key", pa.string()), ("value", pa.null())])))})
    r = http.post(f"/v1/topics/{topic}/records", content=arrow_bytes(few), headers=ARROW, params={"partition": 1})
    assert r.status_code == 200, r.text
    assert high_watermarks(http, topic) == {0: rows, 1: 1}
