"""Several fronts on one root (``lakelog serve --node-id``): each partition is leased to one front, Kafka
Metadata names it as the leader, partitions are spread within one across the live fronts, and a front killed
with SIGKILL during produce loses nothing acknowledged: its partitions move to the others within the session
timeout, and librdkafka's idempotent producer carries on with no loss, duplicate or reordering; a front
that joins during produce takes its share within the session timeout, as safely."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections import Counter

import httpx
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from prometheus_client.parser import text_string_to_metric_families

from lakelog.log import Log
from lakelog.storage.delta_log import read_tail
from lakelog.storage.topic_snapshot import HANDED_COMMIT_IDS_KEY
from s3_server import BUCKET

from front_process import Front, kafka_front_process, new_topic, wait_for

SESSION_MS = 3000
PARTITIONS = 6


def leaders(bootstrap: str, topic: str) -> dict[int, int]:
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    return {p: part.leader for p, part in md.topics[topic].partitions.items()}


def start_fronts(root: str, tmp_path, env: dict | None = None, nodes=(1, 2, 3)) -> list[Front]:
    out = []
    env = {**(env or {}), "LAKELOG_FRONT_SESSION_TIMEOUT_MS": str(SESSION_MS)}
    for node in nodes:
        f = kafka_front_process(root, tmp_path / f"logs-{node}", env=env, args=("--node-id", str(node)))
        f.node = node
        out.append(f)
        f.start()
    return out


@pytest.fixture
def fronts(tmp_path):
    out = start_fronts(str(tmp_path / "root"), tmp_path)
    yield out
    for f in out:
        f.stop()


@pytest.fixture
def s3_fronts(tmp_path, s3_env):
    """Three fronts on a moto root: the pipelined path, where the holder of partition 0's lease makes the topic's
    commits and the others hand theirs to it (writer/commit_handoff.py)."""
    out = start_fronts(f"s3://{BUCKET}/fronts-{uuid.uuid4().hex[:12]}", tmp_path, s3_env)
    yield out
    for f in out:
        f.stop()


def balanced(bootstrap: str, topic: str, nodes: set[int]) -> dict[int, int] | None:
    try:
        got = leaders(bootstrap, topic)
    except Exception:
        return None
    counts = Counter(got.values())
    if set(counts) != nodes or max(counts.values()) - min(counts.values()) > 1:
        return None
    return got


def agreed(fronts, topic: str) -> dict[int, int] | None:
    """The leaders every front's Metadata shows, once they all show the same balanced ones (each front's topic
    metadata cache lags the last lease commit by up to a second)."""
    views = [balanced(f.bootstrap, topic, {f.node for f in fronts}) for f in fronts]
    return views[0] if views[0] and all(v == views[0] for v in views) else None


def lease_events(fronts) -> list[str]:
    """Every front's log lines on leases taken and failed passes or heartbeats (lease_keeper.py), for failures."""
    return [line for f in fronts for line in f.log_tail(1 << 20).splitlines() if "lease" in line or "heartbeat" in line]


def test_partitions_are_leased_spread_and_survive_a_killed_leader(fronts):
    produce_through_a_kill(fronts, lambda first: fronts[1])


def test_the_committer_front_killed_on_s3_loses_nothing(s3_fronts):
    """On an object store the fronts hand their commits to the holder of partition 0's lease; kill -9 that
    front during produce: its partitions and the commits move to the survivors, nothing acknowledged is lost,
    duplicated or reordered, and commits made for other fronts carry their ids."""
    topic = produce_through_a_kill(s3_fronts, lambda first: next(f for f in s3_fronts if f.node == first[0]))
    log = Log(s3_fronts[0].root)
    table = log.root.path_for("topics", topic)
    commits = list(read_tail(log.root, table, -1, log.snapshot(topic).version))
    handed = [cid for c in commits for cid in c.commit_info.get(HANDED_COMMIT_IDS_KEY, [])]
    assert handed, "no front handed a commit to the committer front"
    assert len(handed) == len(set(handed))
    # the fronts that handed commits over timed those round trips (lakelog_produce_stage_seconds)
    handoffs = 0.0
    for f in s3_fronts:
        if f.proc.poll() is None:
            with f.client() as http:
                handoffs += sum(sample.value for metric in text_string_to_metric_families(http.get("/metrics").text)
                                for sample in metric.samples if sample.name == "lakelog_produce_stage_seconds_count"
                                and sample.labels.get("stage") == "handoff")
    assert handoffs >= 1


