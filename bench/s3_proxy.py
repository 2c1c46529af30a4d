"""An HTTP proxy in front of an S3 endpoint (the moto server): injected faults, and a latency model of S3.

Used by the storage-fault tests (faults) and by the benchmarks (latency profiles, request and byte counts).

It speaks just enough HTTP/1.1 to relay S3 traffic byte for byte: a request is
read whole (``Content-Length`` or raw chunked framing; ``Expect: 100-continue``
is answered by the proxy itself), matched against the armed faults, and then
either forwarded on a fresh upstream connection or failed:

- ``fail``: answer with an S3 XML error (500 / 503) without forwarding;
- ``drop``: close the client's connection without forwarding;
- ``lose_response``: forward (the store applies the request) and then close the
  client's connection without answering -- the ambiguous "did it commit?" case;
- ``stall``: hold the request for some seconds (or until the fault's ``release``
  event is set), then drop it or forward it late.

Each fault applies to the next ``times`` requests matching its predicate
``(method, target) -> bool`` (target = the URL-decoded path and query).  Every
request is recorded in :attr:`log` as ``(method, target, action)``.

With a :class:`LatencyProfile` every forwarded request first waits a latency drawn
for its operation (PUT, GET, LIST, HEAD, DELETE, POST) from a log-normal
distribution with the profile's p50 and p99 -- before forwarding, so a GET's
wait is its time to first byte. Requests wait in their own connection threads:
the proxy never serialises them. :attr:`stats` counts requests per operation and
the bytes moved each way, and keeps each request's service time (what
:mod:`bench.commit_floor` is fed). Thread-safe; one thread per client connection.
"""

from __future__ import annotations

import math
import random
import re
import socket
import socketserver
import threading
import time
from dataclasses import dataclass, field
from typing import Callable
from urllib.parse import unquote, urlparse

Predicate = Callable[[str, str], bool]
OPERATIONS = ("PUT", "GET", "LIST", "HEAD", "DELETE", "POST")
# Public S3 Standard request prices (us-east-1): per PUT, COPY, POST or LIST; per GET or HEAD.
PUT_PRICE, GET_PRICE = 0.005 / 1000, 0.0004 / 1000


@dataclass(frozen=True)
class LatencyProfile:
    """Per-operation latency in ms as ``(p50, p99)`` of a log-normal distribution, and a per-request
    transfer rate (``mb_per_s``, None for unlimited): a request's body and its response's body each take
    ``bytes / rate`` on top of the latency, as one S3 connection streams at a bounded rate."""

    name: str
    ms: dict[str, tuple[float, float]]
    mb_per_s: float | None = None

    def transfer_s(self, nbytes: int) -> float:
        return nbytes / (self.mb_per_s * 1e6) if self.mb_per_s else 0.0

    def draw_s(self, operation: str, rng: random.Random) -> float:
        p50, p99 = self.ms.get(operation, self.ms["GET"])
        sigma = math.log(p99 / p50) / 2.3263  # the standard normal's 99th percentile
        return rng.lognormvariate(math.log(p50), sigma) / 1000.0


#: S3 Standard as measured in public benchmarks of small objects (PUT p50 25 ms, p99 80 ms; GET first byte
#: p50 15 ms, p99 60 ms; LIST p50 30 ms; HEAD 10 ms) and about 80 MB/s per connection (AWS's guidance is
#: 85-90 MB/s per request on large instances); S3 Express One Zone (about 5 ms for everything).
PROFILES = {
    "s3-standard": LatencyProfile("s3-standard", {"PUT": (25, 80), "POST": (25, 80), "DELETE": (25, 80),
                                                  "GET": (15, 60), "LIST": (30, 100), "HEAD": (10, 30)},
                                  mb_per_s=80.0),
    "s3-express": LatencyProfile("s3-express", {op: (5, 10) for op in OPERATIONS}, mb_per_s=200.0),
}

#: The roots the S3 benchmarks compare: a local directory, then moto behind the proxy with no added latency and
#: with each profile's. A quick run (the smoke tests) takes the two ends only: the middle ones run the same code
#: as the last, with another latency.
ROOTS = ("local", "moto", "s3-express", "s3-standard")
QUICK_ROOTS = ("local", "s3-standard")


