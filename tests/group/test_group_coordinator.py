"""The group coordinator in-process, on a fake clock: Kafka's classic state machine and KIP-848's reconciliation.

Classic: a real member is elected leader and alone gets every member's metadata; its SyncGroup assignment is
relayed byte for byte, for any protocol type and name; the protocol is chosen by Kafka's vote; static members,
MEMBER_ID_REQUIRED, the initial rebalance delay, session and sync expiry, Kafka's error codes. A stuck group
never delays another (joins wait on futures, not threads). Consumer protocol: a hypothesis run of joins, leaves,
heartbeats and expiries never finds a partition owned by two members, and the group converges.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakelog.errors import (FencedInstanceId, FencedMemberEpoch, GroupIdNotFound, IllegalGeneration,
                            InconsistentGroupProtocol, InvalidRegularExpression, InvalidRequest, NonEmptyGroup, RebalanceInProgress, StaleMemberEpoch,
                            UnknownMemberId, UnreleasedInstanceId, UnsupportedAssignor)
from lakelog.group.assignors import TopicPartition
from lakelog.group.consumer_protocol import decode_assignment, encode_assignment, encode_subscription
from lakelog.group.group_coordinator import GroupCoordinator
from lakelog.group.group_coordinator_config import CoordinatorConfig


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float, coord: GroupCoordinator | None = None) -> None:
        self.now += seconds
        if coord is not None:
            coord.tick()


class DictStore:
    """A GroupStore in memory: group -> (log offset, value)."""

    def __init__(self) -> None:
        self.records: dict[str, tuple[int, dict | None]] = {}
        self.offset = 0

    def save_group(self, group_id, metadata):
        self.offset += 1
        self.records[group_id] = (self.offset, metadata)
        return self.offset

    def group_records(self, *, refresh=True):
        return dict(self.records)

    def delete_group(self, group):
        return self.save_group(group, None)


def coordinator(delay_ms: int = 0, **config) -> tuple[GroupCoordinator, Clock, DictStore]:
    clock, store = Clock(), DictStore()
    counts = {"t": 4, "u": 2}
    coord = GroupCoordinator(partition_counts=lambda topics: {t: counts.get(t, 0) for t in topics}, store=store,
                             clock=clock, config=CoordinatorConfig(group_min_session_timeout_ms=100,
                                                                   group_initial_rebalance_delay_ms=delay_ms,
                                                                   **config))
    return coord, clock, store


def join(coord, group, member_id="", protocols=(("range", b"md"),), protocol_type="consumer", **kw):
    kw.setdefault("session_timeout_ms", 10_000)
    kw.setdefault("rebalance_timeout_ms", 10_000)
    return coord.join_group(group, member_id=member_id, protocol_type=protocol_type, protocols=protocols,
                            client_id="c", **kw)


def done(future):
    assert future.done(), "the join/sync is still parked"
    r = future.result()
    if r.error is not None:
        raise r.error
    return r


# -- classic -----------------------------------------------------------------------------------------------
def test_leader_is_a_member_that_alone_gets_metadata_and_its_assignment_is_relayed_byte_for_byte():
    coord, clock, _ = coordinator()
    a = done(join(coord, "g", protocols=(("my-assignor", b"\x00user-data-a"),), protocol_type="connect"))
    b_fut = join(coord, "g", protocols=(("my-assignor", b"\x01user-data-b"),), protocol_type="connect")
    assert not b_fut.done()  # parked until the leader rejoins
    a_fut = join(coord, "g", member_id=a.member_id, protocols=(("my-assignor", b"\x00user-data-a2"),),
                 protocol_type="connect")
    a2, b = done(a_fut), done(b_fut)
    assert a2.leader == b.leader == a.member_id and a2.generation == b.generation == 2
    assert (a2.protocol_type, a2.protocol_name) == ("connect", "my-assignor")
    assert {m.member_id: m.metadata for m in a2.members} == {a.member_id: b"\x00user-data-a2",
                                                               b.member_id: b"\x01user-data-b"}
    assert b.members == ()  # followers get nobody's metadata
    follower = coord.sync_group("g", member_id=b.member_id, generation=2)
    assert not follower.done()  # waits for the leader's assignment
    blobs = {a.member_id: b"\xff\x00opaque", b.member_id: b"anything at all"}
    leader = coord.sync_group("g", member_id=a.member_id, generation=2, assignments=blobs)
    assert done(leader).assignment == blobs[a.member_id] and done(follower).assignment == blobs[b.member_id]
    assert coord.describe("g").state == "Stable"


@pytest.mark.parametrize("prefs, chosen", [
    ([("range", "roundrobin"), ("roundrobin", "range"), ("roundrobin",)], "roundrobin"),
    ([("RoundRobinAssigner",), ("RoundRobinAssigner",)], "RoundRobinAssigner"),  # kafkajs's name
    ([("custom-x", "range"), ("custom-x", "range")], "custom-x"),
])
def test_protocol_chosen_by_kafkas_vote(prefs, chosen):
    coord, clock, _ = coordinator()
    first = done(join(coord, "g", protocols=[(p, b"") for p in prefs[0]]))
    futures = [join(coord, "g", protocols=[(p, b"") for p in ps]) for ps in prefs[1:]]
    futures.append(join(coord, "g", member_id=first.member_id, protocols=[(p, b"") for p in prefs[0]]))
    assert {done(f).protocol_name for f in futures} == {chosen}


def test_inconsistent_group_protocol_only_without_a_common_protocol():
    coord, clock, _ = coordinator()
    done(join(coord, "g", protocols=(("range", b""), ("sticky", b""))))
    assert not join(coord, "g", protocols=(("sticky", b""),)).done()  # shares one: accepted, parked
    with pytest.raises(InconsistentGroupProtocol):
        done(join(coord, "g", protocols=(("roundrobin", b""),)))
    with pytest.raises(InconsistentGroupProtocol):
        done(join(coord, "g", protocols=(("range", b""),), protocol_type="connect"))


def test_member_id_required_then_join():
    coord, clock, _ = coordinator()
    with pytest.raises(Exception) as e:
        done(join(coord, "g", require_known_member_id=True))
    assert e.value.code == 79
    member_id = join(coord, "g", require_known_member_id=True).result().member_id  # another pending id
    r = done(join(coord, "g", member_id=member_id, require_known_member_id=True, client_host="/10.1.2.3"))
    assert r.member_id == member_id and r.generation == 1
    [m] = coord.describe("g").members  # the second join's client id and host, as DescribeGroups shows them
    assert (m.member_id, m.client_id, m.client_host) == (member_id, "c", "/10.1.2.3")


def test_initial_rebalance_delay_waits_for_more_members():
    coord, clock, _ = coordinator(delay_ms=3000)
    a = join(coord, "g")
    clock.advance(2.0, coord)
    assert not a.done()
    b = join(coord, "g")  # arrives during the delay: the round is extended
    clock.advance(1.5, coord)
    assert not a.done() and not b.done()
    clock.advance(3.0, coord)
    assert done(a).generation == done(b).generation == 1 and len(done(a).members or done(b).members) == 2


def test_static_member_restart_keeps_its_assignment_without_a_rebalance():
    coord, clock, _ = coordinator()
    a = done(join(coord, "g", group_instance_id="i-1"))
    done(coord.sync_group("g", member_id=a.member_id, generation=1, assignments={a.member_id: b"mine"}))
    again = done(join(coord, "g", group_instance_id="i-1"))  # a restart: unknown member id, same instance
    assert again.member_id != a.member_id and again.generation == 1
    assert done(coord.sync_group("g", member_id=again.member_id, generation=1)).assignment == b"mine"
    with pytest.raises(FencedInstanceId):
        coord.heartbeat("g", a.member_id, 1, "i-1")
    with pytest.raises(FencedInstanceId):
        coord.validate_commit("g", a.member_id, 1, "i-1")


def test_session_expiry_rebalances_and_rejoin_is_required():
    coord, clock, _ = coordinator()
    a = done(join(coord, "g", session_timeout_ms=1000))
    done(coord.sync_group("g", member_id=a.member_id, generation=1, assignments={}))
    b_fut = join(coord, "g", session_timeout_ms=1000)
    with pytest.raises(RebalanceInProgress):
        coord.heartbeat("g", a.member_id, 1)
    clock.advance(5.0, coord)  # a never rejoins: removed at its session end, b's round completes
    b = done(b_fut)
    assert b.generation == 2 and b.leader == b.member_id and [m.member_id for m in b.members] == [b.member_id]
    with pytest.raises(UnknownMemberId):
        coord.heartbeat("g", a.member_id, 2)
    with pytest.raises(IllegalGeneration):
        coord.heartbeat("g", b.member_id, 1)


def test_members_that_never_sync_are_removed():
    coord, clock, _ = coordinator()
    a = done(join(coord, "g", rebalance_timeout_ms=2000))
    b_fut = join(coord, "g", rebalance_timeout_ms=2000)
    done(join(coord, "g", member_id=a.member_id, rebalance_timeout_ms=2000))
    b = done(b_fut)
    done(coord.sync_group("g", member_id=a.member_id, generation=2, assignments={}))  # b never syncs
    clock.advance(2.5, coord)
    assert [m.member_id for m in coord.describe("g").members] == [a.member_id]
    assert coord.describe("g").state == "PreparingRebalance"
    with pytest.raises(UnknownMemberId):
        coord.heartbeat("g", b.member_id, 2)


def test_group_max_size_reached():
    coord, clock, _ = coordinator(group_max_size=1)
    a = done(join(coord, "g"))
    with pytest.raises(Exception) as e:
        done(join(coord, "g"))
    assert e.value.code == 81  # GROUP_MAX_SIZE_REACHED
    assert [m.member_id for m in coord.describe("g").members] == [a.member_id]


def test_a_stuck_group_never_delays_another():
    """Kafka parks joins per group: a member with a 600 s rebalance timeout that heartbeats but never rejoins,
    and 70 joins waiting on its group, leave a second group's rebalance untouched."""
    coord, clock, _ = coordinator()
    stuck = done(join(coord, "stuck", rebalance_timeout_ms=600_000))
    done(coord.sync_group("stuck", member_id=stuck.member_id, generation=1, assignments={}))
    parked = [join(coord, "stuck", rebalance_timeout_ms=600_000) for _ in range(70)]
    for _ in range(20):
        clock.advance(1.0, coord)
        with pytest.raises(RebalanceInProgress):
            coord.heartbeat("stuck", stuck.member_id, 1)  # alive, but never rejoins
    assert not any(f.done() for f in parked)
    a = done(join(coord, "healthy"))
    b_fut = join(coord, "healthy")
    a2 = done(join(coord, "healthy", member_id=a.member_id))
    assert done(b_fut).generation == a2.generation == 2  # at once, on the same clock


