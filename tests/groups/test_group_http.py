"""The coordinator over HTTP: join / heartbeat / leave / describe, and every bad input answered with Kafka's code.

A refused request writes nothing: after each refused commit the group's committed offsets are unchanged.
"""

from __future__ import annotations

import threading

import pytest

from front_process import new_topic
from group_support import wait_until


def join(http, group: str, topic: str, **body) -> dict:
    r = http.post(f"/v1/groups/{group}/members", json={"topics": [topic], "session_timeout_ms": 5000,
                                                       "rebalance_timeout_ms": 10_000, **body})
    assert r.status_code == 200, r.text
    return r.json()


def error(r, status: int, code: int) -> dict:
    assert r.status_code == status, r.text
    body = r.json()
    assert body["error_code"] == code, body
    return body


def committed(http, group: str) -> dict:
    return {(o["topic"], o["partition"]): o["offset"] for o in http.get(f"/v1/groups/{group}/offsets").json()["offsets"]}


def test_join_heartbeat_describe_leave(http):
    topic = new_topic(http, 4)
    group = f"g-{topic}"
    first = join(http, group, topic, client_id="one")
    assert first["generation"] == 1 and first["leader"] == first["member_id"]
    assert sorted((a["topic"], a["partition"]) for a in first["assignment"]) == [(topic, p) for p in range(4)]
    hb = f"/v1/groups/{group}/members/{first['member_id']}/heartbeat"
    assert http.post(hb, json={"generation": 1}).status_code == 200

    second: dict = {}
    t = threading.Thread(target=lambda: second.update(join(http, group, topic, client_id="two")))
    t.start()  # blocks until the first member rejoins
    body = wait_until(lambda: (r := http.post(hb, json={"generation": 1})).status_code == 409 and r.json(),
                      what="REBALANCE_IN_PROGRESS on the first member's heartbeat")
    assert body["error_code"] == 27 and body["error_name"] == "REBALANCE_IN_PROGRESS"
    again = join(http, group, topic, member_id=first["member_id"], client_id="one")
    t.join(timeout=60)
    assert again["generation"] == second["generation"] == 2
    mine = {(a["topic"], a["partition"]) for a in again["assignment"]}
    theirs = {(a["topic"], a["partition"]) for a in second["assignment"]}
    assert mine | theirs == {(topic, p) for p in range(4)} and not mine & theirs and len(mine) == 2

    r = http.post(f"/v1/groups/{group}/offsets", json={"member_id": again["member_id"], "generation_id": 2,
                                                       "offsets": [{"topic": t_, "partition": p, "offset": 0}
                                                                   for t_, p in sorted(mine)]})
    assert r.status_code == 200, r.text
    d = http.get(f"/v1/groups/{group}").json()
    assert (d["state"], d["protocol"], d["generation"]) == ("Stable", "range", 2)
    assert {m["client_id"]: {(a["topic"], a["partition"]) for a in m["assignment"]} for m in d["members"]} == \
        {"one": mine, "two": theirs}
    assert {(o["topic"], o["partition"]): (o["offset"], o["lag"]) for o in d["offsets"]} == \
        {tp: (0, 0) for tp in mine}

    assert http.delete(f"/v1/groups/{group}/members/{second['member_id']}").status_code == 200
    error(http.delete(f"/v1/groups/{group}"), 409, 68)  # NON_EMPTY_GROUP: one member is left
    assert http.delete(f"/v1/groups/{group}/members/{again['member_id']}").status_code == 200
    assert http.get(f"/v1/groups/{group}").json()["state"] == "Empty"
    assert http.delete(f"/v1/groups/{group}").json()["deleted_offsets"] == 2
    error(http.get(f"/v1/groups/{group}"), 404, 69)


@pytest.fixture
def member(http):
    topic = new_topic(http, 2)
    group = f"bad-{topic}"
    m = join(http, group, topic)
    owned = {(a["topic"], a["partition"]) for a in m["assignment"]}
    other = new_topic(http, 1)  # a partition nobody in the group owns
    r = http.post(f"/v1/groups/{group}/offsets", json={"member_id": m["member_id"], "generation_id": m["generation"],
                                                       "offsets": [{"topic": topic, "partition": 0, "offset": 1}]})
    assert r.status_code == 200, r.text
    yield group, topic, other, m, owned
    http.delete(f"/v1/groups/{group}/members/{m['member_id']}")


