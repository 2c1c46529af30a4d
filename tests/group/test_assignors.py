"""Tests for lakelog.group.assignors: Kafka's own assignor test cases, ported, plus properties.

Expected assignments in the tables come from Apache Kafka's tests (the test
class and method are in each case id): RangeAssignorTest, RoundRobinAssignorTest,
AbstractPartitionAssignorTest, AbstractStickyAssignorTest (run there for both
StickyAssignor and CooperativeStickyAssignor), StickyAssignorTest,
CooperativeStickyAssignorTest and the group coordinator's ClassicGroupTest.
Kafka's rack-aware variants are ported only in their rack-less form.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

# The repo has no packaging config yet and this module must not rely on a
# conftest, so make the checkout importable when run as plain `pytest`.
_ROOT = str(Path(__file__).resolve().parents[2])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

from lakelog.group.assignors import (  # noqa: E402
    ASSIGNORS,
    DEFAULT_GENERATION,
    MemberSubscription,
    TopicPartition,
    choose_protocol,
    cooperative_sticky_assign,
    get_assignor,
    range_assign,
    revoked_partitions,
    roundrobin_assign,
    sticky_assign,
)
from lakelog.errors import InconsistentGroupProtocol, KafkaError  # noqa: E402

GEN = 1  # AbstractStickyAssignorTest.generationId


def tp(topic: str, partition: int) -> TopicPartition:
    return TopicPartition(topic, partition)


def parts(spec: str) -> list[TopicPartition]:
    """'t1-0, t2-3' -> sorted partitions (Kafka's toSortedString format)."""
    if not spec:
        return []
    out = []
    for item in spec.split(","):
        topic, _, p = item.strip().rpartition("-")
        out.append(tp(topic, int(p)))
    return sorted(out)


def member(member_id, topics, owned="", generation=DEFAULT_GENERATION, instance=None) -> MemberSubscription:
    owned_parts = tuple(parts(owned)) if isinstance(owned, str) else tuple(owned)
    return MemberSubscription(member_id, tuple(topics), instance, owned_parts, generation)


def expect(**assignment: str) -> dict[str, list[TopicPartition]]:
    return {m: parts(spec) for m, spec in assignment.items()}


def rejoin(members, assignment, generation=GEN, drop=(), add=()):
    """Members rejoining with their current assignment as owned (buildSubscriptionV2Above)."""
    kept = [
        MemberSubscription(m.member_id, m.topics, m.group_instance_id, tuple(assignment[m.member_id]), generation)
        for m in members
        if m.member_id not in drop
    ]
    return kept + list(add)


def all_partitions(members, ppt) -> set[TopicPartition]:
    subscribed = {t for m in members for t in m.topics}
    return {tp(t, p) for t, n in ppt.items() if t in subscribed for p in range(max(n, 0))}


def assert_complete_and_valid(members, ppt, assignment):
    """Every member present with a sorted list; each subscribed partition owned once, by a subscriber."""
    assert list(assignment) == [m.member_id for m in members]
    subs = {m.member_id: set(m.topics) for m in members}
    owners = Counter()
    for member_id, tps in assignment.items():
        assert tps == sorted(tps)
        for x in tps:
            assert x.topic in subs[member_id], f"{x} given to {member_id}, not subscribed"
        owners.update(tps)
    assert set(owners) == all_partitions(members, ppt)
    assert all(n == 1 for n in owners.values()), owners


def verify_validity_and_balance(members, assignment):
    """AbstractStickyAssignorTest.verifyValidityAndBalance."""
    subs = {m.member_id: set(m.topics) for m in members}
    assert set(assignment) == set(subs)
    consumers = sorted(assignment)
    for i, consumer in enumerate(consumers):
        mine = assignment[consumer]
        assert all(x.topic in subs[consumer] for x in mine)
        for other in consumers[i + 1:]:
            theirs = assignment[other]
            assert not set(mine) & set(theirs)
            if abs(len(mine) - len(theirs)) <= 1:
                continue
            # If they share a topic, a partition could have moved to the less loaded one.
            assert not {x.topic for x in mine} & {x.topic for x in theirs}, (consumer, other, assignment)


def is_fully_balanced(assignment) -> bool:
    sizes = [len(v) for v in assignment.values()]
    return max(sizes) - min(sizes) <= 1


def changes_owner(members, assignment) -> set[TopicPartition]:
    """Partitions assigned to a member that did not own them while another member did."""
    claims: dict[TopicPartition, set[str]] = {}
    for m in members:
        for x in m.owned:
            claims.setdefault(x, set()).add(m.member_id)
    return {
        x
        for member_id, tps in assignment.items()
        for x in tps
        if member_id not in claims.get(x, ()) and claims.get(x)
    }


def verify_cooperative_validity(members, assignment) -> bool:
    """CooperativeStickyAssignorTest.verifyCooperativeValidity: True if partitions are being revoked."""
    added, revoked = set(), set()
    for m in members:
        owned, assigned = set(m.owned), set(assignment[m.member_id])
        added |= assigned - owned
        revoked |= owned - assigned
    assert not added & revoked, f"assigned while still being revoked: {added & revoked}"
    return bool(revoked)


def rebalance(assignor, members, ppt):
    """One rebalance as Kafka's sticky tests run it: the assignment, then the follow-up rebalances
    the cooperative assignor triggers (CooperativeStickyAssignorTest.verifyValidityAndBalance).

    Returns (first assignment, final members, final assignment).
    """
    first = assignor(members, ppt)
    assignment = first
    if assignor is cooperative_sticky_assign:
        rounds = 0
        while verify_cooperative_validity(members, assignment):
            members = rejoin(members, assignment)
            assignment = assignor(members, ppt)
            rounds += 1
            assert rounds <= 4
    verify_validity_and_balance(members, assignment)
    return first, members, assignment


STICKY_KINDS = [
    pytest.param(sticky_assign, id="sticky"),
    pytest.param(cooperative_sticky_assign, id="cooperative-sticky"),
]


# --------------------------------------------------------------------------
# Seed example (RangeAssignor / RoundRobinAssignor javadoc)
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "assignor, expected",
    [
        pytest.param(range_assign, expect(c0="t0-0, t0-1, t1-0, t1-1", c1="t0-2, t1-2"), id="RangeAssignor-javadoc"),
        pytest.param(roundrobin_assign, expect(c0="t0-0, t0-2, t1-1", c1="t0-1, t1-0, t1-2"), id="RoundRobinAssignor-javadoc"),
    ],
)
def test_seed_example(assignor, expected):
    members = [member("c0", ["t0", "t1"]), member("c1", ["t0", "t1"])]
    assert assignor(members, {"t0": 3, "t1": 3}) == expected


# --------------------------------------------------------------------------
# Range and round robin: single-round cases
# --------------------------------------------------------------------------

