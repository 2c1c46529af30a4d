"""The lease keeper (lakelog/cluster/lease_keeper.py) on the real moto S3 server, through the fault proxy: a pass
takes a topic's leases in one commit, and the front's heartbeat goes on while a pass waits on a slow commit,
so the other fronts never take a live front's partitions because its lease pass is slow; while partition 0's
holder is dead the committer front is the front assigned partition 0; and it opens the writers of the topics
it leads before their first produce."""

from __future__ import annotations

import time
import uuid

import pytest

from s3_server import BUCKET, s3_options
from bench.s3_proxy import S3FaultProxy, commit_put
from lakelog.cluster.commit_forwarder import CommitForwarder
from lakelog.cluster.lease_keeper import LeaseKeeper
from lakelog.cluster.membership import FrontInfo, Membership
from lakelog.errors import UnknownTopicOrPartition
from lakelog.log import Log
from lakelog.storage.partition_lease import Lease
from lakelog.storage.storage_root import StorageRoot

SESSION_MS = 3000  # a beat every second: only a beat held up 3 s (on a loaded machine) fails the live-set check


def fresh_root(proxy: S3FaultProxy) -> StorageRoot:
    return StorageRoot.resolve(f"s3://{BUCKET}/{uuid.uuid4().hex}", s3_options(proxy.url))


def test_take_leases_commits_once_for_every_partition_it_takes(proxy):
    root = fresh_root(proxy)
    a, b = Log(root, node_id=1), Log(root, node_id=2)
    a.create_topic("t", 5)
    a.take_lease("t", 1)
    before = a.snapshot("t").version
    assert b.take_leases("t", [0, 1, 2]) == {0: Lease(0, 2), 1: Lease(1, 2), 2: Lease(0, 2)}
    assert b.snapshot("t").version == before + 1  # one commit for the three
    assert b.take_leases("t", [0, 2]) == {0: Lease(0, 2), 2: Lease(0, 2)}
    assert b.snapshot("t").version == before + 1  # all held already: nothing committed
    assert a.take_leases("t", [3, 3]) == {3: Lease(0, 1)}  # named twice, taken once
    assert a.snapshot("t").version == before + 2
    with pytest.raises(UnknownTopicOrPartition):
        b.take_leases("t", [4, 5])
    assert a.lease("t", 4) is None and a.snapshot("t").version == before + 2  # refused whole: nothing written


def test_the_heartbeat_goes_on_while_a_lease_pass_waits_on_a_slow_commit(proxy):
    root = fresh_root(proxy)
    Log(root).create_topic("first", 2)
    keeper = LeaseKeeper(Membership(root, FrontInfo(1, "http://127.0.0.1:1"), SESSION_MS),
                         interval_s=SESSION_MS / 3000)
    keeper.start(Log(root, node_id=1, leases=keeper))
    try:
        other = Membership(root, FrontInfo(2, "http://127.0.0.1:2"), SESSION_MS)  # how another front sees it
        assert [f.node_id for f in other.live()] == [1]
        # A new topic: the next pass takes its leases, and that commit's PUT stalls for twice the session timeout
        # (version 0 is the topic's creation)
        stall = proxy.stall(lambda method, path: commit_put(method, path) and "/second/_delta_log/" in path
                            and path.split("?")[0].endswith(f"{1:020d}.json"), 2 * SESSION_MS / 1000, then="forward")
        Log(root).create_topic("second", 3)
        deadline = time.monotonic() + 30
        while not stall.hits:
            assert time.monotonic() < deadline, "the keeper never took the new topic's leases"
            time.sleep(0.05)
        seen = []
        while not stall.done.is_set():  # the pass is parked in the stalled PUT
            seen.append([f.node_id for f in other.live()])
            time.sleep(0.1)
        assert len(seen) >= 10 and all(s == [1] for s in seen), seen
        deadline = time.monotonic() + 30
        while [Log(root).lease("second", p) for p in range(3)] != [Lease(0, 1)] * 3:
            assert time.monotonic() < deadline, "the stalled lease commit never landed"
            time.sleep(0.1)
        assert Log(root).snapshot("second").version == 1  # the topic's creation, then one commit for its leases
    finally:
        keeper.stop()


