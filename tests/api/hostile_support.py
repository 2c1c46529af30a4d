"""Helpers of the hostile-input tests: crafted bodies, the storage's exact bytes, a front's memory.

Every hostile case asserts the same four things (:func:`refused_untouched`): the answer's status and Kafka
error, an error body without traces or paths, the front still answering, and the topic's files and Delta log
byte-identical before and after.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import time
import uuid
from pathlib import Path

import httpx
import pyarrow as pa

FUZZ_SECONDS_ENV = "LAKELOG_FUZZ_SECONDS"  # a longer fuzz run: LAKELOG_FUZZ_SECONDS=600 make test PYTEST_ARGS=-k fuzz
FUZZ_SECONDS = float(os.environ.get(FUZZ_SECONDS_ENV, "0"))


def fuzz_rounds(check) -> int:
    """Run hypothesis' ``check`` once, or again and again (fresh random examples) for FUZZ_SECONDS."""
    deadline, rounds = time.monotonic() + FUZZ_SECONDS, 0
    while True:
        check()
        rounds += 1
        if time.monotonic() >= deadline:
            return rounds


def arrow_bytes(table: pa.Table, *, compression: str | None = None) -> bytes:
    sink = io.BytesIO()
    options = pa.ipc.IpcWriteOptions(compression=compression) if compression else None
    with pa.ipc.new_stream(sink, table.schema, options=options) as w:
        w.write_table(table)
    return sink.getvalue()


def corrupt_offsets_body(second_offset: int, last_offset: int = 16) -> bytes:
    """Finding 1: two binary values over a 16-byte data buffer with offsets [0, N, 16], the second row null."""
    data = pa.py_buffer(b"x" * 16)
    offsets = pa.py_buffer(pa.array([0, second_offset, last_offset], pa.int32()).buffers()[1].to_pybytes())
    arr = pa.Array.from_buffers(pa.binary(), 2, [pa.py_buffer(bytes([0b01])), offsets, data], null_count=1)
    sink = io.BytesIO()
    with pa.ipc.new_stream(sink, pa.schema([("value", pa.binary())])) as w:
        w.write_batch(pa.record_batch([arr], names=["value"]))
    return sink.getvalue()


def bomb_body(decoded_mib: int, codec: str = "zstd") -> bytes:
    """Finding 2: one value of ``decoded_mib`` MiB of zeros, IPC-compressed to a few KB."""
    return arrow_bytes(pa.table({"value": pa.array([bytes(decoded_mib << 20)], pa.binary())}), compression=codec)


def storage_fingerprint(root: str, options: dict | None, topic: str) -> dict[str, str]:
    """Every file of the topic's table (segments, Delta log, Arrow index) with the SHA-256 of its bytes."""
    from pyarrow.fs import FileSelector, FileType

    from lakelog.storage.storage_root import StorageRoot

    r = StorageRoot.resolve(root, options or None)
    base = r.path_for("topics", topic)
    out = {}
    for info in r.filesystem.get_file_info(FileSelector(base, recursive=True, allow_not_found=True)):
        if info.type == FileType.File:
            with r.filesystem.open_input_stream(info.path) as f:
                out[info.path[len(base):]] = hashlib.sha256(f.read()).hexdigest()
    return out


def rss_bytes(pid: int) -> int:
    text = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmRSS:\s+(\d+) kB", text).group(1)) * 1024


def clean_error_body(body: dict) -> None:
    """A Kafka error body, naming no exception type, trace or file path."""
    assert set(body) >= {"error_code", "error_name", "message"}, body
    text = body["message"]
    assert "Traceback" not in text and 'File "' not in text, text
    assert not re.search(r"(/[\w.-]+){2,}\.py", text), text
    assert "/tmp/" not in text and "/work/" not in text and "site-packages" not in text, text
    for name in ("UnicodeDecodeError", "RecursionError", "OverflowError", "UnicodeEncodeError", "ValidationError"):
        assert name not in text, text


def new_topic_name() -> str:
    return f"hostile-{uuid.uuid4().hex[:10]}"


def refused_untouched(storage: tuple[str, dict | None], client: httpx.Client, topic: str, send, status: int,
                      name: str) -> dict:
    """Send a hostile request; assert it was refused as ``status``/``name``, the front answers and the topic's
    bytes did not change. ``storage`` is the front's (root, storage options). Returns the error body."""
    before = storage_fingerprint(*storage, topic)
    response = send()
    assert response.status_code == status, response.text
    body = response.json()
    assert body["error_name"] == name, body
    clean_error_body(body)
    assert client.get("/v1/health").status_code == 200
    assert storage_fingerprint(*storage, topic) == before, "a refused request changed the topic's files"
    return body