def test_offset_commit_rules():
    coord, clock, _ = coordinator()
    coord.validate_commit("new-group", None, -1)  # a simple commit creates nothing and needs no member
    with pytest.raises(IllegalGeneration):
        coord.validate_commit("new-group", "m", 3)
    a = done(join(coord, "g"))
    with pytest.raises(RebalanceInProgress):  # CompletingRebalance: wait for the assignment
        coord.validate_commit("g", a.member_id, 1)
    done(coord.sync_group("g", member_id=a.member_id, generation=1, assignments={}))
    coord.validate_commit("g", a.member_id, 1)
    with pytest.raises(IllegalGeneration):
        coord.validate_commit("g", a.member_id, 0)
    with pytest.raises(UnknownMemberId):
        coord.validate_commit("g", None, -1)  # the group has members
    with pytest.raises(UnknownMemberId):
        coord.validate_commit("g", "nobody", 1)


def test_delete_groups_and_following_the_store():
    coord, clock, store = coordinator()
    a = done(join(coord, "g"))
    done(coord.sync_group("g", member_id=a.member_id, generation=1, assignments={a.member_id: b"x"}))
    coord.persist()
    errors = coord.delete_groups(["g", "missing"])
    assert isinstance(errors["g"], NonEmptyGroup) and isinstance(errors["missing"], GroupIdNotFound)
    coord.leave_group("g", [(a.member_id, None)])
    coord.persist()
    # a second front follows the same store: it restores the group, then forgets it once the first deletes it
    other = GroupCoordinator(partition_counts=lambda t: {}, store=store, clock=clock)
    assert other.describe("g").state == "Empty"
    assert coord.delete_groups(["g"]) == {"g": None} and store.records["g"][1] is None
    other.follow()
    with pytest.raises(GroupIdNotFound):
        other.describe("g")