T1, T2 = "topic1", "topic2"
ALL3 = ["t1", "t2", "t3"]
RANGE_CASES = [
    pytest.param({}, [member("consumer1", [])], expect(consumer1=""), id="RangeAssignorTest.testOneConsumerNoTopic"),
    pytest.param({}, [member("consumer1", [T1])], expect(consumer1=""), id="RangeAssignorTest.testOneConsumerNonexistentTopic"),
    pytest.param(
        {T1: 3}, [member("consumer1", [T1])], expect(consumer1="topic1-0, topic1-1, topic1-2"),
        id="RangeAssignorTest.testOneConsumerOneTopic",
    ),
    pytest.param(
        {T1: 3, "other": 3}, [member("consumer1", [T1])], expect(consumer1="topic1-0, topic1-1, topic1-2"),
        id="RangeAssignorTest.testOnlyAssignsPartitionsFromSubscribedTopics",
    ),
    pytest.param(
        {T1: 1, T2: 2}, [member("consumer1", [T1, T2])], expect(consumer1="topic1-0, topic2-0, topic2-1"),
        id="RangeAssignorTest.testOneConsumerMultipleTopics",
    ),
    pytest.param(
        {T1: 1}, [member("consumer1", [T1]), member("consumer2", [T1])], expect(consumer1="topic1-0", consumer2=""),
        id="RangeAssignorTest.testTwoConsumersOneTopicOnePartition",
    ),
    pytest.param(
        {T1: 2}, [member("consumer1", [T1]), member("consumer2", [T1])],
        expect(consumer1="topic1-0", consumer2="topic1-1"),
        id="RangeAssignorTest.testTwoConsumersOneTopicTwoPartitions",
    ),
    pytest.param(
        {T1: 3, T2: 2},
        [member("consumer1", [T1]), member("consumer2", [T1, T2]), member("consumer3", [T1])],
        expect(consumer1="topic1-0", consumer2="topic1-1, topic2-0, topic2-1", consumer3="topic1-2"),
        id="RangeAssignorTest.testMultipleConsumersMixedTopics",
    ),
    pytest.param(
        {T1: 3, T2: 3}, [member("consumer1", [T1, T2]), member("consumer2", [T1, T2])],
        expect(consumer1="topic1-0, topic1-1, topic2-0, topic2-1", consumer2="topic1-2, topic2-2"),
        id="RangeAssignorTest.testTwoConsumersTwoTopicsSixPartitions",
    ),
    pytest.param(
        {T1: 3, T2: 3},
        [member("consumer-b", [T1, T2], instance="instance1"), member("consumer-a", [T1, T2], instance="instance2")],
        {"consumer-b": parts("topic1-0, topic1-1, topic2-0, topic2-1"), "consumer-a": parts("topic1-2, topic2-2")},
        id="RangeAssignorTest.testTwoStaticConsumersTwoTopicsSixPartitions",
    ),
    pytest.param(
        {T1: 3, T2: 3},
        [member("consumer-b", [T1, T2], instance="instance1"), member("consumer-a", [T1, T2])],
        {"consumer-b": parts("topic1-0, topic1-1, topic2-0, topic2-1"), "consumer-a": parts("topic1-2, topic2-2")},
        id="RangeAssignorTest.testOneStaticConsumerAndOneDynamicConsumerTwoTopicsSixPartitions",
    ),
    pytest.param(
        {"t1": 6, "t2": 7, "t3": 2},
        [member("consumer0", ALL3), member("consumer1", ALL3), member("consumer2", ALL3)],
        expect(consumer0="t1-0, t1-1, t2-0, t2-1, t2-2, t3-0", consumer1="t1-2, t1-3, t2-3, t2-4, t3-1",
               consumer2="t1-4, t1-5, t2-5, t2-6"),
        id="RangeAssignorTest.testRackAwareAssignmentWithUniformSubscription-nonRackAware",
    ),
    pytest.param(
        {"t1": 6, "t2": 7, "t3": 2},
        [member("consumer0", ALL3), member("consumer1", ALL3), member("consumer2", ["t1", "t3"])],
        expect(consumer0="t1-0, t1-1, t2-0, t2-1, t2-2, t2-3, t3-0", consumer1="t1-2, t1-3, t2-4, t2-5, t2-6, t3-1",
               consumer2="t1-4, t1-5"),
        id="RangeAssignorTest.testRackAwareAssignmentWithNonEqualSubscription-nonRackAware",
    ),
    pytest.param(
        {"t1": 5, "t2": 5, "t3": 5},
        [member("consumer0", ALL3), member("consumer1", ALL3), member("consumer2", ALL3)],
        expect(consumer0="t1-0, t1-1, t2-0, t2-1, t3-0, t3-1", consumer1="t1-2, t1-3, t2-2, t2-3, t3-2, t3-3",
               consumer2="t1-4, t2-4, t3-4"),
        id="RangeAssignorTest.testRackAwareAssignmentWithUniformPartitions-nonRackAware",
    ),
    pytest.param(
        {"t1": 5, "t2": 5, "t3": 5},
        [member("consumer0", ALL3), member("consumer1", ALL3), member("consumer2", ["t1", "t3"])],
        expect(consumer0="t1-0, t1-1, t2-0, t2-1, t2-2, t3-0, t3-1", consumer1="t1-2, t1-3, t2-3, t2-4, t3-2, t3-3",
               consumer2="t1-4, t3-4"),
        id="RangeAssignorTest.testRackAwareAssignmentWithUniformPartitionsNonEqualSubscription-nonRackAware",
    ),
    pytest.param(
        {"t1": 6, "t2": 6, "t3": 2, "t4": 2},
        [member("consumer0", ["t1", "t2"]), member("consumer1", ["t1", "t2"]),
         member("consumer2", ["t3", "t4"]), member("consumer3", ["t3", "t4"])],
        expect(consumer0="t1-0, t1-1, t1-2, t2-0, t2-1, t2-2", consumer1="t1-3, t1-4, t1-5, t2-3, t2-4, t2-5",
               consumer2="t3-0, t4-0", consumer3="t3-1, t4-1"),
        id="RangeAssignorTest.testRackAwareAssignmentWithCoPartitioning-nonRackAware-split",
    ),
    pytest.param(
        {"t1": 6, "t2": 6, "t3": 2, "t4": 2},
        [member(f"consumer{i}", ["t1", "t2", "t3", "t4"]) for i in range(4)],
        expect(consumer0="t1-0, t1-1, t2-0, t2-1, t3-0, t4-0", consumer1="t1-2, t1-3, t2-2, t2-3, t3-1, t4-1",
               consumer2="t1-4, t2-4", consumer3="t1-5, t2-5"),
        id="RangeAssignorTest.testRackAwareAssignmentWithCoPartitioning-nonRackAware-all",
    ),
    pytest.param(
        {"t1": 6, "t2": 6, "t3": 2, "t4": 2, "t5": 4, "t6": 4},
        [member(f"consumer{i}", [f"t{j}" for j in range(1, 10)]) for i in range(3)],
        expect(consumer0="t1-0, t1-1, t2-0, t2-1, t3-0, t4-0, t5-0, t5-1, t6-0, t6-1",
               consumer1="t1-2, t1-3, t2-2, t2-3, t3-1, t4-1, t5-2, t6-2",
               consumer2="t1-4, t1-5, t2-4, t2-5, t5-3, t6-3"),
        id="RangeAssignorTest.testCoPartitionedAssignmentWithSameSubscription-nonRackAware",
    ),
]


@pytest.mark.parametrize("ppt, members, expected", RANGE_CASES)
def test_range_kafka_cases(ppt, members, expected):
    assert range_assign(members, ppt) == expected


