"""Every link in every REST v3 answer names a route that answers: a crawler starts at ``GET /v3/clusters``,
follows each ``self``, ``related`` and ``next`` it finds, breadth first, and every one must answer 200 with a
JSON body; between them the links reach every GET route the front serves under ``/v3``.

Fronts: one alone (broker 1, the Kafka listener's address), and two fronts on one root (``--node-id`` 1 and 2:
one broker each).  The data has what makes links go wrong: a group whose member has committed offsets for
some of its partitions only, a group with a member and no commit, a group with a space in its name and only
offsets, and ACLs of every pattern type in the auth file (the ACL search answers exactly them).
"""

from __future__ import annotations

import re
import uuid
from collections import deque
from urllib.parse import urlsplit

import httpx
import pytest

from front_process import Front, free_port, wait_for

ADMIN = "links-admin-secret"
AUTH = {
    "tokens": [{"principal": "User:admin", "token": ADMIN}, {"principal": "User:carol", "token": "carol-secret"}],
    "super_users": ["User:admin"],
    "acls": [
        {"principal": "User:carol", "resource_type": "Topic", "pattern_type": "Prefixed", "resource_name": "links-",
         "operations": ["Read", "Describe"]},
        {"principal": "User:carol", "resource_type": "Group", "resource_name": "*", "operation": "Read"},
        {"principal": "User:*", "permission": "Deny", "resource_type": "Topic", "resource_name": "secret",
         "operation": "All"},
        {"principal": "User:carol", "resource_type": "Cluster", "operation": "IdempotentWrite"},
    ],
}
ACL_BINDINGS = 5  # the auth file's ACLs, one binding per operation


def start(tmp_path, root: str, name: str, node_id: int | None) -> Front:
    work = tmp_path / name
    kafka = f"127.0.0.1:{free_port()}"
    args = ("--kafka-listener", kafka) + (("--node-id", str(node_id)) if node_id is not None else ())
    front = Front.with_auth(work, AUTH, args=args)
    front.root = root
    front.kafka = kafka
    return front.start()


@pytest.fixture(scope="module", params=["one front", "two fronts"])
def fronts(request, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("v3-links")
    root = str(tmp / "root")
    nodes = [None] if request.param == "one front" else [1, 2]
    started = [start(tmp, root, f"front-{n}", n) for n in nodes]

    def all_live() -> bool:  # a front sees another once it has read the other's membership record
        for f in started:
            with client(f) as c:
                cid = c.get("/v3/clusters").json()["data"][0]["cluster_id"]
                if len(c.get(f"/v3/clusters/{cid}/brokers").json()["data"]) != len(started):
                    return False
        return True

    wait_for(all_live, 60, "every front in every front's broker list")
    yield started
    for f in started:
        f.stop()


def client(front: Front) -> httpx.Client:
    return front.client(ADMIN)


def populate(fronts: list[Front]) -> dict:
    """A topic with records, three groups (see the module docstring); returns their names and the member ids.
    With several fronts, each partition is written through the front that leads it, once one does."""
    front = fronts[0]
    with client(front) as http:
        topic = f"links-{uuid.uuid4().hex[:6]}"
        assert http.post("/v1/topics", json={"name": topic, "partitions": 3}).status_code == 201
        cid = http.get("/v3/clusters").json()["data"][0]["cluster_id"]
        wait_for(lambda: all("leader" in p for p in http.get(
            f"/v3/clusters/{cid}/topics/{topic}/partitions").json()["data"]), 120, "partition leaders")
        for p in range(3):
            def written(p=p) -> bool:
                for f in fronts:
                    with client(f) as c:
                        r = c.post(f"/v1/topics/{topic}/records", json={"records": [{"value": "v", "partition": p}] * 4})
                    if r.status_code == 200:
                        return True
                    assert r.status_code == 503, r.text  # NOT_LEADER_OR_FOLLOWER: another front leads it
                return False

            wait_for(written, 60, f"partition {p} written")
        names = {"topic": topic, "committed": f"g-part-{uuid.uuid4().hex[:6]}",
                 "bare": f"g-bare-{uuid.uuid4().hex[:6]}", "spaced": f"g spaced {uuid.uuid4().hex[:4]}"}
        members, generations = {}, {}
        for key in ("committed", "bare"):
            r = http.post(f"/v1/groups/{names[key]}/members",
                          json={"topics": [topic], "client_id": f"links {key}", "session_timeout_ms": 120_000})
            assert r.status_code == 200, r.text
            assert len(r.json()["assignment"]) == 3
            members[key], generations[key] = r.json()["member_id"], r.json()["member_epoch"]
        r = http.post(f"/v1/groups/{names['committed']}/offsets",
                      json={"member_id": members["committed"], "generation_id": generations["committed"],
                            "offsets": [{"topic": topic, "partition": 0, "offset": 1}]})
        assert r.status_code in (200, 204), r.text
        r = http.post(f"/v1/groups/{names['spaced']}/offsets",
                      json={"offsets": [{"topic": topic, "partition": 2, "offset": 3}]})
        assert r.status_code in (200, 204), r.text
    return {**names, "members": members}


def links_in(body, base: str) -> set[str]:
    """Every ``self``, ``related`` and ``next`` URL in a JSON body that points into ``base``."""
    out: set[str] = set()

    def walk(v) -> None:
        if isinstance(v, dict):
            for k, x in v.items():
                if k in ("self", "related", "next") and isinstance(x, str):
                    out.add(x)
                else:
                    walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)

    walk(body)
    assert all(u.startswith(base) for u in out), sorted(u for u in out if not u.startswith(base))
    return out