def test_restart_restores_stable_groups_with_fresh_sessions():
    coord, clock, store = coordinator()
    a = done(join(coord, "g", group_instance_id="s", session_timeout_ms=2000))
    done(coord.sync_group("g", member_id=a.member_id, generation=1, assignments={a.member_id: b"bytes"}))
    coord.persist()
    again = GroupCoordinator(partition_counts=lambda t: {}, store=store, clock=clock,
                             config=CoordinatorConfig(group_min_session_timeout_ms=100))
    d = again.describe("g")
    assert (d.state, d.generation, d.leader, [m.assignment for m in d.members]) == ("Stable", 1, a.member_id,
                                                                                    [b"bytes"])
    again.heartbeat("g", a.member_id, 1, "s")
    clock.advance(3.0, again)  # no heartbeat since: the restored member expires like any other
    assert again.describe("g").state == "Empty"


# -- consumer protocol (KIP-848) -----------------------------------------------------------------------------
def beat(coord, group, member_id, epoch, owned, **kw):
    return coord.consumer_heartbeat(group, member_id=member_id, member_epoch=epoch, owned=owned, **kw)


def test_consumer_group_errors():
    coord, clock, _ = coordinator()
    with pytest.raises(UnsupportedAssignor):
        coord.consumer_heartbeat("g", member_id="m", member_epoch=0, rebalance_timeout_ms=1000,
                                 subscribed_topics=["t"], server_assignor="fifo")
    with pytest.raises(GroupIdNotFound):
        beat(coord, "g", "m", 1, [])
    r = coord.consumer_heartbeat("g", member_id="m", member_epoch=0, rebalance_timeout_ms=1000,
                                 subscribed_topics=["t"], instance_id="i")
    with pytest.raises(FencedMemberEpoch):
        beat(coord, "g", "m", r.member_epoch + 1, [])
    with pytest.raises(UnknownMemberId):
        beat(coord, "g", "x", 1, [])
    with pytest.raises(UnreleasedInstanceId):
        coord.consumer_heartbeat("g", member_id="m2", member_epoch=0, rebalance_timeout_ms=1000,
                                 subscribed_topics=["t"], instance_id="i")
    with pytest.raises(StaleMemberEpoch):
        coord.validate_commit("g", "m", 0)
    coord.validate_commit("g", "m", r.member_epoch)


