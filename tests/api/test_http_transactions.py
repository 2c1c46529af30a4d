"""Transactions over HTTP (``/v1/transactions``) against a real front: what a reader sees of committed, aborted,
open, fenced and timed-out transactions, offsets sent to a transaction, retries, errors and ACLs."""

from __future__ import annotations

import hashlib
import time
import uuid

import pytest

from front_process import Front, new_topic

ISOLATION_LEVELS = ("read_uncommitted", "read_committed")


def tx_id() -> str:
    return f"tx-{uuid.uuid4().hex[:10]}"


def init(http, tid: str, **body) -> tuple[int, int]:
    r = http.post(f"/v1/transactions/{tid}/init", json=body)
    assert r.status_code == 200, r.text
    assert r.json()["transactional_id"] == tid
    return r.json()["producer_id"], r.json()["producer_epoch"]


def produce(http, tid: str, topic: str, pid: int, epoch: int, batches: list[tuple[int, int, list[str]]]):
    """``batches``: (partition, base_sequence, values)."""
    body = {"producer_id": pid, "producer_epoch": epoch, "batches": [
        {"partition": p, "base_sequence": seq, "records": [{"key": f"k-{v}", "value": v} for v in values]}
        for p, seq, values in batches]}
    return http.post(f"/v1/transactions/{tid}/topics/{topic}/records", json=body)


def staged(http, tid, topic, pid, epoch, batches) -> list[dict]:
    r = produce(http, tid, topic, pid, epoch, batches)
    assert r.status_code == 200, r.text
    results = r.json()["results"]
    assert all(x["error_code"] == 0 and x["base_offset"] == -1 for x in results), results  # offsets come at commit
    return results


def end(http, tid: str, pid: int, epoch: int, outcome: str):
    return http.post(f"/v1/transactions/{tid}/{outcome}", json={"producer_id": pid, "producer_epoch": epoch})


def fetch(http, topic: str, partition: int, isolation_level: str = "read_uncommitted") -> dict:
    r = http.get(f"/v1/topics/{topic}/partitions/{partition}/records",
                 params={"offset": 0, "max_records": 10000, "isolation_level": isolation_level})
    assert r.status_code == 200, r.text
    body = r.json()
    assert [x["offset"] for x in body["records"]] == list(range(len(body["records"])))  # contiguous from 0
    assert body["last_stable_offset"] == body["high_watermark"]
    return body


def values(http, topic: str, partition: int) -> list[str]:
    """The partition's values, the same at both isolation levels."""
    seen = [[x["value"] for x in fetch(http, topic, partition, level)["records"]] for level in ISOLATION_LEVELS]
    assert seen[0] == seen[1]
    return seen[0]


def committed(http, group: str, topic: str) -> dict[int, int]:
    r = http.get(f"/v1/groups/{group}/offsets", params={"topic": topic})
    assert r.status_code == 200, r.text
    return {x["partition"]: x["offset"] for x in r.json()["offsets"]}


def assert_error(r, status: int, name: str) -> dict:
    assert r.status_code == status, r.text
    body = r.json()
    assert body["error_name"] == name and isinstance(body["error_code"], int)
    assert "Traceback" not in body["message"] and "/work/" not in body["message"] and ".py" not in body["message"]
    return body


def test_commit_makes_records_of_two_topics_visible_with_contiguous_offsets(http):
    a, b = new_topic(http), new_topic(http)
    assert http.post(f"/v1/topics/{a}/records", json={"records": [{"value": "before", "partition": 0}]}) \
        .status_code == 200
    tid = tx_id()
    pid, epoch = init(http, tid)
    staged(http, tid, a, pid, epoch, [(0, 0, ["a0", "a1"]), (1, 0, ["a2"])])
    staged(http, tid, b, pid, epoch, [(0, 0, ["b0"]), (1, 0, ["b1", "b2", "b3"])])
    staged(http, tid, a, pid, epoch, [(0, 2, ["a3"])])
    state = http.get(f"/v1/transactions/{tid}").json()
    assert state["state"] == "Ongoing"
    assert {(p["topic"], p["partition"]) for p in state["partitions"]} == {(a, 0), (a, 1), (b, 0), (b, 1)}
    assert values(http, a, 0) == ["before"] and values(http, b, 1) == []
    assert end(http, tid, pid, epoch, "commit").status_code == 204
    assert values(http, a, 0) == ["before", "a0", "a1", "a3"]
    assert values(http, a, 1) == ["a2"]
    assert values(http, b, 0) == ["b0"]
    assert values(http, b, 1) == ["b1", "b2", "b3"]
    recs = fetch(http, a, 0)["records"]
    assert [r["key"] for r in recs[1:]] == ["k-a0", "k-a1", "k-a3"] and recs[1]["producer_id"] == pid
    assert http.get(f"/v1/transactions/{tid}").json()["state"] == "CompleteCommit"
    # the next transaction of the same producer appends after the first
    staged(http, tid, a, pid, epoch, [(1, 1, ["a4"])])
    assert end(http, tid, pid, epoch, "commit").status_code == 204
    assert values(http, a, 1) == ["a2", "a4"]