def v3_get_routes(http: httpx.Client) -> dict[str, re.Pattern]:
    """The front's own GET routes under /v3 (its OpenAPI document), as patterns of a path."""
    paths = http.get("/openapi.json").json()["paths"]
    return {p: re.compile("^" + "[^/]+".join(re.escape(x) for x in re.split(r"\{[^}]+\}", p)) + "$")
            for p, ops in paths.items() if p.startswith("/v3") and "get" in ops}


def crawl(front: Front) -> tuple[dict[str, dict], set[str]]:
    """Follow every link from /v3/clusters; returns the answers by URL and the route templates reached."""
    with client(front) as http:
        routes = v3_get_routes(http)
        start_url = f"{front.url}/v3/clusters"
        seen, answers, queue = {start_url}, {}, deque([start_url])
        while queue:
            url = queue.popleft()
            r = http.get(url)
            assert r.status_code == 200, f"{url} -> {r.status_code} {r.text[:300]}"
            assert r.headers["content-type"].startswith("application/json"), url
            answers[url] = body = r.json()
            for link in links_in(body, f"{front.url}/v3/") - seen:
                seen.add(link)
                queue.append(link)
        reached = set()
        for url in answers:
            path = httpx.URL(url).path  # percent-decoded, as routes match
            matched = [t for t, rx in routes.items() if rx.match(path)]
            assert matched, f"{url} matches no v3 route"
            reached.add(min(matched, key=lambda t: t.count("{")))  # the most literal, as the router picks
    return answers, set(routes) - reached


def test_every_link_answers_and_reaches_every_route(fronts):
    data = populate(fronts)
    first = None
    for front in fronts:
        answers, unreached = crawl(front)
        by_self: dict[str, dict] = {}  # each resource once (from a list and from its own route)
        for body in answers.values():
            for item in body.get("data", [body]):
                by_self[item["metadata"]["self"]] = item
        by_kind: dict[str, list[dict]] = {}
        for item in by_self.values():
            by_kind.setdefault(item["kind"], []).append(item)
        if first is None:
            first = by_kind
            assert unreached == set(), unreached
        # one broker per front, at its Kafka listener's address
        brokers = {(b["broker_id"], b["host"], b["port"]) for b in by_kind["KafkaBroker"]}
        expected = {(1, "127.0.0.1", int(fronts[0].kafka.rsplit(":", 1)[1]))} if len(fronts) == 1 else \
            {(i + 1, "127.0.0.1", int(f.kafka.rsplit(":", 1)[1])) for i, f in enumerate(fronts)}
        assert brokers == expected
        # the ACLs in force, each once
        assert len(by_kind["KafkaAcl"]) == ACL_BINDINGS
        assert {a["operation"] for a in by_kind["KafkaAcl"]} >= {"READ", "DESCRIBE", "ALL", "IDEMPOTENT_WRITE"}
    # what the first front knows of the groups, as the links found it
    by_kind = first
    groups = {g["consumer_group_id"] for g in by_kind["KafkaConsumerGroup"]}
    assert {data["committed"], data["bare"], data["spaced"]} <= groups
    summaries = {s["consumer_group_id"]: s for s in by_kind["KafkaConsumerGroupLagSummary"]}
    assert summaries[data["bare"]]["max_lag"] == 0 and summaries[data["bare"]]["total_lag"] == 0
    assert summaries[data["committed"]]["total_lag"] == 3
    assert summaries[data["spaced"]]["total_lag"] == 1
    assignments = [a for a in by_kind["KafkaConsumerAssignment"] if a["consumer_group_id"] == data["committed"]]
    assert sorted(a["partition_id"] for a in assignments) == [0, 1, 2]
    lag_links = {a["partition_id"]: urlsplit(a["lag"]["related"]).path for a in assignments}
    assert lag_links[0].endswith(f"/lags/{data['topic']}/partitions/0") and lag_links[1].endswith("/lags")


def test_acl_search_filters_as_kafka(fronts):
    with client(fronts[0]) as http:
        cid = http.get("/v3/clusters").json()["data"][0]["cluster_id"]

        def search(**params) -> list[tuple]:
            r = http.get(f"/v3/clusters/{cid}/acls", params=params)
            assert r.status_code == 200, r.text
            return sorted((a["resource_type"], a["resource_name"], a["pattern_type"], a["operation"],
                           a["permission"]) for a in r.json()["data"])

        assert len(search()) == ACL_BINDINGS
        assert search(resource_type="TOPIC", pattern_type="PREFIXED") == [
            ("TOPIC", "links-", "PREFIXED", "DESCRIBE", "ALLOW"), ("TOPIC", "links-", "PREFIXED", "READ", "ALLOW")]
        # MATCH: the bindings that apply to one resource
        assert search(resource_type="TOPIC", resource_name="links-x", pattern_type="MATCH", operation="READ") == [
            ("TOPIC", "links-", "PREFIXED", "READ", "ALLOW")]
        assert search(resource_type="TOPIC", resource_name="secret", pattern_type="MATCH") == [
            ("TOPIC", "secret", "LITERAL", "ALL", "DENY")]
        assert search(permission="DENY", principal="User:*") == [("TOPIC", "secret", "LITERAL", "ALL", "DENY")]
        assert search(principal="User:nobody") == [] and search(host="10.0.0.1") == []
        r = http.get(f"/v3/clusters/{cid}/acls", params={"operation": "FLY"})
        assert r.status_code == 400 and r.json()["error_code"] == 400
    with fronts[0].client("carol-secret") as carol:  # Describe on the cluster is needed, as DescribeAcls
        r = carol.get(f"/v3/clusters/{cid}/acls")
        assert r.status_code == 403 and r.json()["error_code"] == 40301