def bench_roots(quick: bool) -> tuple[str, ...]:
    """The roots a run compares: :data:`QUICK_ROOTS` in a quick run, else :data:`ROOTS`."""
    return QUICK_ROOTS if quick else ROOTS


def operation(method: str, target: str) -> str:
    """The S3 operation of a request: a GET with ``list-type`` or ``prefix`` in its query is a LIST."""
    if method == "GET" and ("list-type=" in target or "prefix=" in target or target.rstrip("/").count("/") <= 1):
        return "LIST"
    return method if method in OPERATIONS else "GET"


@dataclass
class RequestStats:
    """Requests per operation and bytes moved, since :meth:`S3FaultProxy.reset_stats`."""

    requests: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OPERATIONS, 0))
    bytes_in: int = 0  # request bodies (what was stored)
    bytes_out: int = 0  # response bodies (what was read)
    expect_continue: int = 0  # requests whose client waited for "100 Continue" before sending the body
    # Each forwarded request's service time in ms, from its last byte read to its response ready (the drawn
    # latency, the transfer time and the store's own time), by operation; PUTs of Delta commit files are kept
    # apart under "COMMIT" (and counted as PUTs in ``requests``)
    service_ms: dict[str, list[float]] = field(default_factory=lambda: {op: [] for op in (*OPERATIONS, "COMMIT")})

    @property
    def puts(self) -> int:
        """Requests that store an object (PUT, and the POSTs of multipart uploads)."""
        return self.requests["PUT"] + self.requests["POST"]

    def dollars(self) -> float:
        """The requests' cost at public S3 Standard prices (:data:`PUT_PRICE` for PUT, COPY, POST or LIST;
        :data:`GET_PRICE` for GET, HEAD; DELETE is free); storage and transfer not counted."""
        return ((self.puts + self.requests["LIST"]) * PUT_PRICE
                + (self.requests["GET"] + self.requests["HEAD"]) * GET_PRICE)

    def describe(self) -> str:
        """``PUT 159, GET 11, ...``: the operations made, by count."""
        return ", ".join(f"{op} {n}" for op, n in self.requests.items() if n)


COMMIT_FILE = re.compile(r"/_delta_log/\d{20}\.json(\?|$)")


def commit_put(method: str, path: str) -> bool:
    """The PUT of a Delta commit file ``_delta_log/<20-digit version>.json``."""
    return method == "PUT" and bool(COMMIT_FILE.search(path))


def delta_log_access(method: str, path: str) -> bool:
    """Any request touching a ``_delta_log/`` (commit PUTs, GETs, HEADs, LISTs with a ``_delta_log`` prefix)."""
    return "_delta_log" in path


@dataclass
class Fault:
    """One armed fault; tests read ``hits``, ``upstream_statuses`` and wait on ``done``."""

    predicate: Predicate
    action: str  # fail | drop | lose_response | stall
    times: int
    status: int = 500
    seconds: float = 0.0
    then: str = "drop"  # after a stall: drop | forward
    hits: list = field(default_factory=list)  # (method, target) of each matched request
    upstream_statuses: list = field(default_factory=list)  # the store's status for each forwarded one
    done: threading.Event = field(default_factory=threading.Event)  # set when the last match is handled
    release: threading.Event = field(default_factory=threading.Event)  # ends a stall before ``seconds``


class _Closed(Exception):
    pass


def _read_until(sock: socket.socket, buf: bytearray, marker: bytes) -> bytes:
    while True:
        i = buf.find(marker)
        if i >= 0:
            out = bytes(buf[: i + len(marker)])
            del buf[: i + len(marker)]
            return out
        chunk = sock.recv(65536)
        if not chunk:
            raise _Closed()
        buf += chunk


def _read_exact(sock: socket.socket, buf: bytearray, n: int) -> bytes:
    while len(buf) < n:
        chunk = sock.recv(65536)
        if not chunk:
            raise _Closed()
        buf += chunk
    out = bytes(buf[:n])
    del buf[:n]
    return out


def _parse_head(head: bytes) -> tuple[str, list[tuple[str, str]]]:
    lines = head.decode("latin-1").split("\r\n")
    headers = []
    for line in lines[1:]:
        if line:
            k, _, v = line.partition(":")
            headers.append((k.strip(), v.strip()))
    return lines[0], headers