def test_aborted_transaction_leaves_nothing(http):
    topic = new_topic(http)
    tid = tx_id()
    pid, epoch = init(http, tid)
    staged(http, tid, topic, pid, epoch, [(0, 0, ["x", "y"]), (1, 0, ["z"])])
    assert end(http, tid, pid, epoch, "abort").status_code == 204
    assert values(http, topic, 0) == [] and values(http, topic, 1) == []
    assert http.get(f"/v1/transactions/{tid}").json()["state"] == "CompleteAbort"
    # a retried abort is answered again; a commit after it has no transaction to commit
    assert end(http, tid, pid, epoch, "abort").status_code == 204
    assert_error(end(http, tid, pid, epoch, "commit"), 409, "INVALID_TXN_STATE")
    # after an abort the producer begins a new transaction, and only that one's records appear
    staged(http, tid, topic, pid, epoch, [(0, 2, ["after"])])
    assert end(http, tid, pid, epoch, "commit").status_code == 204
    assert values(http, topic, 0) == ["after"] and values(http, topic, 1) == []


def test_open_transaction_is_invisible_at_both_isolation_levels(http):
    topic = new_topic(http)
    tid = tx_id()
    pid, epoch = init(http, tid)
    staged(http, tid, topic, pid, epoch, [(0, 0, ["open"])])
    assert http.post(f"/v1/topics/{topic}/records", json={"records": [{"value": "plain", "partition": 0}]}) \
        .status_code == 200
    for level in ISOLATION_LEVELS:
        body = fetch(http, topic, 0, level)
        assert [r["value"] for r in body["records"]] == ["plain"]
        assert body["high_watermark"] == body["last_stable_offset"] == 1
    described = http.get(f"/v1/topics/{topic}").json()["partitions"]
    assert [p["high_watermark"] for p in described] == [1, 0]
    assert end(http, tid, pid, epoch, "commit").status_code == 204
    assert values(http, topic, 0) == ["plain", "open"]  # offsets assigned at commit, after what came before


def test_fetch_refuses_an_unknown_isolation_level(http, topic):
    r = http.get(f"/v1/topics/{topic}/partitions/0/records", params={"offset": 0, "isolation_level": "dirty"})
    assert_error(r, 400, "INVALID_REQUEST")


def test_offsets_sent_to_a_transaction_commit_with_it_or_never(http):
    topic = new_topic(http)
    group = f"g-{uuid.uuid4().hex[:8]}"
    assert http.post(f"/v1/groups/{group}/offsets",
                     json={"offsets": [{"topic": topic, "partition": 0, "offset": 1}]}).status_code == 200
    tid = tx_id()
    pid, epoch = init(http, tid)

    def send_offsets(offsets: dict[int, int]):
        return http.post(f"/v1/transactions/{tid}/offsets", json={
            "producer_id": pid, "producer_epoch": epoch, "group_id": group,
            "offsets": [{"topic": topic, "partition": p, "offset": o, "metadata": f"m{o}"} for p, o in offsets.items()]})

    staged(http, tid, topic, pid, epoch, [(0, 0, ["out"])])
    assert send_offsets({0: 5, 1: 7}).status_code == 204
    assert committed(http, group, topic) == {0: 1}  # not before the commit
    assert end(http, tid, pid, epoch, "commit").status_code == 204
    assert committed(http, group, topic) == {0: 5, 1: 7}
    meta = {x["partition"]: x["metadata"] for x in http.get(f"/v1/groups/{group}/offsets").json()["offsets"]}
    assert meta == {0: "m5", 1: "m7"}
    assert values(http, topic, 0) == ["out"]

    # aborted: neither the offsets nor the records
    assert send_offsets({0: 9}).status_code == 204
    staged(http, tid, topic, pid, epoch, [(0, 1, ["lost"])])
    assert end(http, tid, pid, epoch, "abort").status_code == 204
    assert committed(http, group, topic) == {0: 5, 1: 7}
    assert values(http, topic, 0) == ["out"]


