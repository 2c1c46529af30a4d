"""A client on the wrong port: HTTP sent to the Kafka listener, a Kafka frame sent to the HTTP port.

The Kafka listener does what a Kafka broker does with HTTP: answers nothing and closes the connection, without a
warning in the log. The HTTP port answers a Kafka frame with a 400 whose text names the Kafka listener.
"""

from __future__ import annotations

import socket
import struct

import httpx


def _exchange(address: tuple[str, int], data: bytes) -> bytes:
    """Send ``data`` on a fresh connection and read until the server closes it (30 s at most)."""
    with socket.create_connection(address, timeout=30) as s:
        s.sendall(data)
        chunks = []
        while chunk := s.recv(65536):
            chunks.append(chunk)
        return b"".join(chunks)


def _address(host_port: str) -> tuple[str, int]:
    host, port = host_port.rsplit(":", 1)
    return host, int(port)


def test_http_to_the_kafka_listener_is_closed_unanswered_and_quietly(kafka_front):
    before = kafka_front.log_path.read_text()
    answer = _exchange(_address(kafka_front.bootstrap), b"GET /v1/health HTTP/1.1\r\nHost: lakelog\r\n\r\n")
    assert answer == b""
    assert httpx.get(f"{kafka_front.url}/v1/health", timeout=10).status_code == 200
    new = kafka_front.log_path.read_text()[len(before):]
    assert "WARNING" not in new and "frame size" not in new, new
    assert len([line for line in new.splitlines() if "HTTP" in line]) <= 1, new


def test_a_kafka_frame_to_the_http_port_gets_a_clear_400(kafka_front):
    api_versions = struct.pack(">hhih", 18, 0, 7, 0)  # ApiVersions v0, correlation id 7, no client id
    answer = _exchange(_address(kafka_front.url.removeprefix("http://")),
                       struct.pack(">i", len(api_versions)) + api_versions)
    assert answer.startswith(b"HTTP/1.1 400"), answer[:200]
    assert b"--kafka-listener" in answer and b"Kafka clients connect" in answer
    assert httpx.get(f"{kafka_front.url}/v1/health", timeout=10).status_code == 200


def test_the_listener_start_line_is_info(kafka_front):
    log = kafka_front.log_path.read_text()
    assert "INFO kafka_front.listener: lakelog Kafka listener on 127.0.0.1:" in log, log[-2000:]
    assert "WARNING kafka_front.listener" not in log