def test_classic_member_joins_a_consumer_group_and_the_group_goes_back_when_the_consumer_member_leaves():
    coord, clock, _ = coordinator()
    coord.consumer_heartbeat("g", member_id="new", member_epoch=0, rebalance_timeout_ms=1000,
                             subscribed_topics=["t"])
    sub = encode_subscription(["t"])
    r = done(join(coord, "g", protocols=(("range", sub),)))
    assert r.leader == "" and r.generation == 2  # every classic member is a follower: the coordinator assigns
    mine = decode_assignment(done(coord.sync_group("g", member_id=r.member_id, generation=2)).assignment)
    assert mine.partitions == ()  # "new" still holds all four
    owned = beat(coord, "g", "new", 1, [TopicPartition("t", p) for p in range(4)]).assignment
    beat(coord, "g", "new", 1, sorted(owned))  # revoked what moves
    with pytest.raises(RebalanceInProgress):
        coord.heartbeat("g", r.member_id, 2)  # its partitions are free now: rejoin to get them
    r = done(join(coord, "g", member_id=r.member_id, protocols=(("range", sub),)))
    got = decode_assignment(done(coord.sync_group("g", member_id=r.member_id, generation=r.generation)).assignment)
    assert len(got.partitions) == 2 and not set(got.partitions) & set(owned)
    coord.consumer_heartbeat("g", member_id="new", member_epoch=-1)  # leaves: only classic members are left
    d = coord.describe("g")
    assert (d.type, d.state) == ("classic", "PreparingRebalance")


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["join", "leave", "beat", "beat", "beat", "expire", "apply"]),
                          st.integers(0, 4)), min_size=5, max_size=60))
