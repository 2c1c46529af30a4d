"""Consumer groups of real librdkafka consumers (child processes) on the listener, with every assignor: joins,
a graceful leave, a SIGKILLed member whose session expires, cooperative incremental rebalances; committed
offsets seen by ``lakelog groups describe`` and over HTTP; an HTTP member sharing a group with Kafka members."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid

import pytest

from front_process import REPO, new_topic
from group_members import PARTITIONS, LoadProducer, Member, produce, two_owners, wait_for


@pytest.mark.parametrize("strategy", ["range", "roundrobin", "cooperative-sticky"])
def test_group_lifecycle_with_each_assignor(kafka_front, bootstrap, http, strategy):
    topic = new_topic(http, PARTITIONS)
    group = f"g-{uuid.uuid4().hex[:8]}"
    produce(bootstrap, topic, 40)
    a = Member(bootstrap, topic, group, strategy)
    members = [a]
    try:
        wait_for([a])
        b = Member(bootstrap, topic, group, strategy)
        members.append(b)
        wait_for([a, b])
        c = Member(bootstrap, topic, group, strategy)
        members.append(c)
        wait_for([a, b, c])
        deadline = time.monotonic() + 30
        while a.consumed + b.consumed + c.consumed < 40 and time.monotonic() < deadline:
            time.sleep(0.1)
        c.kill()  # no LeaveGroup: its session (3 s) must expire
        killed_at = time.monotonic()
        wait_for([a, b])
        assert time.monotonic() - killed_at >= 2.0, "the killed member's partitions moved before its session ended"
        b.stop()  # LeaveGroup: a takes everything at once
        wait_for([a], timeout=20)
        if strategy == "cooperative-sticky":
            # incremental: a never gave up everything it owned while members came and went
            first = a.history.index(next(h for h in a.history if h))
            assert all(a.history[first:]), f"a's assignment went empty: {a.history}"
        r = http.get(f"/v1/groups/{group}")
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["protocol"] == strategy and len(body["members"]) == 1
        committed = {(o["topic"], o["partition"]): o["offset"] for o in body["offsets"]}
        assert sum(committed.values()) == 40 and len(committed) == PARTITIONS
        cli = subprocess.run([sys.executable, "-m", "lakelog.cli", "groups", "describe", group, "--url",
                              kafka_front.url, "--json"], capture_output=True, text=True, cwd=str(REPO), timeout=120,
                             env={**os.environ, "PYTHONPATH": str(REPO)})
        assert cli.returncode == 0, cli.stderr
        rows = json.loads(cli.stdout)["partitions"]
        assert {(r["topic"], r["partition"]): r["current_offset"] for r in rows} == committed, rows
    finally:
        for m in members:
            m.stop()


class HttpMember:
    """A member over HTTP on the consumer protocol: heartbeats every 300 ms reporting what it owns."""

    def __init__(self, http, group: str, topic: str) -> None:
        self.http, self.group = http, group
        r = http.post(f"/v1/groups/{group}/members", json={"topics": [topic], "session_timeout_ms": 10000,
                                                           "rebalance_timeout_ms": 20000})
        assert r.status_code == 200, r.text
        body = r.json()
        self.member_id, self.epoch = body["member_id"], body["member_epoch"]
        self.owned = {(a["topic"], a["partition"]) for a in body["assignment"]}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.wait(0.3):
            r = self.http.post(f"/v1/groups/{self.group}/members/{self.member_id}/heartbeat", json={
                "member_epoch": self.epoch, "owned": [{"topic": t, "partition": p} for t, p in sorted(self.owned)]})
            assert r.status_code == 200, r.text
            body = r.json()
            self.epoch = body["member_epoch"]
            if body["assignment"] is not None:
                self.owned = {(a["topic"], a["partition"]) for a in body["assignment"]}

    def leave(self) -> None:
        self.stop.set()
        self.thread.join(10)
        assert self.http.delete(f"/v1/groups/{self.group}/members/{self.member_id}").status_code == 200


def test_http_and_kafka_members_share_a_group(bootstrap, http):
    """A classic librdkafka member and an HTTP member share a group, as Kafka 4 admits classic members into a
    consumer group: the group is upgraded, then downgraded back to classic once the HTTP member leaves."""
    topic = new_topic(http, PARTITIONS)
    group = f"g-{uuid.uuid4().hex[:8]}"
    a = Member(bootstrap, topic, group, "range")
    try:
        wait_for([a])
        h = HttpMember(http, group, topic)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (a.assignment & h.owned or len(a.assignment | h.owned) != PARTITIONS
                                               or not h.owned or not a.assignment):
            time.sleep(0.1)
        assert h.owned and a.assignment and not (a.assignment & h.owned), (a.assignment, h.owned)
        assert len(a.assignment | h.owned) == PARTITIONS
        d = http.get(f"/v1/groups/{group}").json()
        assert d["type"] == "consumer" and {m["protocol"] for m in d["members"]} == {"classic", "consumer"}
        h.leave()
        wait_for([a], timeout=30)  # the classic member alone again, in a classic group
        d = http.get(f"/v1/groups/{group}").json()
        assert (d["type"], d["protocol"], len(d["members"])) == ("classic", "range", 1)
    finally:
        a.stop()


@pytest.mark.parametrize("protocol", ["cooperative-sticky", "consumer"])
def test_no_partition_ever_has_two_owners_under_load(bootstrap, http, protocol):
    """confluent-kafka members join, leave and are killed while records flow, with librdkafka's
    cooperative-sticky assignor (KIP-429, the leader assigns) or group.protocol=consumer (KIP-848, the front
    assigns): from every rebalance callback, no partition was ever owned by two members at once, and the group
    committed every record."""
    topic = new_topic(http, PARTITIONS)
    group = f"own-{uuid.uuid4().hex[:8]}"
    kind = "consumer" if protocol == "consumer" else "classic"
    load = LoadProducer(bootstrap, topic)
    load.start()
    members = [Member(bootstrap, topic, group, protocol, name=f"m{i}", protocol=kind) for i in range(2)]
    try:
        wait_for(members)
        members.append(Member(bootstrap, topic, group, protocol, name="m2", protocol=kind))
        wait_for(members)
        members.append(Member(bootstrap, topic, group, protocol, name="m3", protocol=kind))
        wait_for(members)
        members[1].stop()  # leaves
        members[1].ended = time.time()
        wait_for([members[0], members[2], members[3]])
        members[2].kill()  # its session must end first
        wait_for([members[0], members[3]])
        members.append(Member(bootstrap, topic, group, protocol, name="m4", protocol=kind))
        wait_for([members[0], members[3], members[4]])
        sent = load.stop()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            committed = {o["partition"]: o["offset"] for o in http.get(f"/v1/groups/{group}").json()["offsets"]}
            if sum(committed.values()) == sent:
                break
            time.sleep(0.2)
        assert sum(committed.values()) == sent, (committed, sent)
        assert two_owners(members) == []
        assert sum(1 for m in members for ev in m.events if ev["event"] == "assign") >= 5
    finally:
        load.halt.set()
        for m in members:
            m.stop()
            m.ended = m.ended or time.time()


def test_a_stuck_group_beside_a_healthy_one(bootstrap, http):
    """A member with a 600 s rebalance timeout that heartbeats but never rejoins, and 70 JoinGroups parked on its
    group, leave another group's rebalance untouched: its second member is in within 2 s (a join holds no
    thread)."""
    from wire_client import WireClient

    from lakelog.group.consumer_protocol import encode_subscription

    topic = new_topic(http, PARTITIONS)
    stuck_group = f"stuck-{uuid.uuid4().hex[:8]}"
    sub = encode_subscription([topic])
    join = {"group_id": stuck_group, "session_timeout": 30_000, "rebalance_timeout": 600_000, "member_id": "",
            "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": sub}]}
    holder = WireClient(bootstrap)
    r = holder.request(11, 3, join)
    assert r.error_code == 0, r
    member, generation = r.member_id, r.generation_id
    assert holder.request(14, 3, {"group_id": stuck_group, "generation_id": generation, "member_id": member,
                                  "assignments": []}).error_code == 0
    stop = threading.Event()
    beats: list[int] = []

    def heartbeat() -> None:  # alive, never rejoining
        while not stop.wait(1.0):
            beats.append(holder.request(12, 3, {"group_id": stuck_group, "generation_id": generation,
                                                "member_id": member}).error_code)

    t = threading.Thread(target=heartbeat, daemon=True)
    t.start()
    parked = [WireClient(bootstrap) for _ in range(70)]
    healthy = []
    try:
        for c in parked:
            c.send_raw(c.frame(11, 3, join))  # never answered while the holder keeps the rebalance open
        time.sleep(2.0)
        assert 27 in beats  # REBALANCE_IN_PROGRESS: the stuck group is rebalancing
        group = f"healthy-{uuid.uuid4().hex[:8]}"
        healthy.append(Member(bootstrap, topic, group, "range"))
        wait_for(healthy)
        started = time.monotonic()
        healthy.append(Member(bootstrap, topic, group, "range"))
        wait_for(healthy, timeout=30)
        took = time.monotonic() - started
        assert took < 2.0, f"the healthy group took {took:.2f}s to rebalance"
    finally:
        stop.set()
        for m in healthy:
            m.stop()
        for c in parked + [holder]:
            c.close()


class WeightedAssignor:
    """A client-side assignor Kafka does not know: each member puts a weight in its subscription's userData, and
    the leader hands out partitions in proportion. Records what it computed."""

    computed: dict = {}
    weight = b"1"

    @classmethod
    def build(cls, weight: bytes):
        from kafka.coordinator.assignors.abstract import (AbstractPartitionAssignor, ConsumerProtocolAssignment,
                                                          ConsumerProtocolSubscription)

        class Weighted(AbstractPartitionAssignor):
            name = "lakelog-test-weighted"
            version = 0

            @classmethod
            def assign(klass, cluster, members):
                weights = {m.member_id: int(bytes(m.metadata.user_data).decode().split("=")[1]) for m in members}
                topics = sorted({t for m in members for t in m.metadata.topics})
                parts = [(t, p) for t in topics for p in sorted(cluster.partitions_for_topic(t) or [])]
                order = sorted(weights)
                out: dict = {m: [] for m in order}
                i = 0
                for mid in order:
                    n = round(len(parts) * weights[mid] / sum(weights.values()))
                    out[mid] = parts[i:i + n] if mid != order[-1] else parts[i:]
                    i += n
                cls.computed = {mid: sorted(ps) for mid, ps in out.items()}
                return {mid: ConsumerProtocolAssignment(0, [(t, [p for tt, p in ps if tt == t])
                                                           for t in sorted({t for t, _ in ps})], b"")
                        for mid, ps in out.items()}

            @classmethod
            def metadata(klass, topics):
                return ConsumerProtocolSubscription(0, list(topics), b"weight=" + weight)

            @classmethod
            def on_assignment(klass, assignment, generation=None):
                pass

        return Weighted


def test_kafka_python_custom_assignor_with_user_data(bootstrap, http):
    """kafka-python with a client-side assignor whose name is not Kafka's: the leader reads every member's
    userData, and each member gets exactly what that assignor computed."""
    from kafka import KafkaConsumer

    topic = new_topic(http, PARTITIONS)
    group = f"custom-{uuid.uuid4().hex[:8]}"
    consumers = [KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, session_timeout_ms=6000,
                               heartbeat_interval_ms=300, partition_assignment_strategy=[WeightedAssignor.build(w)],
                               consumer_timeout_ms=100)
                 for w in (b"3", b"1")]
    stop = threading.Event()

    def run(c) -> None:  # a consumer per thread, as applications run them: one's join never waits on the other's poll
        while not stop.is_set():
            c.poll(timeout_ms=100)

    threads = [threading.Thread(target=run, args=(c,), daemon=True) for c in consumers]
    try:
        for c in consumers:  # the topic's partitions known first: the first assignment is already complete
            known = time.monotonic() + 30
            while len(c.partitions_for_topic(topic) or ()) != PARTITIONS and time.monotonic() < known:
                time.sleep(0.1)
            assert len(c.partitions_for_topic(topic) or ()) == PARTITIONS, "the topic's metadata within 30 s"
        for c in consumers:
            c.subscribe([topic])
        for t in threads:
            t.start()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            got = {c._coordinator._generation.member_id: sorted((tp.topic, tp.partition) for tp in c.assignment())
                   for c in consumers if c._coordinator._generation}
            if len(got) == 2 and WeightedAssignor.computed and got == WeightedAssignor.computed \
                    and all(got.values()):
                break
            time.sleep(0.1)
        assert got == WeightedAssignor.computed, (got, WeightedAssignor.computed)
        assert sorted(len(v) for v in got.values()) == [1, 3]  # the weights in userData were read
        d = http.get(f"/v1/groups/{group}").json()
        assert (d["type"], d["protocol"]) == ("classic", "lakelog-test-weighted")
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=10)
        for c in consumers:
            c.close()


def test_committed_leader_epoch_and_metadata(bootstrap, http):
    """OffsetCommit and TxnOffsetCommit keep the committed leader epoch and metadata; OffsetFetch returns them
    (librdkafka 0103 and 0081 read them back)."""
    from confluent_kafka import Consumer, Producer, TopicPartition as TP

    topic = new_topic(http, 2)
    group = f"epoch-{uuid.uuid4().hex[:8]}"
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        c.commit(offsets=[TP(topic, 0, 7, metadata="m-7", leader_epoch=3)], asynchronous=False)
        got = c.committed([TP(topic, 0), TP(topic, 1)], timeout=30)
        assert [(t.partition, t.offset, t.metadata, t.leader_epoch) for t in got] == \
            [(0, 7, "m-7", 3), (1, -1001, None, None)]
    finally:
        c.close()
    txn_group = f"txn-epoch-{uuid.uuid4().hex[:8]}"
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"tx-{uuid.uuid4().hex[:8]}"})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, b"x", partition=1)
    member = Consumer({"bootstrap.servers": bootstrap, "group.id": txn_group})
    try:
        p.send_offsets_to_transaction([TP(topic, 1, 5, metadata="t-5", leader_epoch=2)],
                                      member.consumer_group_metadata(), 30)
        p.commit_transaction(30)
        got = member.committed([TP(topic, 1)], timeout=30)
        p.flush(10)
        assert [(t.offset, t.metadata, t.leader_epoch) for t in got] == [(5, "t-5", 2)]
    finally:
        member.close()


def test_list_filters_delete_groups_and_every_front_forgets_a_deleted_group(kafka_front, bootstrap, http):
    """ListGroups with state (v4) and type (v5) filters; DeleteGroups refuses a group with members; a group
    deleted with ``lakelog groups delete`` on the root while the front runs is forgotten by it within a second."""
    from confluent_kafka import ConsumerGroupState, ConsumerGroupType, TopicPartition as TP
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = new_topic(http, PARTITIONS)

    def listed(**kw) -> dict:
        result = admin.list_consumer_groups(**kw).result(30)
        return {g.group_id: (g.state, g.type) for g in result.valid}

    from confluent_kafka import Consumer

    empty, deleted_by_cli = f"empty-{uuid.uuid4().hex[:6]}", f"cli-{uuid.uuid4().hex[:6]}"
    for g in (empty, deleted_by_cli):
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": g})
        c.commit(offsets=[TP(topic, 0, 1)], asynchronous=False)
        c.close()
    active = f"active-{uuid.uuid4().hex[:6]}"
    m = Member(bootstrap, topic, active, "range")
    try:
        wait_for([m])
        assert listed(states={ConsumerGroupState.STABLE})[active] == (ConsumerGroupState.STABLE,
                                                                      ConsumerGroupType.CLASSIC)
        only_empty = listed(states={ConsumerGroupState.EMPTY})
        assert empty in only_empty and active not in only_empty
        assert active in listed(types={ConsumerGroupType.CLASSIC})
        assert active not in listed(types={ConsumerGroupType.CONSUMER})
        futures = admin.delete_consumer_groups([active, empty], request_timeout=30)
        with pytest.raises(Exception) as e:
            futures[active].result()
        assert "NON_EMPTY_GROUP" in str(e.value)
        futures[empty].result()
        assert empty not in listed()
    finally:
        m.stop()
    assert deleted_by_cli in listed()
    cli = subprocess.run([sys.executable, "-m", "lakelog.cli", "--root", kafka_front.root, "groups", "delete",
                          deleted_by_cli], capture_output=True, text=True, cwd=str(REPO), timeout=120,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    assert cli.returncode == 0, cli.stderr
    gone = time.monotonic()
    while deleted_by_cli in listed() and time.monotonic() - gone < 3.0:  # one heartbeat interval (3 s)
        time.sleep(0.1)
    assert deleted_by_cli not in listed(), "the front still lists a group deleted on its root"
    described = admin.describe_consumer_groups([deleted_by_cli]).get(deleted_by_cli)
    assert described.result(30).state == ConsumerGroupState.DEAD


def test_regex_subscription_on_the_consumer_protocol(bootstrap, http):
    """librdkafka on group.protocol=consumer sends its ``^...`` subscription as SubscribedTopicRegex (KIP-848): the
    front resolves it (a full match, RE2 syntax), a topic created later joins the assignment without a new
    subscribe, and a pattern RE2 refuses (libc's regcomp takes it) fails the consumer with
    INVALID_REGULAR_EXPRESSION."""
    from confluent_kafka import Consumer, KafkaError, KafkaException

    prefix = f"rx{uuid.uuid4().hex[:6]}"
    for name, n in [(f"{prefix}-a", 2), (f"{prefix}-b", 1), (f"{prefix}a", 1)]:  # the last is no full match
        assert http.post("/v1/topics", json={"name": name, "partitions": n}).status_code == 201
    group = f"regex-{uuid.uuid4().hex[:8]}"
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
                  "auto.offset.reset": "earliest"})

    def assigned_until(want: set, timeout: float = 30) -> set:
        deadline, got = time.monotonic() + timeout, set()
        while time.monotonic() < deadline:
            c.poll(0.1)
            got = {(tp.topic, tp.partition) for tp in c.assignment()}
            if got == want:
                break
        return got

    try:
        c.subscribe([f"^{prefix}-.*"])
        want = {(f"{prefix}-a", 0), (f"{prefix}-a", 1), (f"{prefix}-b", 0)}
        assert assigned_until(want) == want
        d = http.get(f"/v1/groups/{group}").json()
        assert (d["type"], len(d["members"])) == ("consumer", 1), d
        assert http.post("/v1/topics", json={"name": f"{prefix}-c", "partitions": 1}).status_code == 201
        want |= {(f"{prefix}-c", 0)}
        assert assigned_until(want) == want  # the front re-resolved the regex; the client did nothing
    finally:
        c.close()
    bad = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{group}-bad", "group.protocol": "consumer"})
    try:
        bad.subscribe([f"^{prefix}-(a)\\1.*"])  # a backreference: libc's regcomp takes it, RE2 refuses it
        deadline, error = time.monotonic() + 30, None
        while error is None and time.monotonic() < deadline:
            try:
                msg = bad.poll(0.2)
            except KafkaException as e:
                error = e.args[0]
                break
            if msg is not None and msg.error():
                error = msg.error()
        # librdkafka makes the broker's INVALID_REGULAR_EXPRESSION (128) fatal, with that code's text
        assert error is not None and error.code() == KafkaError._FATAL, error
        assert "Broker: The regular expression is not valid" in error.str(), error
    finally:
        bad.close()