ROUNDROBIN_CASES = [
    pytest.param({}, [member("consumer", [])], expect(consumer=""), id="RoundRobinAssignorTest.testOneConsumerNoTopic"),
    pytest.param(
        {}, [member("consumer", ["topic"])], expect(consumer=""), id="RoundRobinAssignorTest.testOneConsumerNonexistentTopic"
    ),
    pytest.param(
        {"topic": 3}, [member("consumer", ["topic"])], expect(consumer="topic-0, topic-1, topic-2"),
        id="RoundRobinAssignorTest.testOneConsumerOneTopic",
    ),
    pytest.param(
        {"topic": 3, "other": 3}, [member("consumer", ["topic"])], expect(consumer="topic-0, topic-1, topic-2"),
        id="RoundRobinAssignorTest.testOnlyAssignsPartitionsFromSubscribedTopics",
    ),
    pytest.param(
        {T1: 1, T2: 2}, [member("consumer", [T1, T2])], expect(consumer="topic1-0, topic2-0, topic2-1"),
        id="RoundRobinAssignorTest.testOneConsumerMultipleTopics",
    ),
    pytest.param(
        {"topic": 1}, [member("consumer1", ["topic"]), member("consumer2", ["topic"])],
        expect(consumer1="topic-0", consumer2=""),
        id="RoundRobinAssignorTest.testTwoConsumersOneTopicOnePartition",
    ),
    pytest.param(
        {"topic": 2}, [member("consumer1", ["topic"]), member("consumer2", ["topic"])],
        expect(consumer1="topic-0", consumer2="topic-1"),
        id="RoundRobinAssignorTest.testTwoConsumersOneTopicTwoPartitions",
    ),
    pytest.param(
        {T1: 3, T2: 2},
        [member("consumer1", [T1]), member("consumer2", [T1, T2]), member("consumer3", [T1])],
        expect(consumer1="topic1-0", consumer2="topic1-1, topic2-0, topic2-1", consumer3="topic1-2"),
        id="RoundRobinAssignorTest.testMultipleConsumersMixedTopics",
    ),
    pytest.param(
        {T1: 3, T2: 3}, [member("consumer1", [T1, T2]), member("consumer2", [T1, T2])],
        expect(consumer1="topic1-0, topic1-2, topic2-1", consumer2="topic1-1, topic2-0, topic2-2"),
        id="RoundRobinAssignorTest.testTwoDynamicConsumersTwoTopicsSixPartitions",
    ),
    pytest.param(
        {T1: 3, T2: 3},
        [member("consumer-b", [T1, T2], instance="instance1"), member("consumer-a", [T1, T2], instance="instance2")],
        {"consumer-b": parts("topic1-0, topic1-2, topic2-1"), "consumer-a": parts("topic1-1, topic2-0, topic2-2")},
        id="RoundRobinAssignorTest.testTwoStaticConsumersTwoTopicsSixPartitions",
    ),
    pytest.param(
        {T1: 3, T2: 3},
        [member("consumer-b", [T1, T2], instance="instance1"), member("consumer-a", [T1, T2])],
        {"consumer-b": parts("topic1-0, topic1-2, topic2-1"), "consumer-a": parts("topic1-1, topic2-0, topic2-2")},
        id="RoundRobinAssignorTest.testOneStaticConsumerAndOneDynamicConsumerTwoTopicsSixPartitions",
    ),
    pytest.param(
        {"t0": 1, "t1": 2, "t2": 3},
        [member("C0", ["t0"]), member("C1", ["t0", "t1"]), member("C2", ["t0", "t1", "t2"])],
        expect(C0="t0-0", C1="t1-0", C2="t1-1, t2-0, t2-1, t2-2"),
        id="RoundRobinAssignor-javadoc-unequalSubscriptions",
    ),
]


@pytest.mark.parametrize("ppt, members, expected", ROUNDROBIN_CASES)
def test_roundrobin_kafka_cases(ppt, members, expected):
    assert roundrobin_assign(members, ppt) == expected


@pytest.mark.parametrize(
    "members, expected_order",
    [
        pytest.param(
            [member("a", ["t"]), member("b", ["t"]), member("c", ["t"])], ["a", "b", "c"],
            id="AbstractPartitionAssignorTest.testMemberInfoSortingWithoutGroupInstanceId",
        ),
        pytest.param(
            [member("a", ["t"], instance="y"), member("b", ["t"], instance="z"), member("c", ["t"], instance="x")],
            ["c", "a", "b"],
            id="AbstractPartitionAssignorTest.testMemberInfoSortingWithAllGroupInstanceId",
        ),
        pytest.param(
            [member("a", ["t"]), member("b", ["t"], instance="y"), member("c", ["t"], instance="x")],
            ["c", "b", "a"],
            id="AbstractPartitionAssignorTest.testMemberInfoSortingSomeGroupInstanceId",
        ),
    ],
)
@pytest.mark.parametrize("assignor", [range_assign, roundrobin_assign], ids=["range", "roundrobin"])
def test_member_order(assignor, members, expected_order):
    # With one partition per member, partition i goes to the i-th member in Kafka's member order.
    result = assignor(members, {"t": len(members)})
    assert [result[m] for m in expected_order] == [[tp("t", i)] for i in range(len(members))]


# --------------------------------------------------------------------------
# Range and round robin: static membership across rebalances
# --------------------------------------------------------------------------


def _static_members(topics):
    return [member(f"consumer{i}", topics, instance=f"instance{i}") for i in (1, 2, 3)]


@pytest.mark.parametrize(
    "assignor, ppt, expected",
    [
        pytest.param(
            range_assign, {T1: 5, T2: 4},
            expect(consumer1="topic1-0, topic1-1, topic2-0", consumer2="topic1-2, topic2-1",
                   consumer3="topic1-3, topic2-2", consumer4="topic1-4, topic2-3"),
            id="RangeAssignorTest.testStaticMemberRangeAssignmentPersistent",
        ),
        pytest.param(
            roundrobin_assign, {T1: 3, T2: 3},
            expect(consumer1="topic1-0, topic2-1", consumer2="topic1-1, topic2-2", consumer3="topic1-2",
                   consumer4="topic2-0"),
            id="RoundRobinAssignorTest.testStaticMemberAssignmentPersistent",
        ),
    ],
)
def test_static_members_keep_assignment_when_dynamic_member_replaced(assignor, ppt, expected):
    members = _static_members([T1, T2]) + [member("consumer4", [T1, T2])]
    assert assignor(members, ppt) == expected
    # Replace dynamic member 4 with a new dynamic member 5.
    members = members[:3] + [member("consumer5", [T1, T2])]
    expected = {**expected, "consumer5": expected["consumer4"]}
    del expected["consumer4"]
    assert assignor(members, ppt) == expected


@pytest.mark.parametrize(
    "assignor, ppt, expected_by_instance",
    [
        pytest.param(
            range_assign, {T1: 5, T2: 5},
            {"instance1": parts("topic1-0, topic1-1, topic2-0, topic2-1"),
             "instance2": parts("topic1-2, topic1-3, topic2-2, topic2-3"),
             "instance3": parts("topic1-4, topic2-4")},
            id="RangeAssignorTest.testStaticMemberRangeAssignmentPersistentAfterMemberIdChanges",
        ),
        pytest.param(
            roundrobin_assign, {T1: 3, T2: 3},
            {f"instance{i + 1}": [tp(T1, i), tp(T2, i)] for i in range(3)},
            id="RoundRobinAssignorTest.testStaticMemberAssignmentPersistentAfterMemberIdChanges",
        ),
    ],
)
def test_static_assignment_survives_member_id_changes(assignor, ppt, expected_by_instance):
    def by_instance(members):
        result = assignor(members, ppt)
        return {m.group_instance_id: result[m.member_id] for m in members}

    members = _static_members([T1, T2])
    assert by_instance(members) == expected_by_instance
    renamed = [
        member(new_id, [T1, T2], instance=m.group_instance_id)
        for new_id, m in zip(["consumer4", "consumer5", "consumer1"], members)
    ]
    assert by_instance(renamed) == expected_by_instance


# --------------------------------------------------------------------------
# Sticky and cooperative sticky: single-round cases
# --------------------------------------------------------------------------

TOPIC = "topic"
C1, C2, C3, C4 = "consumer1", "consumer2", "consumer3", "consumer4"

