"""HTTP members on KIP-848's consumer protocol: join, heartbeat and reconcile, leave, describe, and every bad
input answered with Kafka's code. A refused request writes nothing: after each refused commit the group's
committed offsets are unchanged.
"""

from __future__ import annotations

import pytest

from front_process import new_topic


def join(http, group: str, topic: str, **body) -> dict:
    r = http.post(f"/v1/groups/{group}/members", json={"topics": [topic], "session_timeout_ms": 5000,
                                                       "rebalance_timeout_ms": 10_000, **body})
    assert r.status_code == 200, r.text
    return r.json()


def beat(http, group: str, m: dict, owned, **body) -> dict:
    r = http.post(f"/v1/groups/{group}/members/{m['member_id']}/heartbeat", json={
        "member_epoch": m["member_epoch"], "owned": [{"topic": t, "partition": p} for t, p in sorted(owned)], **body})
    assert r.status_code == 200, r.text
    return r.json()


def parts(body: dict) -> set | None:
    a = body["assignment"]
    return None if a is None else {(x["topic"], x["partition"]) for x in a}


def error(r, status: int, code: int) -> dict:
    assert r.status_code == status, r.text
    body = r.json()
    assert body["error_code"] == code, body
    return body


def committed(http, group: str) -> dict:
    return {(o["topic"], o["partition"]): o["offset"] for o in http.get(f"/v1/groups/{group}/offsets").json()["offsets"]}


def test_join_reconcile_describe_leave(http):
    """The first member gets everything; a second joins: the first is asked to give up half (its epoch stays
    until it reports them gone), the second gets them only after that report. No partition has two owners."""
    topic = new_topic(http, 4)
    group = f"g-{topic}"
    a = join(http, group, topic, client_id="one")
    mine = parts(a)
    assert a["member_epoch"] == 1 and mine == {(topic, p) for p in range(4)}
    assert a["heartbeat_interval_ms"] > 0
    a = beat(http, group, a, mine)
    assert a["member_epoch"] == 1 and a["assignment"] is None  # unchanged: not sent

    b = join(http, group, topic, client_id="two")
    assert b["member_epoch"] == 2 and parts(b) == set()  # a still holds everything
    a = beat(http, group, a, mine)
    keep = parts(a)
    assert a["member_epoch"] == 1 and len(keep) == 2  # revoke the other two first, still at epoch 1
    b = beat(http, group, b, set())
    assert parts(b) in (None, set())  # not released yet
    d = http.get(f"/v1/groups/{group}").json()
    assert (d["state"], d["type"], d["protocol"], d["generation"]) == ("Reconciling", "consumer", "uniform", 2)
    a = beat(http, group, a, keep)  # revoked: a moves to epoch 2
    assert a["member_epoch"] == 2
    b = beat(http, group, b, set())
    theirs = parts(b)
    assert theirs == {(topic, p) for p in range(4)} - keep and b["member_epoch"] == 2

    r = http.post(f"/v1/groups/{group}/offsets", json={"member_id": a["member_id"], "generation_id": 2,
                                                       "offsets": [{"topic": t, "partition": p, "offset": 0}
                                                                   for t, p in sorted(keep)]})
    assert r.status_code == 200, r.text
    d = http.get(f"/v1/groups/{group}").json()
    assert (d["state"], d["generation"]) == ("Stable", 2)
    assert {m["client_id"]: {(x["topic"], x["partition"]) for x in m["assignment"]} for m in d["members"]} == \
        {"one": keep, "two": theirs}
    assert {m["protocol"] for m in d["members"]} == {"consumer"}
    assert {(o["topic"], o["partition"]): (o["offset"], o["lag"]) for o in d["offsets"]} == {tp: (0, 0) for tp in keep}

    assert http.delete(f"/v1/groups/{group}/members/{b['member_id']}").status_code == 200
    error(http.delete(f"/v1/groups/{group}"), 409, 68)  # NON_EMPTY_GROUP: one member is left
    a = beat(http, group, a, keep)
    assert parts(a) == {(topic, p) for p in range(4)} and a["member_epoch"] == 3  # the leaver's partitions
    assert http.delete(f"/v1/groups/{group}/members/{a['member_id']}").status_code == 200
    assert http.get(f"/v1/groups/{group}").json()["state"] == "Empty"
    assert http.delete(f"/v1/groups/{group}").json()["deleted_offsets"] == 2
    error(http.get(f"/v1/groups/{group}"), 404, 69)
    error(http.delete(f"/v1/groups/{group}"), 404, 69)  # GROUP_ID_NOT_FOUND: nothing left to delete


