"""Client quota entities, validation, describe filters and Kafka's precedence (lakelog.quota.client_quota)."""

from __future__ import annotations

import pytest

from lakelog.errors import InvalidRequest, UnsupportedVersion
from lakelog.quota.client_quota import Component, altered, check_alteration, entity_of, matching, resolve

U, C = "user", "client-id"


def e(*pairs):
    return entity_of(pairs)


QUOTAS = {
    e((U, "alice"), (C, "app")): {"producer_byte_rate": 1.0},
    e((U, "alice"), (C, None)): {"producer_byte_rate": 2.0},
    e((U, "alice")): {"producer_byte_rate": 3.0, "consumer_byte_rate": 30.0},
    e((U, None), (C, "app")): {"producer_byte_rate": 4.0},
    e((U, None), (C, None)): {"producer_byte_rate": 5.0},
    e((U, None)): {"producer_byte_rate": 6.0},
    e((C, "app")): {"producer_byte_rate": 7.0},
    e((C, None)): {"producer_byte_rate": 8.0, "request_percentage": 50.0},
}


@pytest.mark.parametrize("drop,user,client,expected", [
    ([], "alice", "app", (1.0, ("alice", "app"))),
    ([0], "alice", "app", (2.0, ("alice", "app"))),
    ([0, 1], "alice", "app", (3.0, ("alice", ""))),
    ([0, 1, 2], "alice", "app", (4.0, ("alice", "app"))),
    ([0, 1, 2, 3], "alice", "app", (5.0, ("alice", "app"))),
    ([0, 1, 2, 3, 4], "alice", "app", (6.0, ("alice", ""))),
    ([0, 1, 2, 3, 4, 5], "alice", "app", (7.0, ("", "app"))),
    ([0, 1, 2, 3, 4, 5, 6], "alice", "app", (8.0, ("", "app"))),
    ([0, 1, 2, 3, 4, 5, 6, 7], "alice", "app", (None, ("", "app"))),
    ([], "bob", "other", (5.0, ("bob", "other"))),  # each default-quota user has a sensor of its own
])
def test_precedence_is_kafkas(drop, user, client, expected):
    quotas = {k: v for i, (k, v) in enumerate(QUOTAS.items()) if i not in drop}
    assert resolve(quotas, "producer_byte_rate", user, client) == expected


@pytest.mark.parametrize("pairs,message", [
    ([], "Invalid empty client quota entity"),
    ([(U, "a"), (U, "b")], "duplicate entity entry user"),
    ([("group", "g")], "Unhandled client quota entity type: group"),
    ([(U, "")], "Empty user not supported"),
    ([("ip", "1.2.3.4"), (U, "a")], "IP entity shouldnot be combined"),
    ([("ip", "nope")], "nope is not a valid IP"),
])
def test_entities_kafka_refuses(pairs, message):
    with pytest.raises(InvalidRequest) as err:
        entity_of(pairs)
    assert message in err.value.message


@pytest.mark.parametrize("ops,message", [
    ([("producer_byte_rate", 0.0)], "Quota producer_byte_rate must be greater than 0"),
    ([("producer_byte_rate", 1.5)], "producer_byte_rate cannot be a fractional value."),
    ([("connection_creation_rate", 1.0)], "Invalid configuration key connection_creation_rate"),
    ([("request_percentage", 1.0), ("request_percentage", 2.0)], "Duplicate quota key request_percentage"),
])
def test_alterations_kafka_refuses(ops, message):
    with pytest.raises(InvalidRequest) as err:
        check_alteration(e((U, "a")), ops)
    assert message in err.value.message


def test_alter_sets_and_removes():
    q = altered({}, e((U, "a")), check_alteration(e((U, "a")), [("request_percentage", 12.5)]))
    assert q == {e((U, "a")): {"request_percentage": 12.5}}
    assert altered(q, e((U, "a")), {"request_percentage": None}) == {}


@pytest.mark.parametrize("components,strict,found", [
    ([Component(U, 0, "alice")], False, 3),
    ([Component(U, 0, "alice")], True, 1),
    ([Component(U, 1)], False, 3),
    ([Component(U, 2)], True, 2),
    ([Component(C, 0, "app")], False, 3),
    ([], False, 8),
    ([], True, 0),
])
def test_describe_filters(components, strict, found):
    assert len(matching(QUOTAS, components, strict)) == found


@pytest.mark.parametrize("components,error", [
    ([Component(U, 0)], InvalidRequest),
    ([Component(U, 1, "x")], InvalidRequest),
    ([Component(U, 2), Component(U, 2)], InvalidRequest),
    ([Component("group", 2)], UnsupportedVersion),
    ([Component("ip", 2), Component(U, 2)], InvalidRequest),
    ([Component(U, 5)], InvalidRequest),
])
def test_describe_filters_kafka_refuses(components, error):
    with pytest.raises(error):
        matching(QUOTAS, components, False)
