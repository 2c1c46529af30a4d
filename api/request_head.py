"""The request head (request line and headers) is bounded: a head over :data:`MAX_HEAD_BYTES` is answered
431 Request Header Fields Too Large and the connection is closed, before anything of it reaches the app and
without holding more than about that many bytes of it.

uvicorn bounds a head only with its pure-Python h11 parser (``h11_max_incomplete_event_size``); with
httptools, which it prefers, a client may send headers of any size.  :class:`BoundedHttpToolsProtocol` is
uvicorn's httptools protocol with the bound: it counts the head as the parser reports it, and the bytes of a
head that has not ended yet (a header that never ends), and refuses either past the limit.
:func:`uvicorn_options` gives ``uvicorn.run`` the one or, without httptools, h11 with the same limit.
"""

from __future__ import annotations

from typing import Any

MAX_HEAD_BYTES = 16 << 10  # uvicorn's h11 default; Jetty (Confluent's proxy) and nginx refuse above 8 KiB
# After the 431 the front stops sending and reads on for a while, discarding, so the client's unsent head
# does not turn the close into a reset that destroys the answer before the client reads it (a lingering close).
LINGER_S = 2.0
LINGER_BYTES = 1 << 20
_STATUS = b"HTTP/1.1 431 Request Header Fields Too Large\r\n"


class HeadTooLarge(Exception):
    """Raised in a parser callback to stop parsing a head over the limit."""


def uvicorn_options() -> dict[str, Any]:
    """``uvicorn.run`` keyword arguments bounding request heads to :data:`MAX_HEAD_BYTES`."""
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    except ImportError:  # no httptools: uvicorn's h11 parser bounds the head itself
        return {"http": "h11", "h11_max_incomplete_event_size": MAX_HEAD_BYTES}

    class BoundedHttpToolsProtocol(HttpToolsProtocol):
        """uvicorn's httptools protocol, refusing a request head over :data:`MAX_HEAD_BYTES` with 431."""

        _in_head = True  # between the end of a message and the end of the next head
        _unparsed = 0  # bytes received since the current head began, while it has not ended
        _head = 0  # bytes of the current head the parser has reported
        _too_large = False
        _discarded: int | None = None  # after a refusal: bytes read and dropped since

        def data_received(self, data: bytes) -> None:
            if self._discarded is not None:
                self._discarded += len(data)
                if self._discarded > LINGER_BYTES:
                    self.transport.close()
                return
            if self._in_head:
                self._unparsed += len(data)
            super().data_received(data)
            if self._in_head and self._unparsed > MAX_HEAD_BYTES and not self._too_large:
                self._refuse()

        def on_message_begin(self) -> None:
            self._head = 0
            super().on_message_begin()

        def on_url(self, url: bytes) -> None:
            self._count(len(url))
            super().on_url(url)

        def on_header(self, name: bytes, value: bytes) -> None:
            self._count(len(name) + len(value) + 4)
            super().on_header(name, value)

        def on_headers_complete(self) -> None:
            self._in_head, self._unparsed = False, 0
            super().on_headers_complete()

        def on_message_complete(self) -> None:
            super().on_message_complete()
            self._in_head, self._unparsed = True, 0

        def _count(self, n: int) -> None:
            self._head += n
            if self._head > MAX_HEAD_BYTES:
                self._too_large = True
                raise HeadTooLarge  # the parser stops; data_received answers through send_400_response

        def send_400_response(self, msg: str) -> None:
            if self._too_large:
                self._refuse()
            else:
                super().send_400_response(msg)

        def _refuse(self) -> None:
            self._too_large = True
            body = f"the request head is larger than {MAX_HEAD_BYTES} bytes".encode()
            self.transport.write(_STATUS + b"content-type: text/plain; charset=utf-8\r\nx-content-type-options: "
                                 b"nosniff\r\nconnection: close\r\ncontent-length: %d\r\n\r\n" % len(body) + body)
            if not self.transport.can_write_eof():
                self.transport.close()
                return
            self.transport.write_eof()
            self._discarded = 0
            self.loop.call_later(LINGER_S, self.transport.close)

    return {"http": BoundedHttpToolsProtocol}