@pytest.fixture
def member(http):
    topic = new_topic(http, 2)
    group = f"bad-{topic}"
    m = join(http, group, topic)
    r = http.post(f"/v1/groups/{group}/offsets", json={"member_id": m["member_id"], "generation_id": m["member_epoch"],
                                                       "offsets": [{"topic": topic, "partition": 0, "offset": 1}]})
    assert r.status_code == 200, r.text
    yield group, topic, m
    http.delete(f"/v1/groups/{group}/members/{m['member_id']}")


@pytest.mark.parametrize("case, status, code", [
    ("stale epoch", 409, 113),           # STALE_MEMBER_EPOCH
    ("future epoch", 409, 113),
    ("unknown member", 409, 25),         # UNKNOWN_MEMBER_ID
    ("no member while active", 409, 25),
    ("negative offset", 400, 42),        # INVALID_REQUEST
    ("negative partition", 400, 42),
    ("no such partition", 404, 3),       # UNKNOWN_TOPIC_OR_PARTITION
])
def test_bad_commits_are_refused_and_write_nothing(http, member, case, status, code):
    group, topic, m = member
    offsets = [{"topic": topic, "partition": 1, "offset": 5}]
    extra = {"member_id": m["member_id"], "generation_id": m["member_epoch"]}
    if case == "stale epoch":
        extra["generation_id"] = m["member_epoch"] - 1
    elif case == "future epoch":
        extra["generation_id"] = m["member_epoch"] + 1
    elif case == "unknown member":
        extra["member_id"] = "nobody-123"
    elif case == "no member while active":
        extra = {}
    elif case == "negative offset":
        offsets = [{"topic": topic, "partition": 1, "offset": -1}]
    elif case == "negative partition":
        offsets = [{"topic": topic, "partition": -1, "offset": 0}]
    elif case == "no such partition":
        offsets = [{"topic": topic, "partition": 1, "offset": 5}, {"topic": topic, "partition": 9, "offset": 0}]
    before = committed(http, group)
    error(http.post(f"/v1/groups/{group}/offsets", json={"offsets": offsets, **extra}), status, code)
    assert committed(http, group) == before == {(topic, 0): 1}


@pytest.mark.parametrize("body, code", [
    ({"server_assignor": "fifo"}, 112),             # UNSUPPORTED_ASSIGNOR
    ({"session_timeout_ms": 500}, 26),               # INVALID_SESSION_TIMEOUT: below group.min.session.timeout.ms
    ({"session_timeout_ms": 2_000_000}, 26),         # above group.max.session.timeout.ms
    ({"rebalance_timeout_ms": 0}, 42),
    ({"topics": []}, 42),
    ({"group_instance_id": ""}, 42),
])
def test_bad_joins(http, body, code):
    topic = new_topic(http, 1)
    r = http.post(f"/v1/groups/j-{topic}/members", json={"topics": [topic], "session_timeout_ms": 5000, **body})
    error(r, 400, code)
    error(http.get(f"/v1/groups/j-{topic}"), 404, 69)  # a refused join creates no group
    assert f"j-{topic}" not in http.get("/v1/groups").json()["groups"]


def test_range_assignor_and_the_group_choice(http):
    """Members name a server assignor; the group uses the one most members asked for."""
    topic = new_topic(http, 4)
    group = f"range-{topic}"
    a = join(http, group, topic, server_assignor="range")
    assert http.get(f"/v1/groups/{group}").json()["protocol"] == "range"
    b = join(http, group, topic)
    beat(http, group, a, parts(a))
    assert http.get(f"/v1/groups/{group}").json()["protocol"] == "range"
    for m in (a, b):
        http.delete(f"/v1/groups/{group}/members/{m['member_id']}")