def produce_through(fronts, topic: str, event) -> tuple[dict[int, list[tuple[int, float]]], int, float]:
    """Produce to every partition from one idempotent producer for 12 s, running ``event()`` after 3 s; no
    delivery may fail. Returns each partition's acknowledged values with the time of their acknowledgement, the
    records sent, and when ``event()`` returned (a kill at once; a join once the fronts agree on the leaders)."""
    p = Producer({"bootstrap.servers": ",".join(f.bootstrap for f in fronts), "enable.idempotence": True,
                  "acks": "all", "linger.ms": 5, "message.timeout.ms": 60000,
                  "topic.metadata.refresh.interval.ms": 1000})
    acked: dict[int, list[tuple[int, float]]] = {}
    errors: list = []
    event_at = [0.0]

    def done(err, msg):
        if err:
            errors.append(err)
        else:
            acked.setdefault(msg.partition(), []).append((int(msg.value()), time.monotonic()))

    sent = 0
    stop_at = time.monotonic() + 12
    timer = threading.Timer(3.0, lambda: (event(), event_at.__setitem__(0, time.monotonic())))
    timer.start()
    while time.monotonic() < stop_at:
        for _ in range(200):
            p.produce(topic, value=str(sent).encode(), partition=sent % PARTITIONS, on_delivery=done)
            sent += 1
        p.poll(0.02)
    timer.join()
    assert p.flush(90) == 0
    assert not errors, errors[:5]
    return acked, sent, event_at[0]


def check_moved_and_once_in_order(root: str, topic: str, before: dict[int, int], after: dict[int, int],
                                  acked: dict[int, list[tuple[int, float]]], sent: int, event_at: float) -> None:
    """The partitions whose leader changed produced again within the session timeout plus a commit of
    ``event_at`` (generous for a loaded 2-core machine), and every acknowledged record is in the log once, in the
    order sent."""
    moved = [q for q in before if after[q] != before[q]]
    assert moved, "no partition moved"
    for q in moved:
        resumed = [t for _, t in acked.get(q, []) if t > event_at]
        assert resumed, f"partition {q} never produced after it moved"
        assert resumed[0] - event_at < SESSION_MS / 1000 + 10, resumed[0] - event_at
    log = Log(root)
    total = 0
    for q in range(PARTITIONS):
        values = [int(v) for v in log.read(topic, q).column("value").to_pylist()]
        assert len(values) == len(set(values)), f"duplicates in partition {q}"
        assert values == sorted(values), f"partition {q} out of order"
        assert {v for v, _ in acked.get(q, [])} <= set(values), f"acknowledged records lost in partition {q}"
        total += len(values)
    assert sum(len(v) for v in acked.values()) == sent and total == sent


def produce_through_a_kill(fronts, pick_victim) -> str:
    """Produce to every partition while the front ``pick_victim(leaders)`` is killed with SIGKILL; check its
    leases moved to the survivors, within one of each other, and :func:`check_moved_and_once_in_order`.
    Returns the topic."""
    with fronts[0].client() as http:
        topic = new_topic(http, partitions=PARTITIONS)
    first = wait_for(lambda: agreed(fronts, topic), 30, "the same balanced leaders on all three fronts")
    assert sorted(Counter(first.values()).values()) == [2, 2, 2]
    victim = pick_victim(first)
    survivor = next(f for f in fronts if f is not victim)
    acked, sent, killed_at = produce_through(fronts, topic, victim.kill)
    after = wait_for(lambda: balanced(survivor.bootstrap, topic, {f.node for f in fronts} - {victim.node}), 30,
                     "leases on the two survivors")
    assert sorted(Counter(after.values()).values()) == [3, 3]
    assert {q for q in first if after[q] != first[q]} == {q for q, node in first.items() if node == victim.node}
    check_moved_and_once_in_order(survivor.root, topic, first, after, acked, sent, killed_at)
    return topic