def commit(http, group: str, offsets: list, **extra):
    return http.post(f"/v1/groups/{group}/offsets", json={"offsets": offsets, **extra})


@pytest.mark.parametrize("case, status, code", [
    ("unowned partition", 409, 22),      # ILLEGAL_GENERATION: not the member's in this generation
    ("stale generation", 409, 22),
    ("future generation", 409, 22),
    ("unknown member", 409, 25),         # UNKNOWN_MEMBER_ID
    ("no member while active", 409, 25),
    ("negative offset", 400, 42),        # INVALID_REQUEST
    ("negative partition", 400, 42),
])
def test_bad_commits_are_refused_and_write_nothing(http, member, case, status, code):
    group, topic, other, m, owned = member
    mid, gen = m["member_id"], m["generation"]
    offsets = [{"topic": topic, "partition": 1, "offset": 5}]
    extra = {"member_id": mid, "generation_id": gen}
    if case == "unowned partition":
        offsets = [{"topic": topic, "partition": 1, "offset": 5}, {"topic": other, "partition": 0, "offset": 0}]
    elif case == "stale generation":
        extra["generation_id"] = gen - 1
    elif case == "future generation":
        extra["generation_id"] = gen + 1
    elif case == "unknown member":
        extra["member_id"] = "nobody-123"
    elif case == "no member while active":
        extra = {}
    elif case == "negative offset":
        offsets = [{"topic": topic, "partition": 1, "offset": -1}]
    elif case == "negative partition":
        offsets = [{"topic": topic, "partition": -1, "offset": 0}]
    before = committed(http, group)
    error(commit(http, group, offsets, **extra), status, code)
    assert committed(http, group) == before == {(topic, 0): 1}


@pytest.mark.parametrize("body, code", [
    ({"protocols": ["fifo"]}, 23),                   # INCONSISTENT_GROUP_PROTOCOL: unknown strategy
    ({"protocols": []}, 42),
    ({"session_timeout_ms": 500}, 26),               # INVALID_SESSION_TIMEOUT: below group.min.session.timeout.ms
    ({"session_timeout_ms": 2_000_000}, 26),         # above group.max.session.timeout.ms
    ({"rebalance_timeout_ms": 0}, 42),
    ({"topics": []}, 42),
    ({"member_id": "never-joined"}, 25),
])
def test_bad_joins(http, body, code):
    topic = new_topic(http, 1)
    r = http.post(f"/v1/groups/j-{topic}/members", json={"topics": [topic], "session_timeout_ms": 5000, **body})
    error(r, 409 if code == 25 else 400, code)
    error(http.get(f"/v1/groups/j-{topic}"), 404, 69)  # a refused join creates no group
    assert f"j-{topic}" not in http.get("/v1/groups").json()["groups"]


def test_strategies_must_overlap(http):
    topic = new_topic(http, 1)
    group = f"mixed-{topic}"
    m = join(http, group, topic, protocols=["roundrobin"])
    error(http.post(f"/v1/groups/{group}/members", json={"topics": [topic], "protocols": ["sticky"],
                                                          "session_timeout_ms": 5000}), 400, 23)
    d = http.get(f"/v1/groups/{group}").json()
    assert [x["member_id"] for x in d["members"]] == [m["member_id"]] and d["protocol"] == "roundrobin"


def test_unknown_group_member_and_generation(http):
    topic = new_topic(http, 1)
    body = error(http.get("/v1/groups/no-such-group-xyz"), 404, 69)
    assert body["error_name"] == "GROUP_ID_NOT_FOUND"
    error(http.post("/v1/groups/no-such-group-xyz/members/m-1/heartbeat", json={"generation": 1}), 404, 69)
    group = f"hb-{topic}"
    m = join(http, group, topic)
    error(http.post(f"/v1/groups/{group}/members/nobody/heartbeat", json={"generation": m["generation"]}), 409, 25)
    error(http.post(f"/v1/groups/{group}/members/{m['member_id']}/heartbeat",
                    json={"generation": m["generation"] + 5}), 409, 22)
    error(http.delete(f"/v1/groups/{group}/members/nobody"), 409, 25)
    assert http.delete(f"/v1/groups/{group}/members/{m['member_id']}").status_code == 200