def test_consumer_protocol_never_gives_a_partition_two_owners(ops):
    """Members report what they own (a member applies what it is sent only on its 'apply' step); at no point do
    two members hold one partition, and once everyone heartbeats for a while every partition has one owner."""
    coord, clock, _ = coordinator()
    held: dict[str, set] = {}  # what each live member's client holds
    epochs: dict[str, int] = {}
    sent: dict[str, frozenset] = {}

    def check() -> None:
        seen: dict = {}
        for m, tps in held.items():
            for tp in tps:
                assert tp not in seen, f"{tp} owned by {seen[tp]} and {m}"
                seen[tp] = m

    def heartbeat(m: str) -> None:
        try:
            r = beat(coord, "g", m, epochs[m], sorted(held[m] | sent.get(m, frozenset())))
        except (UnknownMemberId, FencedMemberEpoch, GroupIdNotFound):
            held.pop(m), epochs.pop(m), sent.pop(m, None)  # lost: the client drops everything
            return
        epochs[m] = r.member_epoch
        if r.assignment is not None:
            sent[m] = r.assignment

    for op, i in ops:
        m = f"m{i}"
        if op == "join" and m not in held:
            r = coord.consumer_heartbeat("g", member_id=m, member_epoch=0, rebalance_timeout_ms=60_000,
                                         subscribed_topics=["t", "u"], session_timeout_ms=5000)
            held[m], epochs[m], sent[m] = set(), r.member_epoch, r.assignment
        elif op == "leave" and m in held:
            coord.consumer_heartbeat("g", member_id=m, member_epoch=-1)
            held.pop(m), epochs.pop(m), sent.pop(m, None)
        elif op == "beat" and m in held:
            heartbeat(m)
        elif op == "apply" and m in sent:
            held[m] = set(sent.pop(m))
        elif op == "expire":
            clock.advance(1.0, coord)
            alive = {d.member_id for d in coord.describe("g").members} if held else set()
            for gone in [m for m in held if m not in alive]:  # its session ended: Kafka counts it dead, and so
                held.pop(gone), epochs.pop(gone), sent.pop(gone, None)  # does the model (a live client rejoins)
        check()
    for _ in range(6):  # everyone applies and heartbeats: the group settles
        for m in list(held):
            if m in sent:
                held[m] = set(sent.pop(m))
                check()
            heartbeat(m)
            check()
    if held:
        assert set().union(*held.values()) == {TopicPartition("t", p) for p in range(4)} | \
            {TopicPartition("u", p) for p in range(2)}


