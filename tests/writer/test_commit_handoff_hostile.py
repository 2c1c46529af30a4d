"""The handoff codec (lakelog/writer/commit_handoff.py) on bodies that made Python's own decoders raise something
other than a DecodeError or ValueError: stats nested past the recursion limit, numbers beyond a float, and
strings that are not UTF-8. Each is INVALID_REQUEST (42) naming what is wrong and no exception type; before,
they escaped as RecursionError, OverflowError and UnicodeDecodeError (a 500 on the handoff route, which the
sending front reads as an unknown outcome). The route itself: tests/api/test_handoff_route_hostile.py."""

from __future__ import annotations

import json

import pytest

from lakelog.errors import InvalidRequest
from lakelog.writer.commit_handoff import MAX_STATS_CHARS, decode_handoff

from test_commit_handoff import good


def _with_stats(stats: str) -> bytes:
    h = good()
    h["adds"][0]["stats"] = stats
    return json.dumps(h).encode()


def _good_bytes() -> bytes:
    return json.dumps(good()).encode()


DEEP = "[" * 15000
DEEP_OBJECTS = '{"numRecords":' + '{"a":' * 2000 + "1" + "}" * 2001
assert len(DEEP) <= MAX_STATS_CHARS and len(DEEP_OBJECTS) <= MAX_STATS_CHARS  # under the limit: they reach json

CASES = [
    # (body, what the message names)
    (_with_stats(DEEP), "stats"),  # json.loads: RecursionError
    (_with_stats(DEEP_OBJECTS), "stats"),
    (_with_stats('{"numRecords": 1e400}'), "stats"),  # int(inf): OverflowError
    (_with_stats('{"numRecords": -1e400}'), "stats"),
    (_with_stats('{"numRecords": Infinity}'), "stats"),
    (_with_stats('{"numRecords": 1, "minValues": {"offset": 10}, "maxValues": {"offset": 1e400}}'), "stats"),
    # not UTF-8 (msgspec raises UnicodeDecodeError, not a DecodeError): in a value, in a key, in the stats
    (_good_bytes().replace(b'"t-1"', b'"t-\xff"'), "UTF-8"),
    (_good_bytes().replace(b'"commit_id"', b'"commit\xc3_id"'), "UTF-8"),
    (_good_bytes().replace(b"numRecords", b"num\xedRecords", 1), "UTF-8"),
    (_good_bytes().replace(b'"t-1"', b'"t-\xed\xa0\x80"'), "UTF-8"),  # an encoded surrogate
]


@pytest.mark.parametrize("data, needle", CASES, ids=[
    "stats-deep-arrays", "stats-deep-objects", "stats-1e400", "stats-minus-1e400", "stats-infinity",
    "stats-offset-1e400", "non-utf8-value", "non-utf8-key", "non-utf8-in-stats", "utf8-surrogate"])
def test_a_handoff_that_breaks_a_decoder_is_invalid_request(data, needle):
    assert decode_handoff(_good_bytes()).commit_id == good()["commit_id"]  # the one change is what is refused
    with pytest.raises(InvalidRequest) as e:
        decode_handoff(data)
    assert e.value.code == 42 and e.value.name == "INVALID_REQUEST"
    assert needle in e.value.message, e.value.message
    for name in ("RecursionError", "OverflowError", "UnicodeDecodeError", "Traceback"):
        assert name not in e.value.message