# (ppt, members, StickyAssignor's assignment, partitionsTransferringOwnership,
#  whether Kafka asserts the assignment after the cooperative follow-up rebalance).
STICKY_CASES = [
    pytest.param({}, [member("consumer", [])], expect(consumer=""), {}, False,
                 id="AbstractStickyAssignorTest.testOneConsumerNoTopic"),
    pytest.param({TOPIC: 0}, [member("consumer", [TOPIC])], expect(consumer=""), {}, False,
                 id="AbstractStickyAssignorTest.testOneConsumerNonexistentTopic"),
    pytest.param({TOPIC: 3}, [member("consumer", [TOPIC])], expect(consumer="topic-0, topic-1, topic-2"), {}, False,
                 id="AbstractStickyAssignorTest.testOneConsumerOneTopic"),
    pytest.param(
        {TOPIC: 2}, [member("consumer", [TOPIC], "topic-0, topic-1, other-0, other-1", GEN)],
        expect(consumer="topic-0, topic-1"), {}, False,
        id="AbstractStickyAssignorTest.testOnlyAssignsPartitionsFromSubscribedTopics",
    ),
    pytest.param({T1: 1, T2: 2}, [member("consumer", [T1, T2])], expect(consumer="topic1-0, topic2-0, topic2-1"), {},
                 False, id="AbstractStickyAssignorTest.testOneConsumerMultipleTopics"),
    pytest.param({TOPIC: 2}, [member(C1, [TOPIC]), member(C2, [TOPIC])],
                 expect(consumer1="topic-0", consumer2="topic-1"), {}, False,
                 id="AbstractStickyAssignorTest.testTwoConsumersOneTopicTwoPartitions"),
    pytest.param(
        {T1: 3, T2: 2}, [member(C1, [T1]), member(C2, [T1, T2]), member(C3, [T1])],
        expect(consumer1="topic1-0, topic1-2", consumer2="topic2-0, topic2-1", consumer3="topic1-1"), None, False,
        id="AbstractStickyAssignorTest.testMultipleConsumersMixedTopicSubscriptions",
    ),
    pytest.param(
        {T1: 3, T2: 3}, [member(C1, [T1, T2]), member(C2, [T1, T2])],
        expect(consumer1="topic1-0, topic1-2, topic2-1", consumer2="topic1-1, topic2-0, topic2-2"), {}, False,
        id="AbstractStickyAssignorTest.testTwoConsumersTwoTopicsSixPartitions",
    ),
    pytest.param(
        {T1: 2, T2: 3},
        [member(C1, [T1, T2], "topic1-0, topic2-1", GEN), member(C2, [T1, T2], "topic1-1, topic2-2", GEN)],
        expect(consumer1="topic1-0, topic2-0, topic2-1", consumer2="topic1-1, topic2-2"), {}, False,
        id="AbstractStickyAssignorTest.testConsumerOwningMinQuotaExpectedMaxQuota",
    ),
    pytest.param(
        {T1: 2, T2: 2},
        [member(C1, [T1, T2], "topic1-0, topic2-0", GEN), member(C2, [T1, T2], "topic1-1, topic2-1", GEN),
         member(C3, [T1, T2], "", GEN)],
        expect(consumer1="topic1-0", consumer2="topic1-1, topic2-1", consumer3="topic2-0"),
        {tp(T2, 0): C3}, True,
        id="AbstractStickyAssignorTest.testMaxQuotaConsumerMoreThanNumExpectedMaxCapacityMembers",
    ),
    pytest.param(
        {T1: 2, T2: 3},
        [member(C1, [T1, T2], "topic1-0", GEN), member(C2, [T1, T2], "topic1-1", GEN), member(C3, [T1, T2], "", GEN)],
        expect(consumer1="topic1-0, topic2-1", consumer2="topic1-1, topic2-2", consumer3="topic2-0"), {}, False,
        id="AbstractStickyAssignorTest.testAllConsumersAreUnderMinQuota",
    ),
    pytest.param(
        {TOPIC: 4},
        [member(C1, [TOPIC], "topic-0, topic-1", GEN), member(C2, [TOPIC], "topic-2", GEN), member(C3, [TOPIC], "", GEN)],
        expect(consumer1="topic-0, topic-1", consumer2="topic-2", consumer3="topic-3"), {}, False,
        id="AbstractStickyAssignorTest.testAllConsumersReachExpectedQuotaAndAreConsideredFilled",
    ),
    pytest.param(
        {TOPIC: 3, T2: 3},
        [member(C1, [TOPIC, T2], "topic-0, topic-2, topic2-1", 10),
         member(C2, [TOPIC, T2], "topic-0, topic-2, topic2-1", 9)],
        expect(consumer1="topic-0, topic-2, topic2-1", consumer2="topic-1, topic2-0, topic2-2"), {}, False,
        id="AbstractStickyAssignorTest.testOwnedPartitionsAreInvalidatedForConsumerWithStaleGeneration",
    ),
    pytest.param(
        {TOPIC: 3, T2: 3},
        [member(C1, [TOPIC, T2], "topic-0, topic-2, topic2-1", 10),
         member(C2, [TOPIC, T2], "topic-0, topic-2, topic2-1", DEFAULT_GENERATION)],
        expect(consumer1="topic-0, topic-2, topic2-1", consumer2="topic-1, topic2-0, topic2-2"), {}, False,
        id="AbstractStickyAssignorTest.testOwnedPartitionsAreInvalidatedForConsumerWithNoGeneration",
    ),
    pytest.param(
        {TOPIC: 3},
        [member(C1, [TOPIC], "topic-0, topic-1", GEN), member(C2, [TOPIC], "topic-0, topic-2", GEN),
         member(C3, [TOPIC], "", GEN)],
        expect(consumer1="topic-1", consumer2="topic-2", consumer3="topic-0"), {tp(TOPIC, 0): C3}, True,
        id="AbstractStickyAssignorTest.testPartitionsTransferringOwnershipIncludeThePartitionClaimedByMultipleConsumersInSameGeneration",
    ),
    pytest.param(
        {TOPIC: 3},
        [member(C1, [TOPIC], "topic-0, topic-1", GEN), member(C2, [TOPIC], "topic-0, topic-2", GEN),
         member(C3, [TOPIC], "", GEN)],
        expect(consumer1="topic-1", consumer2="topic-2", consumer3="topic-0"), {tp(TOPIC, 0): C3}, False,
        id="StickyAssignorTest.testAllConsumersHaveOwnedPartitionInvalidatedWhenClaimedByMultipleConsumersInSameGenerationWithEqualPartitionsPerConsumer",
    ),
    pytest.param(
        {TOPIC: 4},
        [member(C1, [TOPIC], "topic-0, topic-1", GEN), member(C2, [TOPIC], "topic-0, topic-2", GEN),
         member(C3, [TOPIC], "", GEN)],
        expect(consumer1="topic-1, topic-3", consumer2="topic-2", consumer3="topic-0"), {tp(TOPIC, 0): C3}, False,
        id="StickyAssignorTest.testAllConsumersHaveOwnedPartitionInvalidatedWhenClaimedByMultipleConsumersInSameGenerationWithUnequalPartitionsPerConsumer",
    ),
    pytest.param(
        {TOPIC: 3, T2: 3, "topic3": 3},
        [member(C1, [TOPIC, T2, "topic3"], "topic-0, topic2-0, topic3-0", 10),
         member(C2, [TOPIC, T2, "topic3"], "topic-1, topic2-1, topic3-1", 9),
         member(C3, [TOPIC, T2, "topic3"], "topic2-1, topic3-0, topic3-2", 8)],
        expect(consumer1="topic-0, topic2-0, topic3-0", consumer2="topic-1, topic2-1, topic3-1",
               consumer3="topic-2, topic2-2, topic3-2"), {}, False,
        id="AbstractStickyAssignorTest.testEnsurePartitionsAssignedToHighestGeneration",
    ),
    pytest.param(
        {TOPIC: 3, T2: 3},
        [member(C1, [TOPIC, T2], "topic-0, topic2-1, topic-1", 10),
         member(C2, [TOPIC, T2], "topic-0, topic2-1, topic2-2", 8)],
        expect(consumer1="topic-0, topic-1, topic2-1", consumer2="topic-2, topic2-0, topic2-2"), {}, False,
        id="AbstractStickyAssignorTest.testOwnedPartitionsAreInvalidatedForConsumerWithMultipleGeneration",
    ),
    pytest.param(
        {T1: 3},
        [member(C1, [T1], "topic1-0", GEN), member(C2, [T1], "topic1-1", GEN), member(C3, [T1], "", GEN)],
        expect(consumer1="topic1-0", consumer2="topic1-1", consumer3="topic1-2"), {}, False,
        id="StickyAssignorTest.testAssignorWithOldVersionSubscriptions",
    ),
    pytest.param(
        {"t1": 6, "t2": 7, "t3": 2},
        [member(f"consumer{i}", ALL3) for i in range(3)],
        expect(consumer0="t1-0, t1-3, t2-0, t2-3, t2-6", consumer1="t1-1, t1-4, t2-1, t2-4, t3-0",
               consumer2="t1-2, t1-5, t2-2, t2-5, t3-1"), {}, False,
        id="AbstractStickyAssignorTest.testRackAwareAssignmentWithUniformSubscription-nonRackAware",
    ),
    pytest.param(
        {"t1": 6, "t2": 7, "t3": 2},
        [member("consumer0", ALL3), member("consumer1", ALL3), member("consumer2", ["t1", "t3"])],
        expect(consumer0="t1-5, t2-0, t2-2, t2-4, t2-6", consumer1="t1-3, t2-1, t2-3, t2-5, t3-0",
               consumer2="t1-0, t1-1, t1-2, t1-4, t3-1"), None, False,
        id="AbstractStickyAssignorTest.testRackAwareAssignmentWithNonEqualSubscription-nonRackAware",
    ),
]