def test_static_member_fencing(http):
    topic = new_topic(http, 2)
    group = f"fence-{topic}"
    old = join(http, group, topic, group_instance_id="worker-1")
    new = join(http, group, topic, group_instance_id="worker-1")  # a restart with the same group.instance.id
    assert new["member_id"] != old["member_id"] and new["generation"] == old["generation"]
    assert new["assignment"] == old["assignment"]
    body = error(http.post(f"/v1/groups/{group}/members/{old['member_id']}/heartbeat",
                           json={"generation": old["generation"], "group_instance_id": "worker-1"}), 409, 82)
    assert body["error_name"] == "FENCED_INSTANCE_ID"
    # its commits too, as Kafka's OffsetCommit v7+ (which names the instance); without the instance id the old id
    # is just unknown; the new member commits
    commit = {"offsets": [{"topic": topic, "partition": 0, "offset": 1}], "member_id": old["member_id"],
              "generation_id": old["generation"]}
    body = error(http.post(f"/v1/groups/{group}/offsets", json={**commit, "group_instance_id": "worker-1"}), 409, 82)
    assert body["error_name"] == "FENCED_INSTANCE_ID"
    error(http.post(f"/v1/groups/{group}/offsets", json=commit), 409, 25)
    assert http.get(f"/v1/groups/{group}/offsets").json()["offsets"] == []
    r = http.post(f"/v1/groups/{group}/offsets", json={**commit, "member_id": new["member_id"],
                                                       "group_instance_id": "worker-1"})
    assert r.status_code == 200, r.text


def test_endpoints_are_in_the_openapi_document(http):
    paths = http.get("/openapi.json").json()["paths"]
    for path, method in [("/v1/groups/{group}/members", "post"), ("/v1/groups/{group}/members/{member_id}/heartbeat",
                                                                   "post"),
                         ("/v1/groups/{group}/members/{member_id}", "delete"), ("/v1/groups/{group}", "get"),
                         ("/v1/groups/{group}/offsets", "post"), ("/v1/groups", "get")]:
        assert method in paths.get(path, {}), f"{method.upper()} {path} is not documented"
    commit_body = http.get("/openapi.json").json()["components"]["schemas"]["OffsetCommit"]["properties"]
    assert {"member_id", "generation_id", "offsets"} <= set(commit_body)


def test_commit_while_rebalancing(http):
    """Before rejoining a pending rebalance a member may still commit what it owns (it does so before revoking);
    once it has rejoined and awaits its new assignment, its commits get REBALANCE_IN_PROGRESS (27)."""
    topic = new_topic(http, 2)
    group = f"rip-{topic}"
    results: dict = {}

    def join_in_thread(key: str, **body) -> threading.Thread:
        t = threading.Thread(target=lambda: results.update({key: join(http, group, topic, **body)}))
        t.start()
        return t

    def state() -> str:
        return http.get(f"/v1/groups/{group}").json()["state"]

    a = join(http, group, topic, client_id="a")
    tx = join_in_thread("x", client_id="x")  # x's join waits for a to rejoin
    wait_until(lambda: state() == "PreparingRebalance", what="the rebalance for x")
    a = join(http, group, topic, client_id="a", member_id=a["member_id"])
    tx.join(timeout=60)
    x = results["x"]
    assert a["generation"] == x["generation"] == 2

    threads = [join_in_thread("b", client_id="b")]  # a third member: a and x must rejoin
    wait_until(lambda: state() == "PreparingRebalance", what="the rebalance for b")
    body = {"member_id": a["member_id"], "generation_id": 2,
            "offsets": [{"topic": t["topic"], "partition": t["partition"], "offset": 0} for t in a["assignment"]]}
    assert http.post(f"/v1/groups/{group}/offsets", json=body).status_code == 200  # a has not rejoined yet
    threads.append(join_in_thread("a", client_id="a", member_id=a["member_id"]))
    wait_until(lambda: http.post(f"/v1/groups/{group}/offsets", json=body).status_code == 409,
               what="a's commit to be refused once it rejoined")
    error(http.post(f"/v1/groups/{group}/offsets", json=body), 409, 27)
    threads.append(join_in_thread("x", client_id="x", member_id=x["member_id"]))  # the round completes
    for t in threads:
        t.join(timeout=60)
    assert results["a"]["generation"] == results["b"]["generation"] == results["x"]["generation"] == 3
