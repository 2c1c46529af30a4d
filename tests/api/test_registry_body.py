"""The Schema Registry routes' body reader (``api.routers.schema_registry._body``): a body parsed on the event
loop and one parsed in the thread pool (above ``INLINE_PARSE_BYTES``) get the same answers."""

from __future__ import annotations

import asyncio
import json

import pytest

from api.routers import schema_registry
from lakelog.schema.schema_errors import UnprocessableEntity


class _Request:
    """What ``_body`` reads of a request: its body as a stream of chunks."""

    def __init__(self, body: bytes, chunk: int = 4096) -> None:
        self.chunks = [body[i:i + chunk] for i in range(0, len(body), chunk)]

    async def stream(self):
        for c in self.chunks:
            yield c


def _read(body: bytes) -> dict:
    return asyncio.run(schema_registry._body(_Request(body)))


def _padded(prefix: str, size: int) -> str:
    """``prefix`` followed by spaces (insignificant in JSON) to ``size`` characters."""
    return prefix + " " * (size - len(prefix))


@pytest.mark.parametrize("size", [100, schema_registry.INLINE_PARSE_BYTES + 1])
def test_inline_and_thread_pool_parses_answer_alike(size, monkeypatch):
    pooled = []

    async def run_in_threadpool(fn, *args):
        pooled.append(fn)
        return await asyncio.to_thread(fn, *args)

    monkeypatch.setattr(schema_registry, "run_in_threadpool", run_in_threadpool)
    text = json.dumps({"schema": "x" * (size // 2)})
    assert _read(_padded(text, size).encode()) == {"schema": "x" * (size // 2)}
    for body, message in [(_padded("[1, 2]", size).encode(), "must be a JSON object"),
                          (b"\xff" + b" " * size, "not a JSON object"),
                          (_padded("{\"a\": " + "[" * 100 + "]" * 100 + "}", size).encode(), "not a JSON object"),
                          (_padded("{\"a\": ", size).encode(), "not a JSON object"),
                          (b" " * size, "must be a JSON object")]:
        with pytest.raises(UnprocessableEntity, match=message):
            _read(body)
    assert len(pooled) == (0 if size <= schema_registry.INLINE_PARSE_BYTES else 6)


def test_a_body_over_the_limit_is_refused_while_read():
    with pytest.raises(UnprocessableEntity, match="larger than"):
        _read(b" " * (schema_registry.MAX_BODY_BYTES + 1))
