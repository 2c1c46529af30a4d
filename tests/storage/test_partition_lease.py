"""Partition leases (lakelog/storage/partition_lease.py): packing, the balance of partitions over fronts, and
fencing through real commits of two Logs (two fronts) on one root: only the holder appends, a takeover fences
the old holder's next append, and a fenced append writes nothing."""

from __future__ import annotations

from collections import Counter

import pytest

from lakelog.errors import NotLeaderOrFollower
from lakelog.log import Log
from lakelog.storage.partition_lease import Lease, assign, check_node_id, unpack


@pytest.mark.parametrize("epoch, node", [(0, 0), (0, 1), (7, 3), (1 << 40, 65535)])
def test_pack_round_trips(epoch, node):
    assert unpack(Lease(epoch, node).pack()) == Lease(epoch, node)


@pytest.mark.parametrize("node", [-1, 65536, "1", 1.0])
def test_node_ids_are_bounded(node):
    with pytest.raises(ValueError):
        check_node_id(node)


@pytest.mark.parametrize("topics, nodes", [
    ({"a": 16}, [1, 2, 3]),
    ({"a": 16, "b": 3, "c": 1}, [1, 2]),
    ({"a": 2}, [5, 1, 9]),
    ({"a": 7, "b": 7}, [1, 2, 3, 4]),
    ({"a": 1}, [1]),
])
def test_assignment_spreads_within_one_per_topic_and_overall(topics, nodes):
    pairs = [(t, p) for t, n in topics.items() for p in range(n)]
    got = assign(pairs, nodes)
    assert set(got) == set(pairs) and set(got.values()) <= set(nodes)
    overall = Counter(got.values())
    counts = [overall.get(n, 0) for n in nodes]
    assert max(counts) - min(counts) <= 1, counts
    for t in topics:
        per = Counter(node for (topic, _), node in got.items() if topic == t)
        c = [per.get(n, 0) for n in nodes]
        assert max(c) - min(c) <= 1, (t, c)
    assert assign(list(reversed(pairs)), list(reversed(nodes))) == got  # every front computes the same


def test_assignment_without_live_fronts_is_empty():
    assert assign([("a", 0)], []) == {}


def records(n: int, tag: str) -> list[dict]:
    return [{"value": f"{tag}-{i}"} for i in range(n)]


def test_only_the_holder_appends_and_a_takeover_fences_the_old_holder(tmp_path):
    root = str(tmp_path / "root")
    a, b = Log(root, node_id=1), Log(root, node_id=2)
    a.create_topic("t", 2)
    assert a.lease("t", 0) is None
    with pytest.raises(NotLeaderOrFollower):  # nobody holds it yet
        a.append("t", records(1, "x"), partition=0)
    assert a.take_lease("t", 0) == Lease(0, 1)
    assert a.append("t", records(3, "a1"), partition=0)[0].base_offset == 0
    with pytest.raises(NotLeaderOrFollower) as e:
        b.append("t", records(2, "b0"), partition=0)
    assert e.value.leader_id == 1
    assert b.snapshot("t").high_watermark(0) == 3  # the refused append wrote nothing
    assert b.take_lease("t", 0) == Lease(1, 2)
    with pytest.raises(NotLeaderOrFollower) as e:  # a's committer still has its old snapshot: fenced by the log
        a.append("t", records(2, "a2"), partition=0)
    assert e.value.leader_id == 2
    assert b.append("t", records(2, "b1"), partition=0)[0].base_offset == 3
    values = [v.decode() if isinstance(v, bytes) else v for v in a.read("t", 0).column("value").to_pylist()]
    assert values == ["a1-0", "a1-1", "a1-2", "b1-0", "b1-1"]
    assert a.take_lease("t", 0) == Lease(2, 1) and b.lease("t", 0) == Lease(2, 1)
    assert a.take_lease("t", 0) == Lease(2, 1)  # already held: nothing committed
    # Partition 1 was never leased: neither front appends to it; a Log without a node id ignores leases.
    with pytest.raises(NotLeaderOrFollower):
        b.append("t", records(1, "x"), partition=1)
    assert Log(root).append("t", records(1, "plain"), partition=1)[0].base_offset == 0


def test_an_append_racing_a_takeover_either_lands_before_it_or_is_fenced(tmp_path):
    """The old holder's commit carries its lease action: if the takeover took the version first, the append's
    commit conflicts on that app id and is re-planned, and then fails; it never lands after the takeover."""
    root = str(tmp_path / "root")
    a, b = Log(root, node_id=1), Log(root, node_id=2)
    a.create_topic("t", 1)
    a.take_lease("t", 0)
    a.append("t", records(1, "warm"), partition=0)  # a's committer now holds a snapshot with its lease
    b.take_lease("t", 0)  # the next version: a's committer does not know it
    with pytest.raises(NotLeaderOrFollower):
        a.append("t", records(5, "late"), partition=0)
    snap = b.snapshot("t")
    assert snap.high_watermark(0) == 1
    ops = [snap.txn("lakelog.lease.0")]
    assert unpack(ops[0]) == Lease(1, 2)


@pytest.mark.parametrize("case, nodes, before, after_nodes, most_moved", [
    ("a node leaves: only its partitions move", [1, 2, 3], 6, [1, 3], 2),
    ("a node joins: only its share moves", [1, 2], 6, [1, 2, 3], 2),
    ("nothing changes: nothing moves", [1, 2, 3], 7, [1, 2, 3], 0),
])
def test_assignment_is_sticky(case, nodes, before, after_nodes, most_moved):
    pairs = [("t", p) for p in range(before)]
    first = assign(pairs, nodes)
    second = assign(pairs, after_nodes, first)
    moved = [tp for tp in pairs if first[tp] != second[tp]]
    assert len(moved) <= most_moved, (case, first, second)
    counts = Counter(second.values())
    assert max(counts.values()) - min(counts.values()) <= 1 and set(counts) == set(after_nodes), case
