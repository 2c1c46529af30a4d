"""A minimal Kafka protocol client for tests that need exact requests (errors, hostile frames): kio message types,
one socket, one request at a time."""

from __future__ import annotations

import io
import socket
import struct

from kio.schema.request_header.v1.header import RequestHeader as HeaderV1
from kio.schema.request_header.v2.header import RequestHeader as HeaderV2
from kio.serial import entity_reader, entity_writer

from kafka_front.messages import build, request_type, response_type


class WireClient:
    def __init__(self, bootstrap: str, timeout: float = 30.0, client_id: str = "wire-test") -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.correlation = 0
        self.client_id = client_id

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> "WireClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def frame(self, api_key: int, version: int, values: dict) -> bytes:
        """The request frame (size prefix included) for ``values`` at ``version``."""
        self.correlation += 1
        req_cls = request_type(api_key, version)
        buf = io.BytesIO()
        if req_cls.__flexible__:
            entity_writer(HeaderV2)(buf, HeaderV2(request_api_key=api_key, request_api_version=version,
                                                  correlation_id=self.correlation, client_id=self.client_id))
        else:
            entity_writer(HeaderV1)(buf, HeaderV1(request_api_key=api_key, request_api_version=version,
                                                  correlation_id=self.correlation, client_id=self.client_id))
        entity_writer(req_cls)(buf, build(req_cls, values))
        data = buf.getvalue()
        return struct.pack(">i", len(data)) + data

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read_frame(self) -> bytes:
        head = self._exactly(4)
        return self._exactly(struct.unpack(">i", head)[0])

    def _exactly(self, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("the server closed the connection")
            out += chunk
        return bytes(out)

    def request(self, api_key: int, version: int, values: dict):
        """Send a request and parse its response (ApiVersions' header is always v0)."""
        self.send_raw(self.frame(api_key, version, values))
        return self.response(api_key, version)

    def response(self, api_key: int, version: int):
        data = self.read_frame()
        assert struct.unpack_from(">i", data)[0] == self.correlation
        cls = response_type(api_key, version)
        offset = 4
        if cls.__flexible__ and api_key != 18:
            offset += 1  # empty tagged fields of header v1
        value, size = entity_reader(cls)(data, offset)
        assert offset + size == len(data)
        return value

    def closed_by_server(self, timeout: float = 10.0) -> bool:
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True

    def produce(self, topic: str, partition: int, value: bytes):
        """One record produced (acks=all, Produce v9); the whole response (its throttle time included)."""
        import time

        from kafka_front.record_batch import encode_batch

        records = encode_batch(base_offset=0, offset_deltas=[0], timestamps=[int(time.time() * 1000)], keys=[None],
                               values=[value], producer_id=-1, producer_epoch=-1, base_sequence=-1)
        return self.request(0, 9, {"acks": -1, "timeout": 30000, "topic_data": [
            {"name": topic, "partition_data": [{"index": partition, "records": records}]}]})

    def fetch(self, topic: str, partition: int, offset: int, *, max_bytes: int = 1 << 20):
        """Fetch v12 of one partition (no wait); the whole response."""
        return self.request(1, 12, {"max_wait": 0, "min_bytes": 1, "max_bytes": max_bytes, "topics": [
            {"topic": topic, "partitions": [{"partition": partition, "fetch_offset": offset,
                                             "partition_max_bytes": max_bytes}]}]})