@pytest.mark.parametrize("ppt, members, expected, transferring, coop_final", STICKY_CASES)
def test_sticky_kafka_cases(ppt, members, expected, transferring, coop_final):
    result = sticky_assign(members, ppt)
    assert result == expected
    verify_validity_and_balance(members, result)
    assert is_fully_balanced(result)


@pytest.mark.parametrize("ppt, members, expected, transferring, coop_final", STICKY_CASES)
def test_cooperative_sticky_kafka_cases(ppt, members, expected, transferring, coop_final):
    # The cooperative target is the sticky one; partitions changing owner are withheld this round.
    withheld = transferring or {}
    first, _, final = rebalance(cooperative_sticky_assign, members, ppt)
    assert first == {m: [x for x in tps if withheld.get(x) != m] for m, tps in expected.items()}
    if coop_final:
        assert final == expected


@pytest.mark.parametrize("kind", STICKY_KINDS)
@pytest.mark.parametrize(
    "consumer2_topics, expected",
    [
        pytest.param(ALL3, ["t1-0, t1-3, t2-0, t2-3, t2-6", "t1-1, t1-4, t2-1, t2-4, t3-0", "t1-2, t1-5, t2-2, t2-5, t3-1"],
                     id="AbstractStickyAssignorTest.testRackAwareAssignmentWithUniformSubscription-nonRackAware"),
        pytest.param(["t1", "t3"],
                     ["t1-5, t2-0, t2-2, t2-4, t2-6", "t1-3, t2-1, t2-3, t2-5, t3-0", "t1-0, t1-1, t1-2, t1-4, t3-1"],
                     id="AbstractStickyAssignorTest.testRackAwareAssignmentWithNonEqualSubscription-nonRackAware"),
    ],
)
def test_sticky_keeps_an_owned_balanced_assignment(kind, consumer2_topics, expected):
    # verifyUniformSubscription / verifyNonEqualSubscription: owning the expected
    # assignment, the members get exactly it again.
    topics = [ALL3, ALL3, consumer2_topics]
    members = [member(f"consumer{i}", topics[i], expected[i]) for i in range(3)]
    assert kind(members, {"t1": 6, "t2": 7, "t3": 2}) == {f"consumer{i}": parts(expected[i]) for i in range(3)}


def test_cooperative_sticky_two_step_move():
    """AbstractStickyAssignorTest.testRackAwareAssignmentWithNonEqualSubscription, cooperative, racks all matching."""
    ppt = {"t1": 6, "t2": 7, "t3": 2}
    topics = [ALL3, ALL3, ["t1", "t3"]]
    owned = ["t1-0, t1-1, t1-2, t1-3, t1-4", "t1-5, t2-0, t2-1, t2-2, t2-3", "t2-4, t2-5, t2-6, t3-0, t3-1"]
    intermediate = ["t1-2, t1-3, t1-4", "t2-0, t2-1, t2-2, t2-3", "t3-0, t3-1"]
    final = ["t1-2, t1-3, t1-4, t2-4, t2-5", "t2-0, t2-1, t2-2, t2-3, t2-6", "t1-0, t1-1, t1-5, t3-0, t3-1"]
    members = [member(f"consumer{i}", topics[i], owned[i]) for i in range(3)]
    assert cooperative_sticky_assign(members, ppt) == {f"consumer{i}": parts(intermediate[i]) for i in range(3)}
    members = [member(f"consumer{i}", topics[i], intermediate[i]) for i in range(3)]
    assert cooperative_sticky_assign(members, ppt) == {f"consumer{i}": parts(final[i]) for i in range(3)}


# --------------------------------------------------------------------------
# Sticky and cooperative sticky: multi-round scenarios
# --------------------------------------------------------------------------


@pytest.mark.parametrize("kind", STICKY_KINDS)
def test_add_remove_consumer_one_topic(kind):
    """AbstractStickyAssignorTest.testAddRemoveConsumerOneTopic."""
    ppt = {TOPIC: 3}
    members = [member(C1, [TOPIC])]
    _, members, result = rebalance(kind, members, ppt)
    assert result == expect(consumer1="topic-0, topic-1, topic-2")

    members = rejoin(members, result, add=[member(C2, [TOPIC], "", GEN)])
    first, members, result = rebalance(kind, members, ppt)
    assert result == expect(consumer1="topic-0, topic-1", consumer2="topic-2")
    if kind is cooperative_sticky_assign:
        assert first[C2] == []  # topic-2 is revoked from consumer1 first

    members = rejoin(members, result, drop=[C1])
    _, members, result = rebalance(kind, members, ppt)
    assert result == expect(consumer2="topic-0, topic-1, topic-2")


@pytest.mark.parametrize("kind", STICKY_KINDS)
def test_add_remove_two_consumers_two_topics(kind):
    """AbstractStickyAssignorTest.testAddRemoveTwoConsumersTwoTopics."""
    ppt = {T1: 3, T2: 4}
    members = [member(C1, [T1, T2]), member(C2, [T1, T2])]
    _, members, result = rebalance(kind, members, ppt)
    assert result == expect(consumer1="topic1-0, topic1-2, topic2-1, topic2-3", consumer2="topic1-1, topic2-0, topic2-2")

    members = rejoin(members, result, add=[member(C3, [T1, T2], "", GEN), member(C4, [T1, T2], "", GEN)])
    assert sticky_assign(members, ppt) == expect(
        consumer1="topic1-0, topic2-1", consumer2="topic2-0, topic1-1", consumer3="topic1-2, topic2-3",
        consumer4="topic2-2")
    _, members, result = rebalance(kind, members, ppt)
    assert result == expect(
        consumer1="topic1-0, topic2-1", consumer2="topic2-0, topic1-1", consumer3="topic1-2, topic2-3",
        consumer4="topic2-2")

    members = rejoin(members, result, drop=[C1, C2])
    first = kind(members, ppt)
    assert first == expect(consumer3="topic1-2, topic2-3, topic1-0, topic2-1", consumer4="topic2-2, topic1-1, topic2-0")


@pytest.mark.parametrize("kind", STICKY_KINDS)
def test_topic_balance_after_reassignment(kind):
    """AbstractStickyAssignorTest.testTopicBalanceAfterReassignment."""
    ppt = {T1: 12, T2: 12}
    members = [member(C1, [T1, T2])]

    def per_topic(result, n):
        for tps in result.values():
            assert Counter(x.topic for x in tps) == {T1: n, T2: n}

    _, members, result = rebalance(kind, members, ppt)
    per_topic(result, 12)
    members = rejoin(members, result, add=[member(C2, [T1, T2], "", GEN)])
    _, members, result = rebalance(kind, members, ppt)
    per_topic(result, 6)
    members = rejoin(members, result, add=[member(C3, [T1, T2], "", GEN), member(C4, [T1, T2], "", GEN)])
    _, members, result = rebalance(kind, members, ppt)
    per_topic(result, 3)
    members = rejoin(members, result, drop=[C1, C2])
    first, members, result = rebalance(kind, members, ppt)
    assert first == result  # partitionsTransferringOwnership is empty
    per_topic(result, 6)


@pytest.mark.parametrize("kind", STICKY_KINDS)
def test_add_remove_topic_two_consumers(kind):
    """AbstractStickyAssignorTest.testAddRemoveTopicTwoConsumers."""
    ppt = {TOPIC: 3}
    members = [member(C1, [TOPIC]), member(C2, [TOPIC])]
    _, members, round1 = rebalance(kind, members, ppt)
    assert sorted(len(v) for v in round1.values()) == [1, 2]

    ppt = {TOPIC: 3, T2: 3}
    members = [member(m.member_id, [TOPIC, T2], round1[m.member_id], GEN) for m in members]
    first, members, round2 = rebalance(kind, members, ppt)
    assert first == round2
    assert all(len(v) == 3 and set(round1[m]) <= set(v) for m, v in round2.items())

    ppt = {T2: 3}
    members = [member(m.member_id, [T2], round2[m.member_id], GEN) for m in members]
    first, members, round3 = rebalance(kind, members, ppt)
    assert first == round3
    assert sorted(len(v) for v in round3.values()) == [1, 2]
    assert all(set(v) <= set(round2[m]) for m, v in round3.items())