def test_unknown_group_member_and_epochs(http):
    topic = new_topic(http, 1)
    body = error(http.get("/v1/groups/no-such-group-xyz"), 404, 69)
    assert body["error_name"] == "GROUP_ID_NOT_FOUND"
    error(http.post("/v1/groups/no-such-group-xyz/members/m-1/heartbeat", json={"member_epoch": 1}), 404, 69)
    group = f"hb-{topic}"
    m = join(http, group, topic)
    error(http.post(f"/v1/groups/{group}/members/nobody/heartbeat", json={"member_epoch": 1}), 409, 25)
    body = error(http.post(f"/v1/groups/{group}/members/{m['member_id']}/heartbeat",
                           json={"member_epoch": m["member_epoch"] + 5}), 409, 110)
    assert body["error_name"] == "FENCED_MEMBER_EPOCH"
    error(http.delete(f"/v1/groups/{group}/members/nobody"), 409, 25)
    assert http.delete(f"/v1/groups/{group}/members/{m['member_id']}").status_code == 200


def test_static_members(http):
    """KIP-345 on the consumer protocol: a second process with a held instance id gets UNRELEASED_INSTANCE_ID;
    after the holder leaves for now (epoch -2) a restart takes its place and partitions with no new epoch."""
    topic = new_topic(http, 2)
    group = f"static-{topic}"
    old = join(http, group, topic, group_instance_id="worker-1")
    body = error(http.post(f"/v1/groups/{group}/members", json={"topics": [topic], "group_instance_id": "worker-1"}),
                 409, 111)
    assert body["error_name"] == "UNRELEASED_INSTANCE_ID"
    r = http.delete(f"/v1/groups/{group}/members/{old['member_id']}", params={"group_instance_id": "worker-1"})
    assert r.status_code == 200, r.text
    new = join(http, group, topic, group_instance_id="worker-1")
    assert new["member_id"] != old["member_id"] and parts(new) == parts(old)
    assert http.get(f"/v1/groups/{group}").json()["generation"] == 1  # no rebalance
    body = error(http.post(f"/v1/groups/{group}/members/{old['member_id']}/heartbeat",
                           json={"member_epoch": 1, "group_instance_id": "worker-1"}), 409, 82)
    assert body["error_name"] == "FENCED_INSTANCE_ID"
    r = http.post(f"/v1/groups/{group}/offsets", json={"offsets": [{"topic": topic, "partition": 0, "offset": 1}],
                                                       "member_id": new["member_id"], "generation_id": 1,
                                                       "group_instance_id": "worker-1"})
    assert r.status_code == 200, r.text


def test_endpoints_are_in_the_openapi_document(http):
    paths = http.get("/openapi.json").json()["paths"]
    for path, method in [("/v1/groups/{group}/members", "post"), ("/v1/groups/{group}/members/{member_id}/heartbeat",
                                                                   "post"),
                         ("/v1/groups/{group}/members/{member_id}", "delete"), ("/v1/groups/{group}", "get"),
                         ("/v1/groups/{group}/offsets", "post"), ("/v1/groups", "get")]:
        assert method in paths.get(path, {}), f"{method.upper()} {path} is not documented"
    schemas = http.get("/openapi.json").json()["components"]["schemas"]
    assert {"member_id", "generation_id", "offsets"} <= set(schemas["OffsetCommit"]["properties"])
    assert {"member_epoch", "owned", "topics"} <= set(schemas["HeartbeatIn"]["properties"])


def test_list_groups_with_listgroups_filters(http):
    """GET /v1/groups filters as Kafka's ListGroups: by state (v4) and type (v5), case-insensitively, repeated or
    comma-separated; a group known only by its committed offsets is an Empty classic group, as in Kafka."""
    topic = new_topic(http, 1)
    live, simple = f"live-{topic}", f"simple-{topic}"
    join(http, live, topic)
    r = http.post(f"/v1/groups/{simple}/offsets", json={"offsets": [{"topic": topic, "partition": 0, "offset": 0}]})
    assert r.status_code == 200, r.text

    def listed(query: str) -> dict:
        r = http.get(f"/v1/groups{query}")
        assert r.status_code == 200, r.text
        return {g["group"]: (g["state"], g["type"]) for g in r.json()["listed"] if g["group"] in (live, simple)}

    assert listed("") == {live: ("Stable", "consumer"), simple: ("Empty", "classic")}
    assert listed("?state=stable") == {live: ("Stable", "consumer")}
    assert listed("?type=CLASSIC") == {simple: ("Empty", "classic")}
    assert listed("?state=Empty,Stable&type=consumer") == {live: ("Stable", "consumer")}
    assert listed("?state=Empty&state=Stable") == listed("")
    assert listed("?state=Dead") == {}
    names = http.get("/v1/groups?type=consumer").json()["groups"]
    assert live in names and simple not in names