def _header(headers: list[tuple[str, str]], name: str) -> str | None:
    for k, v in headers:
        if k.lower() == name:
            return v
    return None


def _build_head(first: str, headers: list[tuple[str, str]]) -> bytes:
    return ("\r\n".join([first] + [f"{k}: {v}" for k, v in headers]) + "\r\n\r\n").encode("latin-1")


def _read_chunked_raw(sock: socket.socket, buf: bytearray) -> bytes:
    """The raw bytes of a chunked body, trailers included (relayed unchanged)."""
    out = bytearray()
    while True:
        size_line = _read_until(sock, buf, b"\r\n")
        out += size_line
        size = int(size_line.split(b";")[0].strip(), 16)
        if size == 0:
            while True:
                trailer = _read_until(sock, buf, b"\r\n")
                out += trailer
                if trailer == b"\r\n":
                    return bytes(out)
        out += _read_exact(sock, buf, size + 2)


class S3FaultProxy:
    """A proxy on ``127.0.0.1:<random port>`` in front of ``upstream`` (``http://host:port``)."""

    def __init__(self, upstream: str, latency: LatencyProfile | None = None, seed: int = 0) -> None:
        parsed = urlparse(upstream)
        self._upstream = (parsed.hostname, parsed.port or 80)
        self.latency = latency
        self._rng = random.Random(seed)
        self.stats = RequestStats()
        self._lock = threading.Lock()
        self._faults: list[Fault] = []
        self.log: list[tuple[str, str, str]] = []
        proxy = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                proxy._serve(self.request)

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True
            request_queue_size = 256  # the default backlog (5) drops bursts of connections: a 1 s SYN retry each

        self._server = Server(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, name="s3-fault-proxy", daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> "S3FaultProxy":
        self._thread.start()
        return self

    def stop(self) -> None:
        with self._lock:
            for f in self._faults:
                f.release.set()  # no handler thread stays parked in a stall
        self._server.shutdown()
        self._server.server_close()

    # -- arming faults -------------------------------------------------------------------
    def _arm(self, fault: Fault) -> Fault:
        with self._lock:
            self._faults.append(fault)
        return fault

    def fail(self, predicate: Predicate, *, times: int = 1, status: int = 500) -> Fault:
        return self._arm(Fault(predicate, "fail", times, status=status))

    def drop(self, predicate: Predicate, *, times: int = 1) -> Fault:
        return self._arm(Fault(predicate, "drop", times))

    def lose_response(self, predicate: Predicate, *, times: int = 1) -> Fault:
        return self._arm(Fault(predicate, "lose_response", times))

    def stall(self, predicate: Predicate, seconds: float, *, times: int = 1, then: str = "drop") -> Fault:
        return self._arm(Fault(predicate, "stall", times, seconds=seconds, then=then))

    def reset_stats(self) -> RequestStats:
        """The counts so far; counting starts again from zero."""
        with self._lock:
            stats, self.stats = self.stats, RequestStats()
        return stats

    def clear(self) -> None:
        with self._lock:
            self._faults.clear()

    def _match(self, method: str, path: str) -> Fault | None:
        with self._lock:
            for f in self._faults:
                if f.times > 0 and f.predicate(method, path):
                    f.times -= 1
                    f.hits.append((method, path))
                    return f
        return None

    def _finished(self, fault: Fault) -> None:
        with self._lock:
            if fault.times == 0:
                fault.done.set()

    # -- serving -------------------------------------------------------------------------
    def _serve(self, client: socket.socket) -> None:
        buf = bytearray()
        try:
            while True:
                head = _read_until(client, buf, b"\r\n\r\n")
                first, headers = _parse_head(head)
                method, target = first.split(" ")[:2]
                path = unquote(target)  # path and query: a LIST names its prefix in the query
                if (_header(headers, "expect") or "").lower() == "100-continue":
                    with self._lock:
                        self.stats.expect_continue += 1
                    client.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
                    headers = [(k, v) for k, v in headers if k.lower() != "expect"]
                if (_header(headers, "transfer-encoding") or "").lower().endswith("chunked"):
                    body = _read_chunked_raw(client, buf)
                else:
                    body = _read_exact(client, buf, int(_header(headers, "content-length") or 0))
                close_after = (_header(headers, "connection") or "").lower() == "close"
                fault = self._match(method, path)
                action = fault.action if fault else "forward"
                with self._lock:
                    self.log.append((method, path, action))
                if fault is not None and fault.action == "stall":
                    fault.release.wait(fault.seconds)
                    action = fault.then
                if action in ("fail", "drop"):
                    self._finished(fault)
                if action == "fail":
                    code = fault.status
                    reason = {500: "Internal Server Error", 503: "Slow Down"}.get(code, "Error")
                    xml = (f"<?xml version='1.0' encoding='UTF-8'?><Error><Code>{'SlowDown' if code == 503 else 'InternalError'}"
                           f"</Code><Message>injected fault</Message></Error>").encode()
                    client.sendall(_build_head(f"HTTP/1.1 {code} {reason}",
                                               [("Content-Type", "application/xml"), ("Content-Length", str(len(xml)))])
                                   + xml)
                    continue
                if action == "drop":
                    return
                op = operation(method, path)
                received = time.perf_counter()
                if self.latency is not None:
                    with self._lock:
                        wait = self.latency.draw_s(op, self._rng)
                    time.sleep(wait + self.latency.transfer_s(len(body)))
                response = self._forward(first, headers, body, method)
                if self.latency is not None and self.latency.mb_per_s:
                    time.sleep(self.latency.transfer_s(len(response)))
                service_ms = 1000 * (time.perf_counter() - received)
                with self._lock:
                    self.stats.requests[op] += 1
                    self.stats.service_ms["COMMIT" if commit_put(method, path) else op].append(service_ms)
                    self.stats.bytes_in += len(body)
                    self.stats.bytes_out += max(0, len(response) - response.find(b"\r\n\r\n") - 4)
                if fault is not None:
                    fault.upstream_statuses.append(int(response.split(b" ", 2)[1]))
                    self._finished(fault)
                if action == "lose_response":
                    return
                client.sendall(response)
                if close_after:
                    return
        except (_Closed, OSError):
            return
        finally:
            try:
                client.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            client.close()

    def _forward(self, first: str, headers: list[tuple[str, str]], body: bytes, method: str) -> bytes:
        """Send the request upstream on a fresh connection; the whole response, re-framed for keep-alive."""
        headers = [(k, v) for k, v in headers if k.lower() not in ("connection", "keep-alive")]
        headers.append(("Connection", "close"))
        with socket.create_connection(self._upstream, timeout=60) as up:
            up.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            up.sendall(_build_head(first, headers) + body)
            raw = bytearray()
            # Read by Content-Length where there is one: waiting for the server to close its end costs
            # milliseconds per request (the server lingers), more than a 1 MB body takes to arrive.
            expected = None
            while expected is None or len(raw) < expected:
                chunk = up.recv(1 << 20)
                if not chunk:
                    break
                raw += chunk
                if expected is None and (i := raw.find(b"\r\n\r\n")) >= 0:
                    status_line, rheaders = _parse_head(bytes(raw[:i + 4]))
                    cl = _header(rheaders, "content-length")
                    code = status_line.split(" ")[1]
                    if cl is not None and not code.startswith("1"):
                        expected = i + 4 + (0 if method == "HEAD" or code in ("204", "304") else int(cl))
        while True:  # skip interim 1xx responses
            i = raw.find(b"\r\n\r\n")
            status_line, rheaders = _parse_head(bytes(raw[:i + 4]))
            rbody = bytes(raw[i + 4:])
            if status_line.split(" ")[1].startswith("1"):
                raw = bytearray(rbody)
                continue
            break
        status = int(status_line.split(" ")[1])
        rheaders = [(k, v) for k, v in rheaders if k.lower() not in ("connection", "keep-alive")]
        if method == "HEAD" or status in (204, 304):
            return _build_head(status_line, rheaders)
        te = (_header(rheaders, "transfer-encoding") or "").lower()
        if te.endswith("chunked"):
            return _build_head(status_line, rheaders) + rbody
        cl = _header(rheaders, "content-length")
        if cl is None:
            rheaders.append(("Content-Length", str(len(rbody))))
        else:
            rbody = rbody[: int(cl)]
        return _build_head(status_line, rheaders) + rbody