@pytest.mark.parametrize("kind", STICKY_KINDS)
def test_stickiness(kind):
    """AbstractStickyAssignorTest.testStickiness."""
    ppt = {T1: 3}
    members = [member(c, [T1]) for c in (C1, C2, C3, C4)]
    _, members, result = rebalance(kind, members, ppt)
    assert all(len(v) <= 1 for v in result.values())
    before = dict(result)
    # removing the potential group leader
    members = rejoin(members, result, drop=[C1])
    first, members, result = rebalance(kind, members, ppt)
    assert first == result
    for consumer, tps in result.items():
        assert len(tps) == 1
        assert set(before[consumer]) <= set(tps), f"stickiness not honoured for {consumer}"


def _two_way_moves(before, after) -> bool:
    """AbstractStickyAssignor.isSticky, in reverse: did partitions of one topic move both ways between two members?"""
    owner = {x: m for m, tps in before.items() for x in tps}
    moves = {(x.topic, owner[x], m) for m, tps in after.items() for x in tps if owner.get(x, m) != m and owner[x] in after}
    return any((topic, dst, src) in moves for topic, src, dst in moves)


@pytest.mark.parametrize("kind", STICKY_KINDS)
def test_reassignment_after_one_consumer_leaves(kind):
    """AbstractStickyAssignorTest.testReassignmentAfterOneConsumerLeaves."""
    ppt = {f"t{i:02d}": i for i in range(1, 20)}
    members = [member(f"c{i:02d}", [f"t{j:02d}" for j in range(1, i + 1)]) for i in range(1, 20)]
    _, members, before = rebalance(kind, members, ppt)
    # Kafka removes "consumer10", a name its consumers (c01..c19) no longer use; remove c10 as intended.
    members = rejoin(members, before, drop=["c10"])
    first, _, _ = rebalance(kind, members, ppt)
    assert not _two_way_moves(before, first)


@pytest.mark.parametrize("kind", STICKY_KINDS)
def test_reassignment_after_one_consumer_added(kind):
    """AbstractStickyAssignorTest.testReassignmentAfterOneConsumerAdded (the newcomer owns nothing)."""
    ppt = {"topic": 20}
    members = [member(f"c{i:02d}", ["topic"]) for i in range(1, 10)]
    first, members, result = rebalance(kind, members, ppt)
    assert first == result
    members = members + [member("c10", ["topic"])]
    first, members, result = rebalance(kind, members, ppt)
    assert first == result  # the members joined without owned partitions: nothing to revoke


@pytest.mark.parametrize("kind", STICKY_KINDS)
def test_same_subscriptions(kind):
    """AbstractStickyAssignorTest.testSameSubscriptions."""
    ppt = {f"t{i:02d}": i for i in range(1, 15)}
    members = [member(f"c{i}", list(ppt)) for i in range(1, 9)]
    _, members, result = rebalance(kind, members, ppt)
    members = rejoin(members, result, drop=["c5"])
    first, members, result = rebalance(kind, members, ppt)
    assert first == result


@pytest.mark.parametrize("kind", STICKY_KINDS)
def test_poor_round_robin_assignment_scenario(kind):
    """AbstractStickyAssignorTest.testPoorRoundRobinAssignmentScenario."""
    ppt = {f"topic{i}": i % 2 + 1 for i in range(1, 6)}
    every = [f"topic{i}" for i in range(1, 6)]
    odd = ["topic1", "topic3", "topic5"]
    members = [member(C1, every), member(C2, odd), member(C3, odd), member(C4, every)]
    rebalance(kind, members, ppt)


@pytest.mark.parametrize("kind", STICKY_KINDS)
def test_new_subscription(kind):
    """AbstractStickyAssignorTest.testNewSubscription."""
    ppt = {f"t{i}": 1 for i in range(1, 5)}
    topics = [[f"t{j}" for j in range(i, 3 * i - 1)] for i in range(3)]
    members = [member(f"c{i}", topics[i]) for i in range(3)]
    _, members, _ = rebalance(kind, members, ppt)
    # consumer c0 adds t1 to its subscription (Kafka mutates the subscription in place)
    members = [MemberSubscription(m.member_id, m.topics + (("t1",) if m.member_id == "c0" else ()),
                                  owned=m.owned, generation=m.generation) for m in members]
    rebalance(kind, members, ppt)


@pytest.mark.parametrize("kind", STICKY_KINDS)
def test_move_existing_assignments(kind):
    """AbstractStickyAssignorTest.testMoveExistingAssignments."""
    ppt = {f"topic{i}": 1 for i in range(1, 7)}
    members = [
        member(C1, ["topic1", "topic2"], "topic1-0", GEN),
        member(C2, ["topic1", "topic2", "topic3", "topic4"], "topic2-0, topic3-0", GEN),
        member(C3, ["topic2", "topic3", "topic4", "topic5", "topic6"], "topic4-0, topic5-0, topic6-0", GEN),
    ]
    rebalance(kind, members, ppt)


@pytest.mark.parametrize("kind", STICKY_KINDS)
def test_assignment_updated_for_deleted_topic(kind):
    """AbstractStickyAssignorTest.testAssignmentUpdatedForDeletedTopic."""
    result = kind([member("consumer", [T1, T2, "topic3"])], {T1: 1, "topic3": 100})
    assert list(result) == ["consumer"] and len(result["consumer"]) == 101


@pytest.mark.parametrize("kind", STICKY_KINDS)
def test_no_exception_when_only_subscribed_topic_deleted(kind):
    """AbstractStickyAssignorTest.testNoExceptionThrownWhenOnlySubscribedTopicDeleted."""
    result = kind([member("consumer", [TOPIC])], {TOPIC: 3})
    assert kind(rejoin([member("consumer", [TOPIC])], result), {}) == {"consumer": []}


@pytest.mark.parametrize("kind", STICKY_KINDS)
def test_subscription_not_equal_and_same_partition_claimed_in_three_generations(kind):
    """AbstractStickyAssignorTest.testSubscriptionNotEqualAndAssignSamePartitionWith3Generation."""
    ppt = {TOPIC: 6, T1: 1}
    for g1, g2, g3 in [(1, 2, 3), (1, 3, 2), (2, 1, 3), (2, 3, 1), (3, 1, 2), (3, 2, 1)]:
        members = [
            member(C1, [TOPIC], "topic-0, topic-2", g1),
            member(C2, [TOPIC], "topic-1, topic-2, topic-3", g2),
            member(C3, [TOPIC], "topic-2, topic-4, topic-5", g3),
            member(C4, [T1], "topic1-0", 2),
        ]
        result = kind(members, ppt)
        flat = [x for tps in result.values() for x in tps]
        assert len(flat) == len(set(flat))
        assert all(1 <= len(tps) <= 2 for tps in result.values())


@pytest.mark.parametrize("kind", STICKY_KINDS)
@pytest.mark.parametrize("all_equal", [True, False], ids=["equalSubscriptions", "unequalSubscriptions"])
def test_assignment_with_multiple_generations_1(kind, all_equal):
    """StickyAssignorTest.testAssignmentWithMultipleGenerations1."""
    every = [TOPIC, T2]
    c2_topics = every if all_equal else [TOPIC]
    ppt = {TOPIC: 6, T2: 6}
    members = [member(C1, every), member(C2, c2_topics), member(C3, every)]
    r1 = kind(members, ppt)
    assert [len(r1[c]) for c in (C1, C2, C3)] == [4, 4, 4]
    verify_validity_and_balance(members, r1)

    members = [member(C1, every, r1[C1], GEN), member(C2, c2_topics, r1[C2], GEN)]
    r2 = sticky_assign(members, ppt)
    assert len(r2[C1]) == 6 and len(r2[C2]) == 6
    if all_equal:
        assert set(r1[C1]) <= set(r2[C1])
    assert set(r1[C2]) <= set(r2[C2])
    assert set(r2[C2]) & set(r1[C3])
    verify_validity_and_balance(members, r2)

    members = [member(C2, c2_topics, r2[C2], 2), member(C3, every, r1[C3], 1)]
    r3 = sticky_assign(members, ppt)
    assert len(r3[C2]) == 6 and len(r3[C3]) == 6
    assert not set(r3[C2]) & set(r3[C3])
    verify_validity_and_balance(members, r3)