def test_regex_subscription_follows_topics_created_and_deleted():
    """SubscribedTopicRegex (KIP-848): a full match in RE2 syntax against every topic, resolved again each metadata
    check, so a topic created or deleted later joins or leaves the assignment with a new group epoch; a pattern RE2
    refuses (Perl's lookahead, backreferences) is INVALID_REGULAR_EXPRESSION; the regex survives a restart."""
    clock, store = Clock(), DictStore()
    topics = {"rx-a": 2, "rx-b": 1, "rxa": 3, "other": 2}
    config = CoordinatorConfig(group_min_session_timeout_ms=100, metadata_check_interval_ms=1000)
    make = lambda: GroupCoordinator(  # noqa: E731
        partition_counts=lambda ts: {t: topics.get(t, 0) for t in ts}, topic_names=lambda: list(topics),
        store=store, clock=clock, config=config)
    coord = make()
    for bad in ["rx-(", "(?=rx)rx.*", r"(r)\1"]:
        with pytest.raises(InvalidRegularExpression):
            coord.consumer_heartbeat("g", member_id="m", member_epoch=0, rebalance_timeout_ms=1000,
                                     subscribed_regex=bad)
    with pytest.raises(InvalidRequest):  # neither names nor a regex
        coord.consumer_heartbeat("g", member_id="m", member_epoch=0, rebalance_timeout_ms=1000, subscribed_regex="")
    r = coord.consumer_heartbeat("g", member_id="m", member_epoch=0, rebalance_timeout_ms=1000,
                                 subscribed_regex="rx-.*")
    assert sorted(r.assignment) == [TopicPartition("rx-a", 0), TopicPartition("rx-a", 1), TopicPartition("rx-b", 0)]
    assert coord.describe("g").members[0].regex == "rx-.*"
    topics["rx-c"] = 1
    del topics["rx-b"]
    coord.refresh_metadata()  # not yet due: nothing re-read
    assert beat(coord, "g", "m", r.member_epoch, sorted(r.assignment)).assignment is None
    clock.advance(1.0)
    coord.refresh_metadata()
    revoke = beat(coord, "g", "m", r.member_epoch, sorted(r.assignment))  # first gives up rx-b, as KIP-848 does
    assert sorted(revoke.assignment) == [TopicPartition("rx-a", 0), TopicPartition("rx-a", 1)]
    again = beat(coord, "g", "m", revoke.member_epoch, sorted(revoke.assignment))
    assert again.member_epoch > r.member_epoch
    assert sorted(again.assignment) == [TopicPartition("rx-a", 0), TopicPartition("rx-a", 1),
                                        TopicPartition("rx-c", 0)]
    coord.persist()
    restored = make()
    assert restored.describe("g").members[0].regex == "rx-.*"
    # a second member with names only shares the group; the regex member switching to names drops the regex
    other = restored.consumer_heartbeat("g", member_id="n", member_epoch=0, rebalance_timeout_ms=1000,
                                        subscribed_topics=["other"])
    assert sorted(other.assignment) == [TopicPartition("other", 0), TopicPartition("other", 1)]
    restored.consumer_heartbeat("g", member_id="m", member_epoch=again.member_epoch, rebalance_timeout_ms=1000,
                                subscribed_topics=["rxa"], subscribed_regex="", owned=sorted(again.assignment))
    d = restored.describe("g")
    assert {m.member_id: m.regex for m in d.members} == {"m": None, "n": None}
    assert {tp.topic for m in d.members for tp in m.target} == {"rxa", "other"}


def test_encode_decode_assignment_round_trip():
    tps = [TopicPartition("b", 1), TopicPartition("a", 0), TopicPartition("a", 2)]
    assert decode_assignment(encode_assignment(tps)).partitions == tuple(sorted(tps))
    with pytest.raises(Exception) as e:
        decode_assignment(b"\x00\x00\x7f\xff\xff\xff")  # declares 2^31-1 topics in 0 bytes: refused, not allocated
    assert e.value.code == 42