def test_a_joining_front_takes_its_share_while_producers_run(tmp_path):
    """Two fronts lead a topic's partitions three each; a third starts during idempotent produce: within the
    session timeout (plus slack for a loaded machine) every front's Metadata shows two each, the joiner's
    partitions having moved one from each front (sticky), and nothing acknowledged is lost, duplicated or
    reordered (the old leaders' appends after the move are fenced; their clients re-route)."""
    root = str(tmp_path / "root")
    fronts = start_fronts(root, tmp_path, nodes=(1, 2))
    joiner: list[Front] = []
    spread_after: list[float] = []

    def join():
        joiner.extend(start_fronts(root, tmp_path, nodes=(3,)))
        started = time.monotonic()
        wait_for(lambda: agreed(fronts + joiner, topic), 30, "the same balanced leaders on all three fronts")
        spread_after.append(time.monotonic() - started)

    try:
        with fronts[0].client() as http:
            topic = new_topic(http, partitions=PARTITIONS)
        first = wait_for(lambda: agreed(fronts, topic), 30, "the same balanced leaders on both fronts")
        assert sorted(Counter(first.values()).values()) == [3, 3]
        acked, sent, joined_at = produce_through(fronts, topic, join)
        assert spread_after and spread_after[0] < SESSION_MS / 1000 + 10, spread_after
        # polled, not read once: each front's Metadata follows the lease commits by up to a second (CI once
        # read a disagreement here after the fronts had agreed); the front logs name every lease taken
        everyone = fronts + joiner
        try:
            after = wait_for(lambda: agreed(everyone, topic), 30, "the same balanced leaders after produce")
        except AssertionError as e:
            raise AssertionError(f"{e}: {lease_events(everyone)}") from None
        assert sorted(Counter(after.values()).values()) == [2, 2, 2], (after, lease_events(everyone))
        assert [q for q in first if after[q] != first[q]] == [q for q, node in after.items() if node == 3], \
            (first, after, lease_events(everyone))
        assert Counter(first[q] for q, node in after.items() if node == 3) == {1: 1, 2: 1}  # one from each
        check_moved_and_once_in_order(root, topic, first, after, acked, sent, joined_at)
    finally:
        for f in fronts + joiner:
            f.stop()