@pytest.mark.parametrize("all_equal", [True, False], ids=["equalSubscriptions", "unequalSubscriptions"])
def test_assignment_with_multiple_generations_2(all_equal):
    """StickyAssignorTest.testAssignmentWithMultipleGenerations2."""
    every = [TOPIC, T2, "topic3"]
    c1_topics = every if all_equal else [TOPIC]
    c3_topics = every if all_equal else [TOPIC, T2]
    ppt = {TOPIC: 4, T2: 4, "topic3": 4}
    r1 = sticky_assign([member(C1, c1_topics), member(C2, every), member(C3, c3_topics)], ppt)
    assert [len(r1[c]) for c in (C1, C2, C3)] == [4, 4, 4]

    r2 = sticky_assign([member(C2, every, r1[C2], 1)], ppt)
    assert len(r2[C2]) == 12 and set(r1[C2]) <= set(r2[C2])

    members = [member(C1, c1_topics, r1[C1], 1), member(C2, every, r2[C2], 2), member(C3, c3_topics, r1[C3], 1)]
    r3 = sticky_assign(members, ppt)
    assert [len(r3[c]) for c in (C1, C2, C3)] == [4, 4, 4]
    verify_validity_and_balance(members, r3)


@pytest.mark.parametrize("all_equal", [True, False], ids=["equalSubscriptions", "unequalSubscriptions"])
def test_assignment_with_conflicting_previous_generations(all_equal):
    """StickyAssignorTest.testAssignmentWithConflictingPreviousGenerations."""
    every = [TOPIC, T2, "topic3"]
    c1_topics = every if all_equal else [TOPIC]
    c2_topics = every if all_equal else [TOPIC, T2]
    c1_owned = "topic-0, topic-1, topic-2, topic2-2, topic2-3, topic3-0" if all_equal else "topic-0, topic-1, topic-2, topic-3"
    c2_owned = "topic-0, topic-1, topic2-0, topic2-1, topic2-2, topic2-3"
    c3_owned = "topic-2, topic-3, topic3-0, topic3-1, topic3-2, topic3-3"
    members = [member(C1, c1_topics, c1_owned, 1), member(C2, c2_topics, c2_owned, 2), member(C3, every, c3_owned, 2)]
    result = sticky_assign(members, {TOPIC: 4, T2: 4, "topic3": 4})
    assert [len(result[c]) for c in (C1, C2, C3)] == [4, 4, 4]
    assert set(result[C2]) <= set(parts(c2_owned))
    assert set(result[C3]) <= set(parts(c3_owned))
    verify_validity_and_balance(members, result)


def test_schema_backward_compatibility():
    """StickyAssignorTest.testSchemaBackwardCompatibility (old-schema user data carries no generation)."""
    c1_owned, c2_owned = "topic-0, topic-2", "topic-1"
    members = [member(C1, [TOPIC], c1_owned, 1), member(C2, [TOPIC], c2_owned, DEFAULT_GENERATION), member(C3, [TOPIC])]
    result = sticky_assign(members, {TOPIC: 3})
    assert [len(result[c]) for c in (C1, C2, C3)] == [1, 1, 1]
    assert set(result[C1]) <= set(parts(c1_owned)) and set(result[C2]) <= set(parts(c2_owned))


def test_no_reassignment_on_current_members():
    """AbstractStickyAssignorTest.testNoReassignmentOnCurrentMembers."""
    every = [TOPIC, T2, "topic3", T1]
    members = [
        member(C1, every, "", DEFAULT_GENERATION),
        member(C2, every, "topic-0, topic2-0, topic1-0", 9),
        member(C3, every, "topic3-2, topic2-2, topic1-1", 8),
        member(C4, every, "topic3-1, topic-1, topic-2", 7),
    ]
    for kind in (sticky_assign, cooperative_sticky_assign):
        result = kind(members, {TOPIC: 3, T1: 3, T2: 3, "topic3": 3})
        assert result[C1] == parts("topic1-2, topic2-1, topic3-0")
        assert is_fully_balanced(result)


@pytest.mark.parametrize("kind", STICKY_KINDS)
def test_partition_not_moved_back_to_old_owner_that_unsubscribed(kind):
    # Found by random search.  consumer c3 owned t0-1 in an older generation but
    # now subscribes only to t2; Kafka's general path would move t0-1 back to
    # it to balance (AbstractStickyAssignor.performReassignments does not check
    # the subscription), an invalid assignment.
    members = [
        member("c0", ["t0", "t2"], "t2-1", 2),
        member("c1", ["t2", "t0"], "t2-0", 2),
        member("c2", ["t1", "t0", "t2"], "", 3),
        member("c3", ["t2"], "t0-1", 1),
    ]
    ppt = {"t0": 2, "t1": 1, "t2": 2}
    result = kind(members, ppt)
    assert all(x.topic == "t2" for x in result["c3"])
    if kind is sticky_assign:
        assert_complete_and_valid(members, ppt, result)
    rebalance(kind, members, ppt)


# --------------------------------------------------------------------------
# Strategy lookup and protocol selection
# --------------------------------------------------------------------------


def test_assignors_registry():
    assert list(ASSIGNORS) == ["range", "roundrobin", "sticky", "cooperative-sticky"]
    for name, fn in ASSIGNORS.items():
        assert get_assignor(name) is fn


@pytest.mark.parametrize("name", ["rangee", "", "Range", "org.apache.kafka.clients.consumer.RangeAssignor", None])
def test_get_assignor_rejects_unknown_strategy(name):
    with pytest.raises(InconsistentGroupProtocol) as info:
        get_assignor(name)
    assert isinstance(info.value, KafkaError) and info.value.code == 23
    assert repr(name) in info.value.message
    for valid in ASSIGNORS:
        assert valid in info.value.message


@pytest.mark.parametrize(
    "preferences, expected",
    [
        pytest.param([["range", "roundrobin"]], {"range"}, id="ClassicGroupTest.testSelectProtocol-oneMember"),
        pytest.param([["range", "roundrobin"], ["roundrobin", "range"]], {"range", "roundrobin"},
                     id="ClassicGroupTest.testSelectProtocol-tie"),
        pytest.param([["range", "roundrobin"], ["roundrobin", "range"], ["roundrobin", "range"]], {"roundrobin"},
                     id="ClassicGroupTest.testSelectProtocol-majority"),
        pytest.param([["range", "roundrobin"], ["roundrobin", "blah"]], {"roundrobin"},
                     id="ClassicGroupTest.testSelectProtocolChoosesCompatibleProtocol"),
        pytest.param([["cooperative-sticky", "range"], ["cooperative-sticky", "range"], ["range"]], {"range"},
                     id="onlyCommonStrategyIsCandidate"),
    ],
)
def test_choose_protocol(preferences, expected):
    assert choose_protocol(preferences) in expected
    assert choose_protocol(preferences) == choose_protocol(preferences)


@pytest.mark.parametrize(
    "preferences",
    [
        pytest.param([["range"], ["roundrobin"]], id="disjoint"),
        pytest.param([["range", "sticky"], []], id="memberWithoutStrategies"),
    ],
)
def test_choose_protocol_without_shared_strategy(preferences):
    with pytest.raises(InconsistentGroupProtocol):
        choose_protocol(preferences)


def test_choose_protocol_empty_group():
    """ClassicGroupTest.testSelectProtocolRaisesIfNoMembers."""
    with pytest.raises(ValueError):
        choose_protocol([])


