"""Auth: every operation with no token, a wrong token, a token lacking the ACL and a token with it.

One front with an auth file (local root): ``admin`` is a super user, ``alice``
holds the ACLs each operation needs (topics by prefix ``ok-``, group ``g-ok``,
IdempotentWrite on the cluster), ``bob`` is authenticated but holds none.
Refused requests write nothing.  The ACL semantics themselves (prefix/literal,
wildcards, deny-wins, implied Describe) are checked on :class:`lakelog.broker.authorizer.Authorizer`.
"""

from __future__ import annotations

import hashlib
import json
import uuid

import pytest

from front_process import Front

from lakelog.broker.authorizer import CLUSTER, GROUP, TOPIC, Authorizer, Principal
from lakelog.errors import InvalidConfig, SaslAuthenticationFailed, TopicAuthorizationFailed

TOKENS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
AUTH = {
    "tokens": [{"principal": "User:admin", "token": TOKENS["admin"]},
               {"principal": "User:alice", "token_sha256": hashlib.sha256(TOKENS["alice"].encode()).hexdigest()},
               {"principal": "User:bob", "token": TOKENS["bob"]}],
    "super_users": ["User:admin"],
    "acls": [
        {"principal": "User:alice", "resource_type": "Topic", "pattern_type": "Prefixed", "resource_name": "ok-",
         "operations": ["Create", "Describe", "Alter", "Delete", "Write", "Read"]},
        {"principal": "User:alice", "resource_type": "Group", "resource_name": "g-ok",
         "operations": ["Read", "Delete"]},
        {"principal": "User:alice", "resource_type": "Cluster", "operation": "IdempotentWrite"},
    ],
}


@pytest.fixture(scope="module")
def auth_front(tmp_path_factory):
    front = Front.with_auth(tmp_path_factory.mktemp("auth-front"), AUTH).start()
    yield front
    front.stop()


@pytest.fixture(scope="module")
def admin(auth_front):
    with auth_front.client(TOKENS["admin"]) as c:
        yield c


def make_topic(admin, name: str | None = None) -> str:
    name = name or f"ok-{uuid.uuid4().hex[:8]}"
    assert admin.post("/v1/topics", json={"name": name, "partitions": 1}).status_code == 201
    assert admin.post(f"/v1/topics/{name}/records", json={"records": [{"value": "x"}] * 3}).status_code == 200
    return name


# (operation, request(http, topic) -> response, success status, denial code when the ACL is missing;
#  None = the listing is filtered instead of refused)
OPERATIONS = [
    ("create_topic", lambda h, t: h.post("/v1/topics", json={"name": f"ok-new-{uuid.uuid4().hex[:6]}"}), 201, 29),
    ("list_topics", lambda h, t: h.get("/v1/topics"), 200, None),
    ("describe_topic", lambda h, t: h.get(f"/v1/topics/{t}"), 200, 29),
    ("alter_topic", lambda h, t: h.patch(f"/v1/topics/{t}", json={"configs": {"retention.ms": 1000}}), 200, 29),
    ("delete_records", lambda h, t: h.post(f"/v1/topics/{t}/partitions/0/delete-records",
                                           json={"before_offset": 1}), 200, 29),
    ("produce", lambda h, t: h.post(f"/v1/topics/{t}/records", json={"records": [{"value": "y"}]}), 200, 29),
    ("fetch", lambda h, t: h.get(f"/v1/topics/{t}/partitions/0/records", params={"offset": 1}), 200, 29),
    ("init_producer", lambda h, t: h.post("/v1/producers", json={}), 200, 31),
    ("commit_offsets", lambda h, t: h.post("/v1/groups/g-ok/offsets",
                                           json={"offsets": [{"topic": t, "partition": 0, "offset": 1}]}), 200, 30),
    ("fetch_offsets", lambda h, t: h.get("/v1/groups/g-ok/offsets"), 200, 30),
    ("list_groups", lambda h, t: h.get("/v1/groups"), 200, None),
    ("delete_group", lambda h, t: h.delete("/v1/groups/g-ok"), 200, 30),
    ("delete_topic", lambda h, t: h.delete(f"/v1/topics/{t}"), 204, 29),
]
CALLERS = ["no_token", "wrong_token", "lacking_acl", "with_acl"]