def test_a_front_hands_over_several_commits_at_once_in_order(tmp_path, s3_env, s3_endpoint):
    """A front that is not the committer front keeps several handoffs in flight (writer/committer.py,
    MAX_HANDOFFS_IN_FLIGHT): while the committer front's commit PUT is stalled, the other front's next groups
    are handed over too, and its following commit carries them all -- with every record there once, in order.
    (Three producers: a front, like a Kafka broker, takes one request at a time from each connection. Their
    requests are acknowledged by one commit and so arrive together again, as one group: three more producers
    each send one record to the other front, apart, while the PUT is held, so that it has groups to hand over
    one after another -- the producers' common rhythm made this test fail in CI.)"""
    from bench.s3_proxy import S3FaultProxy, commit_put

    proxy = S3FaultProxy(s3_endpoint).start()
    fronts = start_fronts(f"s3://{BUCKET}/fronts-{uuid.uuid4().hex[:12]}", tmp_path,
                          {**s3_env, "AWS_ENDPOINT_URL": proxy.url}, nodes=(1, 2))
    try:
        with fronts[0].client() as http:
            topic = new_topic(http, partitions=4)
        owners = wait_for(lambda: agreed(fronts, topic), 30, "the same balanced leaders on both fronts")
        settings = {"bootstrap.servers": ",".join(f.bootstrap for f in fronts), "acks": "all",
                    "enable.idempotence": True, "message.timeout.ms": 60000}
        producers = [Producer({**settings, "linger.ms": 5}) for _ in range(3)]
        other = next((q for q, node in owners.items() if node != owners[0]), None)  # one the other front leads
        assert other is not None, owners
        extras = [Producer({**settings, "linger.ms": 0}) for _ in range(3)]
        for e in extras:
            e.list_topics(topic, timeout=10)
        errors: list = []

        def failed(err, msg):
            if err:
                errors.append(err)

        sent = 0
        stall = None
        held_at = None
        fired = 0
        started = time.monotonic()
        # 6 s, and on until the extras have sent (a hit late on a loaded machine), within 30 s
        while (time.monotonic() - started < 6 or fired < len(extras)) and time.monotonic() - started < 30:
            if stall is None and time.monotonic() - started > 2:  # one commit PUT held for 1.5 s, then made
                stall = proxy.stall(lambda method, path: commit_put(method, path) and topic in path, 1.5,
                                    then="forward")
            if held_at is None and stall is not None and stall.hits:
                held_at = time.monotonic()
            while held_at is not None and fired < len(extras) and time.monotonic() - held_at > 0.2 + 0.3 * fired:
                extras[fired].produce(topic, value=str(-1 - fired).encode(), partition=other, on_delivery=failed)
                extras[fired].poll(0)
                fired += 1
            for p in producers:
                for _ in range(40):
                    p.produce(topic, value=str(sent).encode(), partition=sent % 4, on_delivery=failed)
                    sent += 1
                p.poll(0.003)
        assert all(p.flush(60) == 0 for p in producers + extras) and not errors, errors[:5]
        assert stall is not None and stall.done.is_set() and stall.hits and fired == len(extras)
        log = Log(fronts[0].root)
        for q in range(4):
            values = [int(v) for v in log.read(topic, q).column("value").to_pylist()]
            assert sorted(v for v in values if v < 0) == ([-3, -2, -1] if q == other else [])
            values = [v for v in values if v >= 0]
            assert sorted(values) == list(range(q, sent, 4)), f"partition {q}: records lost or duplicated"
            for i in range(3):  # each producer's records (40 in a row, in turn) in the order it sent them
                mine = [v for v in values if v % 120 // 40 == i]
                assert mine == sorted(mine), f"partition {q}: producer {i}'s records reordered"
        table = log.root.path_for("topics", topic)
        per_commit = [len(c.commit_info.get(HANDED_COMMIT_IDS_KEY, []))
                      for c in read_tail(log.root, table, -1, log.snapshot(topic).version)]
        # the other front (it leads ``other``) handed commits over: two in one commit were in flight at once
        assert max(per_commit) >= 2, per_commit
    finally:
        for f in fronts:
            f.stop()
        proxy.stop()


def test_http_produce_to_another_fronts_partition_names_its_leader(fronts):
    with fronts[0].client() as http:
        topic = new_topic(http, partitions=3)
    owners = wait_for(lambda: agreed(fronts, topic), 30, "the same balanced leaders on all three fronts")
    with fronts[0].client() as http:
        cluster = http.get("/v1/cluster").json()
        assert cluster["node_id"] == 1
        assert sorted(f["node_id"] for f in cluster["fronts"]) == [1, 2, 3]
        urls = {f["node_id"]: f["http_url"] for f in cluster["fronts"]}
        assert urls[1] == fronts[0].url
        foreign = next(q for q, node in owners.items() if node != 1)
        r = http.post(f"/v1/topics/{topic}/records", json={"records": [{"value": "x", "partition": foreign}]})
        assert r.status_code == 503, r.text
        body = r.json()
        assert body["error_code"] == 6 and body["error_name"] == "NOT_LEADER_OR_FOLLOWER"
        assert body["leader_id"] == owners[foreign]
        assert body["leader_url"] == urls[owners[foreign]]  # the leader's address, to send the batch to
        assert urls[owners[foreign]] in body["message"]
        # A request whose batches go to this front's partition and another's: each batch answered by itself.
        own = next(q for q, node in owners.items() if node == 1)
        r = http.post(f"/v1/topics/{topic}/records", json={"records": [{"value": "a", "partition": own},
                                                                       {"value": "b", "partition": foreign}]})
        assert r.status_code == 200, r.text
        by_partition = {e["partition"]: e for e in r.json()["results"]}
        assert by_partition[own]["error_code"] == 0 and by_partition[own].get("leader_url") is None
        assert by_partition[foreign]["error_name"] == "NOT_LEADER_OR_FOLLOWER"
        assert (by_partition[foreign]["leader_id"], by_partition[foreign]["leader_url"]) == (
            owners[foreign], urls[owners[foreign]])
    # Sent to the leader's URL, it lands.
    with httpx.Client(base_url=urls[owners[foreign]], timeout=60) as leader:
        r = leader.post(f"/v1/topics/{topic}/records", json={"records": [{"value": "x", "partition": foreign}]})
        assert r.status_code == 200, r.text


def test_transactions_span_partitions_led_by_several_fronts(fronts):
    """The transaction coordinator (FindCoordinator key type 1: the front the id hashes to) commits records staged
    by the partitions' leaders on the other fronts; aborted ones never appear."""
    from confluent_kafka import Consumer, TopicPartition

    with fronts[0].client() as http:
        topic = new_topic(http, partitions=PARTITIONS)
    bootstrap = ",".join(f.bootstrap for f in fronts)
    wait_for(lambda: agreed(fronts, topic), 30, "the same balanced leaders on all three fronts")
    committed = []
    for n in range(4):
        p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"multi-{topic}-{n}", "linger.ms": 5})
        p.init_transactions(30)
        for round_ in range(3):
            p.begin_transaction()
            batch = [b"%d-%d-%d" % (n, round_, i) for i in range(PARTITIONS * 2)]
            for i, v in enumerate(batch):
                p.produce(topic, value=v, partition=i % PARTITIONS)
            if round_ == 1:
                p.abort_transaction(30)
            else:
                p.commit_transaction(30)
                committed += batch
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{topic}", "isolation.level": "read_committed",
                  "enable.auto.commit": False})
    c.assign([TopicPartition(topic, q, 0) for q in range(PARTITIONS)])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < len(committed) and time.monotonic() < deadline:
        got += [m.value() for m in c.consume(100, 0.5) if not m.error()]
    time.sleep(1.0)
    got += [m.value() for m in c.consume(100, 0.5) if not m.error()]
    c.close()
    assert sorted(got) == sorted(committed)
    log = Log(fronts[0].root)
    assert sum(log.snapshot(topic).high_watermark(q) for q in range(PARTITIONS)) == len(committed)