@given(st.lists(st.lists(st.sampled_from(list(ASSIGNORS) + ["blah"]), min_size=1, max_size=5, unique=True),
                min_size=1, max_size=6))
@settings(max_examples=100, deadline=None)
def test_choose_protocol_properties(preferences):
    common = set(preferences[0]).intersection(*preferences[1:])
    if not common:
        with pytest.raises(InconsistentGroupProtocol):
            choose_protocol(preferences)
        return
    chosen = choose_protocol(preferences)
    assert chosen in common
    votes = Counter(next(p for p in prefs if p in common) for prefs in preferences)
    assert votes[chosen] == max(votes.values())


def test_revoked_partitions():
    previous = expect(a="t-0, t-1", b="t-2", gone="t-3")
    new = expect(a="t-1, t-3", b="t-2, t-0", fresh="u-0")
    assert revoked_partitions(previous, new) == {"a": parts("t-0"), "b": [], "gone": parts("t-3"), "fresh": []}


# --------------------------------------------------------------------------
# Properties
# --------------------------------------------------------------------------

TOPICS = ["t0", "t1", "t2", "t3"]
MEMBER_IDS = ["c0", "c1", "c2", "c3", "c4", "c5", "consumer-a", "m"]


@st.composite
def groups(draw, same_subscriptions=False, unique_owners=False, max_members=6):
    """(members, partitions_per_topic) with random subscriptions, static ids and previous ownership."""
    ppt = draw(st.dictionaries(st.sampled_from(TOPICS + ["unsubscribed"]), st.integers(0, 6), max_size=5))
    ids = draw(st.lists(st.sampled_from(MEMBER_IDS), min_size=1, max_size=max_members, unique=True))
    common = draw(st.lists(st.sampled_from(TOPICS), max_size=4, unique=True))
    existing = [tp(t, p) for t, n in sorted(ppt.items()) for p in range(n)]
    # Some stale claims: a deleted topic and a partition number that does not exist.
    universe = existing + [tp("deleted", 0), tp("t0", 9)]
    owner_of = draw(st.lists(st.integers(-1, len(ids) - 1), min_size=len(universe), max_size=len(universe)))
    instances = draw(st.lists(st.sampled_from(["i0", "i1", "i2", "i3", "i4", "i5", "i6", "i7"]),
                              min_size=len(ids), max_size=len(ids), unique=True))
    members = []
    for i, member_id in enumerate(ids):
        if same_subscriptions:
            topics = draw(st.permutations(common))
        else:
            topics = draw(st.lists(st.sampled_from(TOPICS), max_size=4, unique=True))
        if unique_owners:
            owned = [x for x, o in zip(universe, owner_of) if o == i]
        else:
            owned = draw(st.lists(st.sampled_from(universe), max_size=8, unique=True)) if universe else []
        static = draw(st.booleans())
        generation = draw(st.sampled_from([DEFAULT_GENERATION, 1, 2, 3]))
        members.append(MemberSubscription(member_id, tuple(topics), instances[i] if static else None,
                                          tuple(draw(st.permutations(owned))), generation))
    return members, ppt


PROPS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
EAGER = [range_assign, roundrobin_assign, sticky_assign]


@given(groups(), st.sampled_from(EAGER))
@PROPS
def test_every_subscribed_partition_has_exactly_one_subscribed_owner(group, assignor):
    members, ppt = group
    result = assignor(members, ppt)
    assert_complete_and_valid(members, ppt, result)
    assert result == assignor(members, ppt)  # deterministic
    for m in members:
        if not m.topics:
            assert result[m.member_id] == []


@given(groups())
@PROPS
def test_cooperative_never_hands_over_a_partition_still_owned_elsewhere(group):
    members, ppt = group
    target = sticky_assign(members, ppt)
    result = cooperative_sticky_assign(members, ppt)
    assert list(result) == list(target)
    for member_id, tps in result.items():
        assert tps == sorted(tps) and set(tps) <= set(target[member_id])
    moving = changes_owner(members, target)
    assert not moving & {x for tps in result.values() for x in tps}
    assert result == cooperative_sticky_assign(members, ppt)


@given(groups(unique_owners=True))
@PROPS
def test_cooperative_withholds_exactly_the_partitions_changing_owner(group):
    members, ppt = group
    target = sticky_assign(members, ppt)
    moving = changes_owner(members, target)
    expected = {m: [x for x in tps if x not in moving] for m, tps in target.items()}
    assert cooperative_sticky_assign(members, ppt) == expected


@given(groups())
@PROPS
def test_range_balance_per_topic(group):
    members, ppt = group
    result = range_assign(members, ppt)
    order = sorted(members, key=lambda m: (m.group_instance_id is None, m.group_instance_id or m.member_id, m.member_id))
    for topic, n in ppt.items():
        subscribers = [m.member_id for m in order if topic in m.topics]
        if not subscribers or n <= 0:
            continue
        got = [[x.partition for x in result[s] if x.topic == topic] for s in subscribers]
        # Contiguous ranges in member order, sizes n // C with the first n % C one larger.
        base, extra = divmod(n, len(subscribers))
        assert [len(g) for g in got] == [base + (i < extra) for i in range(len(subscribers))]
        assert [p for g in got for p in g] == list(range(n))


@given(groups(same_subscriptions=True), st.sampled_from([roundrobin_assign, sticky_assign]))
@PROPS
def test_balanced_when_subscriptions_are_equal(group, assignor):
    members, ppt = group
    assert is_fully_balanced(assignor(members, ppt))


@given(groups(same_subscriptions=True, unique_owners=True))
@PROPS
def test_sticky_keeps_the_most_previous_partitions_possible(group):
    members, ppt = group
    result = sticky_assign(members, ppt)
    valid = {x for x in all_partitions(members, ppt)}
    owned = {m.member_id: set(m.owned) & valid for m in members}
    total = len(valid)
    min_quota, over = divmod(total, len(members))
    kept = {m: len(owned[m] & set(result[m])) for m in owned}
    for m in owned:
        assert kept[m] >= min(len(owned[m]), min_quota)
    # Optimal: each member keeps up to min_quota, and the members owning more
    # keep one extra while slots above min_quota remain.
    best = sum(min(len(o), min_quota) for o in owned.values()) + min(
        over, sum(1 for o in owned.values() if len(o) > min_quota))
    assert sum(kept.values()) == best


@given(groups(), st.sampled_from([sticky_assign, cooperative_sticky_assign]))
@PROPS
def test_sticky_is_stable_once_settled(group, assignor):
    members, ppt = group
    _, members, settled = rebalance(assignor, members, ppt)
    assert assignor(rejoin(members, settled), ppt) == settled


@given(groups(), st.sampled_from([sticky_assign, cooperative_sticky_assign]))
@PROPS
def test_sticky_ignores_order_of_owned_partitions(group, assignor):
    members, ppt = group
    reversed_owned = [MemberSubscription(m.member_id, m.topics, m.group_instance_id, m.owned[::-1], m.generation)
                      for m in members]
    assert assignor(reversed_owned, ppt) == assignor(members, ppt)


@given(groups(max_members=6), st.data(), st.sampled_from([sticky_assign, cooperative_sticky_assign]))
@PROPS
def test_reassignment_with_random_subscriptions_and_changes(group, data, assignor):
    """AbstractStickyAssignorTest.testReassignmentWithRandomSubscriptionsAndChanges (smaller groups)."""
    members, ppt = group
    members = [MemberSubscription(m.member_id, m.topics, m.group_instance_id) for m in members]
    _, members, before = rebalance(assignor, members, ppt)
    assert_complete_and_valid(members, ppt, before)
    resubscribed = [
        MemberSubscription(m.member_id, tuple(data.draw(st.lists(st.sampled_from(TOPICS), max_size=4, unique=True))),
                           m.group_instance_id, tuple(before[m.member_id]), GEN)
        for m in members
    ]
    first, final_members, after = rebalance(assignor, resubscribed, ppt)
    assert_complete_and_valid(final_members, ppt, after)
    assert not _two_way_moves(before, first)
