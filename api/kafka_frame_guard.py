"""The HTTP port's answer to a Kafka client: a plain 400 that says where Kafka clients connect.

A Kafka request starts with its 4-byte big-endian size, whose first byte is 0 for any frame under 16 MiB;
an HTTP request starts with its method's letters.  So the first byte of a connection tells them apart: a
connection that opens with a Kafka frame gets ``400 Bad Request`` with a text body naming the Kafka listener
and is closed, with one INFO line in the log, instead of uvicorn's "Invalid HTTP request received." warning
for every attempt of a retrying client.  (A Kafka client reads "HTTP/1.1 400" as a frame size and
disconnects; ``lakelog`` commands given this port as ``--bootstrap-server`` then say so, naming ``--url``.)
"""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)

MESSAGE = ("This is lakelog's HTTP front, and it received Kafka's wire protocol. Kafka clients connect to the "
           "front's Kafka listener (lakelog serve --kafka-listener HOST:PORT), not to its HTTP port.\n")


def looks_like_kafka_frame(data: bytes) -> bool:
    """Whether a connection's first bytes are a Kafka frame rather than an HTTP request line."""
    return bool(data) and data[0] == 0


def answering_kafka_frames(protocol: type) -> type:
    """``protocol`` (uvicorn's httptools protocol, or a subclass of it), answering a connection that opens with
    a Kafka frame with :data:`MESSAGE`."""

    class AnsweringKafkaFrames(protocol):
        _opened = False

        def data_received(self, data: bytes) -> None:
            if not self._opened:
                self._opened = True
                if looks_like_kafka_frame(data):
                    log.info("answered a Kafka frame on the HTTP port from %s with 400 (Kafka clients use the "
                             "--kafka-listener address)", "%s:%d" % self.client if self.client else "a client")
                    self.send_400_response(MESSAGE)
                    return
            super().data_received(data)

    return AnsweringKafkaFrames