def test_a_second_init_fences_the_first_and_drops_its_records(http):
    topic = new_topic(http)
    tid = tx_id()
    pid, epoch = init(http, tid)
    staged(http, tid, topic, pid, epoch, [(0, 0, ["zombie"])])
    pid2, epoch2 = init(http, tid)
    assert (pid2, epoch2) == (pid, epoch + 1)
    assert_error(end(http, tid, pid, epoch, "commit"), 409, "PRODUCER_FENCED")
    late = produce(http, tid, topic, pid, epoch, [(1, 0, ["late"])])
    assert late.status_code == 409 and late.json()["error_name"] in ("PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH")
    # the new instance's transaction commits without anything the fenced one staged
    staged(http, tid, topic, pid2, epoch2, [(0, 0, ["new"])])
    assert end(http, tid, pid2, epoch2, "commit").status_code == 204
    assert values(http, topic, 0) == ["new"] and values(http, topic, 1) == []


def test_retried_batch_is_a_duplicate_and_lands_once(http):
    topic = new_topic(http)
    tid = tx_id()
    pid, epoch = init(http, tid)
    first = staged(http, tid, topic, pid, epoch, [(0, 0, ["a", "b"])])
    retry = staged(http, tid, topic, pid, epoch, [(0, 0, ["a", "b"])])
    assert [r["duplicate"] for r in first] == [False]
    assert [(r["duplicate"], r["record_count"]) for r in retry] == [(True, 2)]
    staged(http, tid, topic, pid, epoch, [(0, 2, ["c"])])
    assert end(http, tid, pid, epoch, "commit").status_code == 204
    assert end(http, tid, pid, epoch, "commit").status_code == 204  # a retried EndTxn appends nothing again
    assert values(http, topic, 0) == ["a", "b", "c"]


def test_timed_out_transaction_is_aborted_and_its_producer_fenced(http):
    topic = new_topic(http)
    tid = tx_id()
    pid, epoch = init(http, tid, transaction_timeout_ms=1500)
    assert http.get(f"/v1/transactions/{tid}").json()["transaction_timeout_ms"] == 1500
    staged(http, tid, topic, pid, epoch, [(0, 0, ["expired"])])
    deadline = time.monotonic() + 30
    while http.get(f"/v1/transactions/{tid}").json()["state"] != "CompleteAbort":
        assert time.monotonic() < deadline, "the coordinator never aborted the timed-out transaction"
        time.sleep(0.5)
    r = end(http, tid, pid, epoch, "commit")
    assert r.status_code == 409 and r.json()["error_name"] in ("PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH"), r.text
    assert http.get(f"/v1/transactions/{tid}").json()["producer_epoch"] == epoch + 1
    assert values(http, topic, 0) == []


def test_end_txn_without_an_open_transaction_is_invalid_txn_state(http):
    tid = tx_id()
    pid, epoch = init(http, tid)
    for outcome in ("commit", "abort"):
        body = assert_error(end(http, tid, pid, epoch, outcome), 409, "INVALID_TXN_STATE")
        assert body["error_code"] == 48


def test_invalid_requests_are_refused_with_kafka_errors(http, topic):
    tid = tx_id()
    body = assert_error(http.post(f"/v1/transactions/{tid}/init", json={"transaction_timeout_ms": 0}), 400,
                        "INVALID_TRANSACTION_TIMEOUT")
    assert body["error_code"] == 50
    assert_error(http.post(f"/v1/transactions/{tid}/init", json={"transaction_timeout_ms": 900_001}), 400,
                 "INVALID_TRANSACTION_TIMEOUT")
    assert_error(http.get(f"/v1/transactions/{tid}"), 404, "TRANSACTIONAL_ID_NOT_FOUND")  # refused inits left none
    pid, epoch = init(http, tid)
    assert_error(produce(http, tid, f"missing-{uuid.uuid4().hex[:6]}", pid, epoch, [(0, 0, ["x"])]), 404,
                 "UNKNOWN_TOPIC_OR_PARTITION")
    assert_error(produce(http, tid, topic, pid, epoch, [(7, 0, ["x"])]), 404, "UNKNOWN_TOPIC_OR_PARTITION")
    simple = http.post(f"/v1/transactions/{tid}/topics/{topic}/records", json={"records": [{"value": "x"}]})
    assert_error(simple, 400, "INVALID_REQUEST")
    other = tx_id()
    other_pid, _ = init(http, other)
    assert_error(produce(http, tid, topic, other_pid, 0, [(0, 0, ["x"])]), 409, "INVALID_PRODUCER_ID_MAPPING")
    assert_error(end(http, f"never-{uuid.uuid4().hex[:6]}", pid, epoch, "commit"), 409,
                 "INVALID_PRODUCER_ID_MAPPING")
    malformed = http.post(f"/v1/transactions/{tid}/commit", json={"producer_id": "1", "producer_epoch": 0})
    assert_error(malformed, 400, "INVALID_REQUEST")
    assert values(http, topic, 0) == [] and values(http, topic, 1) == []  # nothing of it reached the topic
    assert http.get(f"/v1/transactions/{tid}").json()["state"] == "Empty"  # no refused write began a transaction


