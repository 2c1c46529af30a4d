"""Frames Kafka's own parser and lakelog's frame check judge differently, sent to both brokers byte for byte."""

from __future__ import annotations

import struct

from compat_support import difference, run_both
from kafka_frames import encode_frame
from wire_client import WireClient


def _unknown_tag(target) -> str:
    """ApiVersions v3 whose body carries one tagged field (tag 7, one byte) that v3 does not define."""
    frame = encode_frame(18, 3, {"client_software_name": "a", "client_software_version": "b"})
    tagged = frame[:-1] + b"\x01\x07\x01\x00"
    with WireClient(target.bootstrap, timeout=10) as w:
        w.send_raw(struct.pack(">i", len(tagged) - 4) + tagged[4:])
        try:
            answer = w.read_frame()
        except (ConnectionError, OSError):  # closed or reset by the server
            return "closed"
    _, error_code = struct.unpack_from(">ih", answer)  # correlation id, then ApiVersions' error code
    return f"answered {error_code}"


def test_an_unknown_tagged_field(targets):
    """Kafka reads and keeps a tagged field its version does not define (its generated readers store it as an
    unknown tagged field); lakelog closes the connection, as kio cannot read one: the ``unknown-tagged-fields``
    difference."""
    kafka, lakelog = run_both(targets, _unknown_tag)
    assert kafka == "answered 0"
    assert lakelog == "closed", difference("unknown-tagged-fields").reason
