"""The handoff codec (lakelog/writer/commit_handoff.py): a well-formed handoff decodes; every way one can be
wrong -- shape, bounds, paths, stats, offsets, leases, producer rows -- is INVALID_REQUEST, table-driven; and
random changes to a good handoff (hypothesis) either decode to one that holds the codec's invariants or are
INVALID_REQUEST, never another error."""

from __future__ import annotations

import copy
import json

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakelog.errors import InvalidRequest
from lakelog.storage.topic_snapshot import segment_from_add
from lakelog.writer.commit_handoff import MAX_HANDOFF_BYTES, carries, decode_handoff

CID = "0123456789abcdef" * 2


def add(partition: int, base: int, n: int) -> dict:
    stats = {"numRecords": n, "minValues": {"offset": base}, "maxValues": {"offset": base + n - 1},
             "nullCount": {"offset": 0}}
    return {"path": f"partition={partition}/{base:020d}-{'ab' * 16}.parquet",
            "partitionValues": {"partition": str(partition)}, "size": 100, "modificationTime": 1,
            "dataChange": True, "stats": json.dumps(stats)}


def good() -> dict:
    return {"topic_id": "t-1", "commit_id": CID, "known_version": 7,
            "adds": [add(0, 10, 5), add(0, 15, 5), add(3, 0, 2)],
            "txns": {"lakelog.leo.0": 20, "lakelog.leo.3": 2, "lakelog.lease.0": 99},
            "expect": {"lakelog.leo.0": 10, "lakelog.leo.3": None, "lakelog.lease.0": 99},
            "producer_rows": [[0, 5, 0, 0, 4, 10, 14, 1], [3, 6, 0, 0, 1, 0, 1, 1]]}


def test_a_well_formed_handoff_decodes():
    h = decode_handoff(json.dumps(good()).encode())
    assert h.commit_id == CID and h.known_version == 7 and len(h.adds) == 3
    assert h.txns["lakelog.leo.0"] == 20 and h.expect["lakelog.leo.3"] is None


def _set(path, value):
    def change(d):
        target = d
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
    return change


def _drop(key):
    return lambda d: d.pop(key)


CASES = [
    ("not JSON", None, "malformed"),
    ("missing field", _drop("txns"), "malformed"),
    ("unknown field", _set(["extra"], 1), "malformed"),
    ("wrong type", _set(["known_version"], "7"), "malformed"),
    ("commit id not hex", _set(["commit_id"], "x" * 32), "commit_id"),
    ("no segments", _set(["adds"], []), "1 to"),
    ("path outside the layout", _set(["adds", 0, "path"], "../../etc/passwd"), "not a segment"),
    ("partition values disagree", _set(["adds", 0, "partitionValues"], {"partition": "1"}), "partition values"),
    ("data change false", _set(["adds", 0, "dataChange"], False), "partition values"),
    ("stats not JSON", _set(["adds", 0, "stats"], "{"), "stats"),
    ("stats count wrong", _set(["adds", 0, "stats"], json.dumps(
        {"numRecords": 9, "minValues": {"offset": 10}, "maxValues": {"offset": 14}})), "stats"),
    ("stats too long", _set(["adds", 0, "stats"], " " * 20000), "stats over"),
    ("txn not ours", _set(["txns", "lakelog.lso.0"], 1), "not a log end"),
    ("negative txn", _set(["txns", "lakelog.leo.0"], -1), "malformed"),
    ("expect differs from txns", _drop("expect"), "malformed"),
    ("log end of a partition not appended", _set(["txns", "lakelog.leo.5"], 1), "partitions appended to"),
    ("gap between segments", _set(["adds", 1], add(0, 16, 4)), "not contiguous"),
    ("first segment not at the expected end", _set(["expect", "lakelog.leo.0"], 9), "not contiguous"),
    ("log end past the segments", _set(["txns", "lakelog.leo.0"], 21), "where its segments end"),
    ("a lease moved", _set(["txns", "lakelog.lease.0"], 100), "cannot move the lease"),
    ("producer row too short", _set(["producer_rows", 0], [0, 5, 0]), "producer rows"),
    ("producer row of another partition", _set(["producer_rows", 0], [7, 5, 0, 0, 4, 10, 14, 1]), "producer rows"),
    ("producer row outside the offsets", _set(["producer_rows", 0], [0, 5, 0, 0, 4, 20, 24, 1]), "lie in"),
    # numbers a Delta reader could not parse (its longs) or Kafka could not carry (epochs, sequences)
    ("size over a long", _set(["adds", 0, "size"], 2**63), "malformed"),
    ("size zero", _set(["adds", 0, "size"], 0), "malformed"),
    ("modification time negative", _set(["adds", 0, "modificationTime"], -1), "malformed"),
    ("known version over a long", _set(["known_version"], 2**64), "malformed"),
    ("known version below -1", _set(["known_version"], -2), "malformed"),
    ("log end over a long", _set(["txns", "lakelog.leo.0"], 2**63), "malformed"),
    ("expected log end over a long", _set(["expect", "lakelog.leo.0"], 2**70), "malformed"),
    ("segments past a long", lambda d: (d["adds"].__setitem__(1, add(0, 15, 2**63)),
                                        d["txns"].__setitem__("lakelog.leo.0", 2**63 + 14)), "malformed"),
    ("producer row number over a long", _set(["producer_rows", 0, 7], 2**63), "malformed"),
    ("producer id negative", _set(["producer_rows", 0], [0, -5, 0, 0, 4, 10, 14, 1]), "Kafka's ranges"),
    ("epoch over int16", _set(["producer_rows", 0], [0, 5, 2**15, 0, 4, 10, 14, 1]), "Kafka's ranges"),
    ("sequence over int32", _set(["producer_rows", 0], [0, 5, 0, 0, 2**31, 10, 14, 1]), "Kafka's ranges"),
]