def test_the_handoff_route_refuses_strangers_and_bad_commits(s3_fronts):
    """Only a front of the root may hand a commit over (the root's cluster secret), its body is checked before
    anything is committed, and a commit planned on offsets that are not the log's is refused: the fronts stay
    up and the log does not move."""
    from api.routers.handoffs import INLINE_DECODE_BYTES
    from lakelog.cluster.cluster_secret import SECRET_HEADER, cluster_secret
    from lakelog.cluster.commit_forwarder import ROUTE

    with s3_fronts[0].client() as http:
        topic = new_topic(http, partitions=PARTITIONS)
    owners = wait_for(lambda: agreed(s3_fronts, topic), 30, "the same balanced leaders on all three fronts")
    committer = next(f for f in s3_fronts if f.node == owners[0])
    other = next(f for f in s3_fronts if f.node != owners[0])
    log = Log(committer.root)
    version = log.snapshot(topic).version
    secret = cluster_secret(log.root)
    route = ROUTE.format(topic=topic)
    stats = json.dumps({"numRecords": 1, "minValues": {"offset": 999}, "maxValues": {"offset": 999}})
    planned_elsewhere = {
        "topic_id": log.snapshot(topic).topic_id, "commit_id": uuid.uuid4().hex, "known_version": version,
        "adds": [{"path": f"partition=0/{999:020d}-{uuid.uuid4().hex}.parquet", "partitionValues": {"partition": "0"},
                  "size": 10, "modificationTime": 1, "dataChange": True, "stats": stats}],
        "txns": {"lakelog.leo.0": 1000}, "expect": {"lakelog.leo.0": 999}, "producer_rows": []}
    cases = [
        (committer, {}, json.dumps(planned_elsewhere).encode(), 401, "SASL_AUTHENTICATION_FAILED"),
        (committer, {SECRET_HEADER: "0" * 64}, json.dumps(planned_elsewhere).encode(), 401,
         "SASL_AUTHENTICATION_FAILED"),
        (committer, {SECRET_HEADER: secret}, b'{"topic_id": ', 400, "INVALID_REQUEST"),
        # over INLINE_DECODE_BYTES: decoded on a thread, not the event loop
        (committer, {SECRET_HEADER: secret}, b" " * INLINE_DECODE_BYTES + b'{"topic_id": ', 400, "INVALID_REQUEST"),
        (committer, {SECRET_HEADER: secret}, json.dumps({**planned_elsewhere, "txns": {"lakelog.leo.0": 5}}).encode(),
         400, "INVALID_REQUEST"),
        # a number no Delta reader could parse (a long's range): refused before the log is looked at
        (committer, {SECRET_HEADER: secret},
         json.dumps({**planned_elsewhere, "adds": [{**planned_elsewhere["adds"][0], "size": 2**63}]}).encode(), 400,
         "INVALID_REQUEST"),
        (committer, {SECRET_HEADER: secret}, json.dumps(planned_elsewhere).encode(), 409, "NOT_LEADER_OR_FOLLOWER"),
        (other, {SECRET_HEADER: secret}, json.dumps(planned_elsewhere).encode(), 409, "NOT_LEADER_OR_FOLLOWER"),
    ]
    missing = f"missing-{uuid.uuid4().hex[:8]}"
    cases += [  # the topic in the path: an illegal name, and one that does not exist
        (committer, {SECRET_HEADER: secret}, json.dumps(planned_elsewhere).encode(), 409, "INVALID_TOPIC_EXCEPTION",
         ROUTE.format(topic="no%20such")),
        (committer, {SECRET_HEADER: secret}, json.dumps(planned_elsewhere).encode(), 409,
         "UNKNOWN_TOPIC_OR_PARTITION", ROUTE.format(topic=missing)),
    ]
    for front, headers, body, status, name, *path in cases:
        r = httpx.post(front.url + (path[0] if path else route), content=body,
                       headers={"content-type": "application/json", **headers}, timeout=30)
        assert r.status_code == status, (name, r.status_code, r.text)
        assert r.json()["error_name"] == name, r.text
        assert "Traceback" not in r.text and "/lakelog/" not in r.text and secret not in r.text
    for front in s3_fronts:
        assert httpx.get(front.url + "/v1/health", timeout=30).status_code == 200
    assert Log(committer.root).snapshot(topic).version == version  # nothing was committed
    assert missing not in Log(committer.root).list_topics()
    # the refused requests held up no later handoff of the topic (the route lets them in in arrival order): the
    # other front's produce is handed over and lands
    foreign = next(q for q, node in owners.items() if node == other.node)
    with other.client() as http:
        r = http.post(f"/v1/topics/{topic}/records", json={"records": [{"value": "after", "partition": foreign}]})
        assert r.status_code == 200, r.text
    assert Log(committer.root).read(topic, foreign).column("value").to_pylist() == [b"after"]