def test_while_partition_0s_holder_is_dead_the_committer_front_is_the_one_assigned_it(s3_endpoint):
    """Partition 0's holder died and no pass has taken its lease yet: the commits go to the front the lease keeper
    assigned partition 0 to (which takes it at its next pass), not every front committing for itself."""
    root = StorageRoot.resolve(f"s3://{BUCKET}/{uuid.uuid4().hex}", s3_options(s3_endpoint))
    Log(root).create_topic("t", 2)
    fronts = {n: Membership(root, FrontInfo(n, f"http://127.0.0.1:{n}"), SESSION_MS) for n in (1, 2, 3)}
    fronts[1].heartbeat()
    Log(root, node_id=1).take_lease("t", 0)
    time.sleep(SESSION_MS / 1000 + 0.2)  # front 1 stops beating: dead
    fronts[2].heartbeat()
    fronts[3].heartbeat()
    keeper = LeaseKeeper(fronts[3])
    # assigns partition 0 to front 2 and partition 1 to front 3, which takes it
    keeper.run_pass(Log(root, node_id=3, leases=keeper))
    assert (keeper.assigned("t", 0), keeper.assigned("t", 1)) == (2, 3)
    snap = Log(root).snapshot("t")
    assert Log(root).lease("t", 0) == Lease(0, 1) and Log(root).lease("t", 1) == Lease(0, 3)
    forwarder = CommitForwarder(keeper, secret="0" * 64)
    try:
        assert forwarder.committer_front(snap) == "http://127.0.0.1:2"
        # once front 2 holds the lease it is the committer front because it holds it; for front 2 itself, None
        Log(root, node_id=2).take_lease("t", 0)
        assert forwarder.committer_front(Log(root).snapshot("t")) == "http://127.0.0.1:2"
    finally:
        forwarder.close()
    keeper2 = LeaseKeeper(fronts[2])
    keeper2.run_pass(Log(root, node_id=2, leases=keeper2))
    own = CommitForwarder(keeper2, secret="0" * 64)
    try:
        assert own.committer_front(Log(root).snapshot("t")) is None
    finally:
        own.close()


def test_a_front_opens_the_writers_of_the_topics_it_leads_before_their_first_produce(proxy):
    """The keeper opens the writer of each topic it was assigned partitions of (a producer's first request then
    pays no table read, several round trips at an object store's latency): the first append
    through the keeper's Log reads less than one through a Log whose writer is cold."""
    root = fresh_root(proxy)
    for topic in ("a", "b"):
        Log(root).create_topic(topic, 2)
    keeper = LeaseKeeper(Membership(root, FrontInfo(1, "http://127.0.0.1:1"), SESSION_MS), interval_s=0.2)
    log = Log(root, node_id=1, leases=keeper)
    keeper.start(log)
    try:
        deadline = time.monotonic() + 30
        while keeper.passes < 3:  # the start's pass took the leases; the writers open after the next one
            assert time.monotonic() < deadline, "the keeper made no passes"
            time.sleep(0.05)
        assert log.open_writer("a") is False and log.open_writer("b") is False  # the keeper opened them
    finally:
        keeper.stop()
    cold = Log(root, node_id=1)
    cold.snapshot("b")  # the topic's snapshot cached, as a front's Metadata would have it: not its writer
    reads = {}
    for writer, topic in ((log, "a"), (cold, "b")):
        proxy.reset_stats()
        writer.append(topic, [{"value": topic.encode()}], partition=0)
        stats = proxy.reset_stats()
        reads[topic] = stats.requests["GET"] + stats.requests["HEAD"] + stats.requests["LIST"]
    assert reads["a"] < reads["b"], reads
    assert [Log(root).read(t, 0).column("value").to_pylist() for t in ("a", "b")] == [[b"a"], [b"b"]]


def test_a_topic_created_or_grown_through_a_front_has_its_share_of_leases_when_the_call_returns(proxy):
    """Kafka's controller elects a new topic's leaders as it creates it: here the creating front takes its share of
    the leases before ``create_topic`` (and ``alter_topic`` adding partitions) returns, with no pass of its own
    in between (an interval of an hour), reading no other topic's log and no heartbeat (so creating a topic costs
    the same however many there are); the other live front takes its share at its next pass."""
    root = fresh_root(proxy)
    Log(root).create_topic("other", 3)
    keepers = {n: LeaseKeeper(Membership(root, FrontInfo(n, f"http://127.0.0.1:{n}"), 60_000), interval_s=3600)
               for n in (1, 2)}
    logs = {n: Log(root, node_id=n, leases=keepers[n]) for n in (1, 2)}
    keepers[2].run_once(logs[2])  # front 2 is live when front 1 starts
    keepers[1].start(logs[1])
    try:
        seen = len(proxy.log)
        logs[1].create_topic("t", 4)
        paths = [path for _, path, _ in proxy.log[seen:]]
        assert paths and not [p for p in paths if "/other/" in p or "/_lakelog/fronts/" in p], paths
        held = {p: Log(root).lease("t", p) for p in range(4)}
        mine = [p for p in range(4) if keepers[1].assigned("t", p) == 1]
        assert len(mine) == 2, mine
        assert {p for p, lease in held.items() if lease is not None} == set(mine), held
        assert all(held[p].node_id == 1 for p in mine), held
        logs[1].append("t", [{"value": b"at once"}], partition=mine[0])  # writable: no NOT_LEADER_OR_FOLLOWER
        keepers[2].run_pass(logs[2])
        assert {Log(root).lease("t", p).node_id for p in range(4) if p not in mine} == {2}
        logs[1].alter_topic("t", partitions=6)
        new = [p for p in (4, 5) if keepers[1].assigned("t", p) == 1]
        assert len(new) == 1 and Log(root).lease("t", new[0]).node_id == 1
        assert Log(root).lease("t", ({4, 5} - set(new)).pop()) is None  # front 2's, at its next pass
        logs[1].create_topic("__consumer_offsets", 2)  # internal: written by each group's coordinator, not leased
        assert [Log(root).lease("__consumer_offsets", p) for p in (0, 1)] == [None, None]
    finally:
        keepers[1].stop()