@pytest.mark.parametrize("change, needle", [(c, n) for _, c, n in CASES], ids=[name for name, _, _ in CASES])
def test_a_bad_handoff_is_invalid_request(change, needle):
    if change is None:
        data = b'{"topic_id": '
    else:
        h = copy.deepcopy(good())
        change(h)
        if "txns" in h and "expect" in h:  # a txn added: expected too, so the check reached is the one named
            h["expect"].update({k: 0 for k in h["txns"] if k not in h["expect"]})
        data = json.dumps(h).encode()
    with pytest.raises(InvalidRequest) as e:
        decode_handoff(data)
    assert e.value.code == 42 and e.value.name == "INVALID_REQUEST"
    assert needle in e.value.message, e.value.message


def test_an_oversized_handoff_is_refused_before_it_is_parsed():
    with pytest.raises(InvalidRequest, match="over the limit"):
        decode_handoff(b" " * (MAX_HANDOFF_BYTES + 1))


@pytest.mark.parametrize("txns, carried", [
    ({"lakelog.leo.0": 20}, True),
    ({"lakelog.leo.0": 20, "lakelog.leo.7": 3, "lakelog.lease.0": 99}, True),
    ({}, True),
    ({"lakelog.leo.0": 20, "lakelog.tx.7.0": 3}, False),  # a committing transaction's marker: its own front's
    ({"lakelog.lso.0": 20}, False),  # the log start offset: moved by DeleteRecords and retention, not by appends
    ({"lakelog.cleaner.0": 5}, False),
    ({"lakelog.pid.next": 5}, False),
    ({"lakelog.leo.x": 1}, False),
    ({"lakelog.leo.0 ": 1}, False),
])
def test_which_commits_can_be_handed_over(txns, carried):
    assert carries(txns) is carried


# most fields are numbers: out of range for a long, an int32 or an int16, negative, or just another number
_NUMBERS = st.integers(-(2**70), 2**70) | st.sampled_from([0, -1, 1, -2, 2**15, 2**31, 2**63 - 1, 2**63, 2**64])
_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | _NUMBERS | st.floats(allow_nan=False) | st.text(max_size=40)
    | st.sampled_from(["lakelog.leo.0", "lakelog.lease.0", "partition=0/00000000000000000010-x.parquet", "{}"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=8)


def _paths(value, prefix=()):
    """Every place in a JSON document: (path of keys and indices) for each dict entry and list item."""
    yield prefix
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, prefix + (i,))


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 10**6), st.sampled_from(["set", "set", "drop", "key"]),
                          st.one_of(_NUMBERS, _NUMBERS, _JSON_VALUES)), min_size=1, max_size=4))
def test_random_changes_to_a_handoff_decode_or_are_invalid_request(changes):
    h = copy.deepcopy(good())
    for pick, how, value in changes:
        places = [p for p in _paths(h) if p]
        path = places[pick % len(places)]
        parent = h
        for key in path[:-1]:
            parent = parent[key]
        if how == "set":
            parent[path[-1]] = value
        elif how == "drop":
            del parent[path[-1]]
        elif isinstance(parent, dict):  # a key renamed: the value kept under a new name
            parent[str(value)[:20]] = parent.pop(path[-1])
    try:
        decoded = decode_handoff(json.dumps(h).encode())
    except InvalidRequest as e:
        assert e.code == 42 and e.message
        return
    # accepted: what goes into a commit file fits its longs, and each partition's segments end at its log end
    assert 1 <= len(decoded.adds) and all(1 <= a.size < 2**63 and 0 <= a.modificationTime < 2**63
                                          for a in decoded.adds)
    assert all(0 <= v < 2**63 for v in decoded.txns.values())
    assert all(-(2**63) <= n < 2**63 for row in decoded.producer_rows for n in row)
    for a in decoded.adds:
        seg = segment_from_add(msgspec.structs.asdict(a))
        assert decoded.txns[f"lakelog.leo.{seg.partition}"] > seg.last_offset >= seg.base_offset
