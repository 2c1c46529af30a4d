"""The group coordinator's state machine, driven with a fake clock and real threads."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from lakelog.group.assignors import TopicPartition as TP
from lakelog.errors import KafkaError
from lakelog.group.group_coordinator import CoordinatorConfig, GroupCoordinator, JoinResult


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class DictStore:
    def __init__(self) -> None:
        self.groups: dict[str, dict] = {}

    def save_group(self, group_id, metadata):
        if metadata is None:
            self.groups.pop(group_id, None)
        else:
            self.groups[group_id] = metadata

    def load_groups(self):
        return dict(self.groups)


@pytest.fixture
def env():
    clock = Clock()
    counts = {"t0": 3, "t1": 3, "big": 6}
    store = DictStore()
    coord = GroupCoordinator(partition_counts=lambda topics: {t: counts.get(t, 0) for t in topics},
                             store=store, clock=clock,
                             config=CoordinatorConfig(group_min_session_timeout_ms=100))
    return coord, clock, counts, store


def rejoin_all(coord, group, results: dict[str, JoinResult], topics, protocols=("range",), **kw):
    """Every member rejoins concurrently (as clients do after REBALANCE_IN_PROGRESS)."""
    with ThreadPoolExecutor(len(results)) as pool:
        futs = {mid: pool.submit(coord.join, group, topics=topics[mid] if isinstance(topics, dict) else topics,
                                 protocols=protocols, member_id=mid, timeout_s=30, **kw) for mid in results}
        return {mid: f.result(timeout=60) for mid, f in futs.items()}


def owned(results):
    return [tp for r in results.values() for tp in r.assignment]


def test_single_member_gets_everything(env):
    coord, *_ = env
    r = coord.join("g", topics=["t0", "t1"])
    assert r.generation == 1 and r.leader == r.member_id
    assert r.assignment == [TP("t0", 0), TP("t0", 1), TP("t0", 2), TP("t1", 0), TP("t1", 1), TP("t1", 2)]
    coord.heartbeat("g", r.member_id, 1)


@pytest.mark.parametrize("strategy,expected0,expected1", [
    ("range", ["t0-0", "t0-1", "t1-0", "t1-1"], ["t0-2", "t1-2"]),
    ("roundrobin", ["t0-0", "t0-2", "t1-1"], ["t0-1", "t1-0", "t1-2"]),
])
def test_seed_example_through_the_coordinator(env, strategy, expected0, expected1):
    """Seed 001: consumers c0, c1; topics t0, t1 with 3 partitions each."""
    coord, *_ = env
    first = coord.join("g", topics=["t0", "t1"], protocols=[strategy], member_id=None, client_id="c0")
    pool = ThreadPoolExecutor(1)
    second = pool.submit(coord.join, "g", topics=["t0", "t1"], protocols=[strategy], client_id="c1", timeout_s=30)
    with pytest.raises(KafkaError) as e:
        for _ in range(100):
            coord.heartbeat("g", first.member_id, first.generation)
            threading.Event().wait(0.01)
    assert e.value.name == "REBALANCE_IN_PROGRESS"
    r0 = coord.join("g", topics=["t0", "t1"], protocols=[strategy], member_id=first.member_id, timeout_s=30)
    r1 = second.result(timeout=30)
    assert r0.generation == r1.generation == 2
    by_member = {r0.member_id: r0, r1.member_id: r1}
    ordered = sorted(by_member)  # the assignors order members by member id: c0-... < c1-...
    assert [str(tp) for tp in by_member[ordered[0]].assignment] == expected0
    assert [str(tp) for tp in by_member[ordered[1]].assignment] == expected1


def test_session_expiry_reassigns(env):
    coord, clock, *_ = env
    a = coord.join("g", topics=["big"], session_timeout_ms=500)
    pool = ThreadPoolExecutor(1)
    fb = pool.submit(coord.join, "g", topics=["big"], session_timeout_ms=500, timeout_s=30)
    with pytest.raises(KafkaError):
        for _ in range(200):
            coord.heartbeat("g", a.member_id, a.generation)
            threading.Event().wait(0.01)
    a2 = coord.join("g", topics=["big"], member_id=a.member_id, session_timeout_ms=500, timeout_s=30)
    b = fb.result(timeout=30)
    assert sorted(owned({1: a2, 2: b})) == [TP("big", p) for p in range(6)]
    assert set(a2.assignment).isdisjoint(b.assignment)
    clock.now += 0.4
    coord.heartbeat("g", b.member_id, b.generation)
    clock.now += 0.4  # a missed its session (0.8 s > 0.5 s), b heartbeated 0.4 s ago
    coord.tick()
    with pytest.raises(KafkaError) as e:
        coord.heartbeat("g", b.member_id, b.generation)
    assert e.value.name == "REBALANCE_IN_PROGRESS"
    b2 = coord.join("g", topics=["big"], member_id=b.member_id, session_timeout_ms=500, timeout_s=30)
    assert b2.assignment == [TP("big", p) for p in range(6)] and b2.generation == b.generation + 1
    with pytest.raises(KafkaError) as e:
        coord.heartbeat("g", a.member_id, a2.generation)
    assert e.value.name == "UNKNOWN_MEMBER_ID" and e.value.code == 25


def test_member_that_never_rejoins_is_removed_after_rebalance_timeout(env):
    coord, clock, *_ = env
    a = coord.join("g", topics=["t0"], rebalance_timeout_ms=1000, session_timeout_ms=60_000)
    pool = ThreadPoolExecutor(1)
    fb = pool.submit(coord.join, "g", topics=["t0"], rebalance_timeout_ms=1000, session_timeout_ms=60_000,
                     timeout_s=60)
    threading.Event().wait(0.3)
    clock.now += 1.5
    b = fb.result(timeout=30)
    assert b.assignment == [TP("t0", 0), TP("t0", 1), TP("t0", 2)] and b.members == [b.member_id]


def test_leave_rebalances_immediately(env):
    coord, *_ = env
    a = coord.join("g", topics=["t0"])
    pool = ThreadPoolExecutor(1)
    fb = pool.submit(coord.join, "g", topics=["t0"], timeout_s=30)
    threading.Event().wait(0.2)
    a2 = coord.join("g", topics=["t0"], member_id=a.member_id, timeout_s=30)
    b = fb.result(timeout=30)
    coord.leave("g", a2.member_id)
    with pytest.raises(KafkaError):
        coord.heartbeat("g", b.member_id, b.generation)
    b2 = coord.join("g", topics=["t0"], member_id=b.member_id, timeout_s=30)
    assert len(b2.assignment) == 3


def test_static_member_rejoins_without_rebalance(env):
    coord, *_ = env
    a = coord.join("g", topics=["t0"], group_instance_id="host-a")
    pool = ThreadPoolExecutor(1)
    fb = pool.submit(coord.join, "g", topics=["t0"], group_instance_id="host-b", timeout_s=30)
    threading.Event().wait(0.2)
    a = coord.join("g", topics=["t0"], member_id=a.member_id, group_instance_id="host-a", timeout_s=30)
    b = fb.result(timeout=30)
    restarted = coord.join("g", topics=["t0"], group_instance_id="host-a")  # new process, no member id
    assert restarted.member_id != a.member_id
    assert restarted.generation == a.generation and restarted.assignment == a.assignment
    coord.heartbeat("g", b.member_id, b.generation)  # no rebalance for the others
    with pytest.raises(KafkaError) as e:
        coord.heartbeat("g", a.member_id, a.generation, group_instance_id="host-a")
    assert e.value.name == "FENCED_INSTANCE_ID"


def test_partition_count_change_triggers_rebalance(env):
    coord, clock, counts, _ = env
    a = coord.join("g", topics=["t0"])
    counts["t0"] = 5
    clock.now += 2
    with pytest.raises(KafkaError) as e:
        coord.heartbeat("g", a.member_id, a.generation)
    assert e.value.name == "REBALANCE_IN_PROGRESS"
    a2 = coord.join("g", topics=["t0"], member_id=a.member_id)
    assert len(a2.assignment) == 5 and a2.generation == a.generation + 1


def test_cooperative_never_double_owns(env):
    coord, *_ = env
    proto = ("cooperative-sticky",)
    a = coord.join("g", topics=["big"], protocols=proto)
    assert len(a.assignment) == 6
    pool = ThreadPoolExecutor(1)
    fb = pool.submit(coord.join, "g", topics=["big"], protocols=proto, timeout_s=30)
    threading.Event().wait(0.2)
    a1 = coord.join("g", topics=["big"], protocols=proto, member_id=a.member_id, timeout_s=30)
    b1 = fb.result(timeout=30)
    # first round: the partitions moving to b are revoked from a but not yet given to b
    assert set(a1.assignment) < set(a.assignment) and b1.assignment == []
    assert len(a1.assignment) == 3
    with pytest.raises(KafkaError):  # the coordinator started the follow-up round itself
        coord.heartbeat("g", b1.member_id, b1.generation)
    second = rejoin_all(coord, "g", {a1.member_id: a1, b1.member_id: b1}, ["big"], proto)
    a2, b2 = second[a1.member_id], second[b1.member_id]
    assert a2.assignment == a1.assignment  # sticky: a keeps what it kept
    assert sorted(a2.assignment + b2.assignment) == [TP("big", p) for p in range(6)]
    assert a2.generation == a1.generation + 1


def test_commit_validation(env):
    coord, *_ = env
    coord.validate_commit("nobody", None, -1, [TP("t0", 0)])  # simple commit to a group without members
    a = coord.join("g", topics=["t0"])
    coord.validate_commit("g", a.member_id, a.generation, [TP("t0", 1)])
    cases = [
        (dict(member_id="ghost", generation=a.generation, partitions=[]), 25),
        (dict(member_id=None, generation=-1, partitions=[TP("t0", 0)]), 25),
        (dict(member_id=a.member_id, generation=a.generation - 1, partitions=[]), 22),
        (dict(member_id=a.member_id, generation=a.generation, partitions=[TP("t1", 0)]), 22),
    ]
    for kw, code in cases:
        with pytest.raises(KafkaError) as e:
            coord.validate_commit("g", **kw)
        assert e.value.code == code, kw


@pytest.mark.parametrize("kwargs,code", [
    (dict(topics=["t0"], protocols=["bogus"]), 23),
    (dict(topics=["t0"], session_timeout_ms=10), 26),
    (dict(topics=["t0"], member_id="never-joined"), 25),
    (dict(topics=[]), 42),
])
def test_bad_joins(env, kwargs, code):
    coord, *_ = env
    with pytest.raises(KafkaError) as e:
        coord.join("g", **kwargs)
    assert e.value.code == code


def test_admin_errors_and_restart(env):
    coord, clock, counts, store = env
    with pytest.raises(KafkaError) as e:
        coord.describe("missing")
    assert e.value.code == 69
    with pytest.raises(KafkaError) as e:
        coord.join("", topics=["t0"])
    assert e.value.code == 24
    a = coord.join("g", topics=["t0"])
    with pytest.raises(KafkaError) as e:
        coord.delete_group("g")
    assert e.value.code == 68
    # a restarted front restores membership and generation from the store
    again = GroupCoordinator(partition_counts=lambda ts: {t: counts.get(t, 0) for t in ts}, store=store,
                             clock=clock, config=CoordinatorConfig(group_min_session_timeout_ms=100))
    again.heartbeat("g", a.member_id, a.generation)
    d = again.describe("g")
    assert d.state == "Stable" and d.generation == a.generation and d.members[0].assignment == a.assignment
    again.leave("g", a.member_id)
    again.delete_group("g")
    assert "g" not in store.groups and again.list_groups() == []