@pytest.mark.parametrize("caller", CALLERS)
@pytest.mark.parametrize("op,send,ok_status,denied_code", OPERATIONS, ids=[o[0] for o in OPERATIONS])
def test_auth_matrix(auth_front, admin, op, send, ok_status, denied_code, caller):
    topic = make_topic(admin)
    assert admin.post("/v1/groups/g-ok/offsets",
                      json={"offsets": [{"topic": topic, "partition": 0, "offset": 0}]}).status_code == 200
    before = admin.get(f"/v1/topics/{topic}").json()
    token = {"no_token": None, "wrong_token": "not-a-token", "lacking_acl": TOKENS["bob"],
             "with_acl": TOKENS["alice"]}[caller]
    with auth_front.client(token) as http:
        r = send(http, topic)
    if caller in ("no_token", "wrong_token"):
        assert r.status_code == 401, r.text
        assert r.json()["error_code"] == 58 and r.json()["error_name"] == "SASL_AUTHENTICATION_FAILED"
        assert r.headers["WWW-Authenticate"] == "Bearer"
    elif caller == "lacking_acl" and denied_code is not None:
        assert r.status_code == 403, r.text
        assert r.json()["error_code"] == denied_code
    elif caller == "lacking_acl":  # listings show only what the caller may Describe
        assert r.status_code == 200 and all(not v for v in r.json().values()), r.text
    else:
        assert r.status_code == ok_status, r.text
        if denied_code is None:
            listed = r.json().get("topics", r.json().get("groups"))
            assert topic in listed or "g-ok" in listed
        return
    after = admin.get(f"/v1/topics/{topic}").json()
    assert after == before  # a refused request changed nothing
    # this test's topic: the group also holds offsets that earlier tests committed on theirs (1 by commit_offsets)
    committed = admin.get("/v1/groups/g-ok/offsets").json()["offsets"]
    assert [c["offset"] for c in committed if c["topic"] == topic and c["partition"] == 0] == [0], committed


def test_alice_is_limited_to_her_prefix(auth_front, admin):
    other = make_topic(admin, f"other-{uuid.uuid4().hex[:6]}")
    with auth_front.client(TOKENS["alice"]) as http:
        r = http.post(f"/v1/topics/{other}/records", json={"records": [{"value": "no"}]})
        assert (r.status_code, r.json()["error_code"]) == (403, 29)
        assert other not in http.get("/v1/topics").json()["topics"]
        r = http.post("/v1/groups/g-other/offsets", json={"offsets": [{"topic": other, "partition": 0, "offset": 0}]})
        assert (r.status_code, r.json()["error_code"]) == (403, 30)
        assert http.get("/v1/health").status_code == 200  # health and metrics stay open
        assert http.get("/metrics").status_code == 200
    assert admin.get(f"/v1/topics/{other}").json()["partitions"][0]["high_watermark"] == 3


def test_acl_semantics(tmp_path):
    f = tmp_path / "auth.json"
    f.write_text(json.dumps({"tokens": [{"principal": "User:carol", "token": "c"}], "acls": [
        {"principal": "User:*", "operation": "Read", "resource_type": "topic", "resource_name": "*"},
        {"principal": "User:carol", "permission": "Deny", "operation": "All", "resource_type": "Topic",
         "pattern_type": "prefixed", "resource_name": "secret"},
        {"principal": "User:carol", "operation": "All", "resource_type": "Group", "resource_name": "cg"},
    ]}))
    authz = Authorizer.from_file(f)
    carol = authz.authenticate("Bearer c")
    assert carol == Principal("User:carol")
    assert authz.allowed(carol, "Read", TOPIC, "anything")  # wildcard principal and name
    assert authz.allowed(carol, "Describe", TOPIC, "anything")  # Read implies Describe
    assert not authz.allowed(carol, "Write", TOPIC, "anything")
    assert not authz.allowed(carol, "Read", TOPIC, "secret-plans")  # Deny wins over Allow
    assert authz.allowed(carol, "Delete", GROUP, "cg") and not authz.allowed(carol, "Read", GROUP, "cg2")
    assert not authz.allowed(carol, "IdempotentWrite", CLUSTER)
    with pytest.raises(TopicAuthorizationFailed):
        authz.authorize(carol, "Write", TOPIC, "anything")
    with pytest.raises(SaslAuthenticationFailed):
        authz.authenticate("Basic Y2Fyb2w6Yw==")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"acls": [{"principal": "User:x", "operation": "Fly", "resource_type": "Topic"}]}))
    with pytest.raises(InvalidConfig, match="operation"):
        Authorizer.from_file(bad)