# -- ACLs -------------------------------------------------------------------------------------------
TOKENS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
AUTH = {
    "tokens": [{"principal": "User:admin", "token": TOKENS["admin"]},
               {"principal": "User:alice", "token_sha256": hashlib.sha256(TOKENS["alice"].encode()).hexdigest()},
               {"principal": "User:bob", "token": TOKENS["bob"]}],
    "super_users": ["User:admin"],
    "acls": [
        {"principal": "User:alice", "resource_type": "TransactionalId", "pattern_type": "Prefixed",
         "resource_name": "tx-ok-", "operations": ["Write"]},
        {"principal": "User:alice", "resource_type": "Topic", "pattern_type": "Prefixed", "resource_name": "ok-",
         "operations": ["Write", "Read"]},
        {"principal": "User:alice", "resource_type": "Group", "resource_name": "g-ok", "operations": ["Read"]},
        {"principal": "User:bob", "resource_type": "Topic", "pattern_type": "Prefixed", "resource_name": "ok-",
         "operations": ["Write", "Read"]},
    ],
}


@pytest.fixture(scope="module")
def auth_front(tmp_path_factory):
    front = Front.with_auth(tmp_path_factory.mktemp("txn-auth-front"), AUTH).start()
    yield front
    front.stop()


def test_transactional_id_acl(auth_front):
    topic = f"ok-{uuid.uuid4().hex[:8]}"
    with auth_front.client(TOKENS["admin"]) as admin, auth_front.client(TOKENS["alice"]) as alice, \
            auth_front.client(TOKENS["bob"]) as bob:
        assert admin.post("/v1/topics", json={"name": topic, "partitions": 1}).status_code == 201
        tid = f"tx-ok-{uuid.uuid4().hex[:6]}"
        for refused in (bob.post(f"/v1/transactions/{tid}/init", json={}),
                        bob.post("/v1/producers", json={"transactional_id": tid}),
                        alice.post(f"/v1/transactions/tx-other-{uuid.uuid4().hex[:6]}/init", json={})):
            body = assert_error(refused, 403, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED")
            assert body["error_code"] == 53
        assert_error(bob.get(f"/v1/transactions/{tid}"), 403, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED")
        pid, epoch = init(alice, tid)
        # bob may write the topic, not with alice's transactional id
        assert_error(produce(bob, tid, topic, pid, epoch, [(0, 0, ["bob"])]), 403,
                     "TRANSACTIONAL_ID_AUTHORIZATION_FAILED")
        assert_error(end(bob, tid, pid, epoch, "commit"), 403, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED")
        staged(alice, tid, topic, pid, epoch, [(0, 0, ["alice"])])
        hidden = f"hidden-{uuid.uuid4().hex[:6]}"
        assert admin.post("/v1/topics", json={"name": hidden, "partitions": 1}).status_code == 201

        def send_offsets(group: str, topics: list[str]):
            return alice.post(f"/v1/transactions/{tid}/offsets", json={
                "producer_id": pid, "producer_epoch": epoch, "group_id": group,
                "offsets": [{"topic": t, "partition": 0, "offset": 1} for t in topics]})

        # TxnOffsetCommit needs Read on the group and on every topic, as a plain offset commit
        assert_error(send_offsets("g-other", [topic]), 403, "GROUP_AUTHORIZATION_FAILED")
        assert_error(send_offsets("g-ok", [topic, hidden]), 403, "TOPIC_AUTHORIZATION_FAILED")
        assert send_offsets("g-ok", [topic]).status_code == 204
        assert end(alice, tid, pid, epoch, "commit").status_code == 204
        assert [r["value"] for r in fetch(admin, topic, 0)["records"]] == ["alice"]
        offsets = admin.get("/v1/groups/g-ok/offsets").json()["offsets"]
        assert [(o["topic"], o["offset"]) for o in offsets] == [(topic, 1)]  # nothing of the refused calls
