"""The Java consumer against a real ``lakelog serve --kafka-listener`` (Kafka 4.1.1 clients from ``reference/``):

* ``group.protocol=consumer`` (KIP-848, Kafka's ``kafka-verifiable-consumer``) in one group with librdkafka members
  on the same protocol: no partition ever has two owners, every record is committed;
* librdkafka 0113 ``o_java_interop``: a librdkafka member and the Java client's ``CooperativeStickyAssignor``
  (librdkafka's own ``IncrementalRebalanceCli``) share a cooperative group through a subscription change.

One JVM per test: each is the member under test.
"""

from __future__ import annotations

import collections
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer

from front_process import new_topic
from group_members import LoadProducer, Member, two_owners, wait_for
from java_programs import VerifiableConsumer, java_command


@pytest.fixture
def logs(tmp_path) -> Path:
    return tmp_path


def test_java_consumer_protocol_members_beside_librdkafka(bootstrap, http, logs):
    """Kafka's own verifiable consumer (the Java client) with group.protocol=consumer joins a KIP-848 group of
    librdkafka members on the same protocol while records flow: the coordinator assigns across both clients, no
    partition ever has two owners by either client's callbacks, the Java member's leave hands its partitions on,
    and the group commits every record."""
    partitions = 6
    topic = new_topic(http, partitions)
    group = f"kip848-java-{uuid.uuid4().hex[:8]}"
    load = LoadProducer(bootstrap, topic, partitions)
    load.start()
    members: list = [Member(bootstrap, topic, group, "consumer", name="rd-0", protocol="consumer")]
    try:
        wait_for(members, partitions=partitions)
        java = VerifiableConsumer(bootstrap, topic, group, log_dir=logs, name="java-0",
                                  extra=("--group-protocol", "consumer"))
        members.append(java)
        wait_for(members, timeout=120, partitions=partitions)
        members.append(Member(bootstrap, topic, group, "consumer", name="rd-1", protocol="consumer"))
        wait_for(members, timeout=60, partitions=partitions)
        described = http.get(f"/v1/groups/{group}").json()
        assert described["type"] == "consumer" and len(described["members"]) == 3
        assert {m["protocol"] for m in described["members"]} == {"consumer"}
        java.stop()  # leaves: the librdkafka members take its partitions
        wait_for([members[0], members[2]], timeout=60, partitions=partitions)
        sent = load.stop()
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            committed = {o["partition"]: o["offset"] for o in http.get(f"/v1/groups/{group}").json()["offsets"]}
            if sum(committed.values()) == sent:
                break
            time.sleep(0.3)
        assert sum(committed.values()) == sent, (committed, sent)
        assert java.consumed > 0 and java.committed, "the Java member consumed nothing"
        assert two_owners(members) == []
    finally:
        load.halt.set()
        for m in members:
            m.stop()
            m.ended = m.ended or time.time()


def test_0113_o_java_interop(bootstrap, http, java_classes, logs):
    """librdkafka 0113 ``o_java_interop``: a librdkafka cooperative-sticky member owns two topics (2 and 6
    partitions); the Java client's CooperativeStickyAssignor joins (librdkafka's IncrementalRebalanceCli) and
    takes half; librdkafka unsubscribes from the 6-partition topic, the Java side then owns it all and exits; the
    librdkafka member ends with the 2 partitions, never having owned one the Java side held."""
    t2, t6 = new_topic(http, 2), new_topic(http, 6)
    group = f"o-java-{uuid.uuid4().hex[:8]}"
    calls = collections.Counter()

    def on_assign(c, ps):
        calls["assign"] += 1

    def on_revoke(c, ps):
        calls["revoke"] += 1

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": "C_1",
                  "partition.assignment.strategy": "cooperative-sticky", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    c.subscribe([t2, t6], on_assign=on_assign, on_revoke=on_revoke)
    java = None
    changed = None
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            c.poll(0.5)
            n = len(c.assignment())
            if n == 8 and java is None:
                java = subprocess.Popen(java_command(java_classes, "IncrementalRebalanceCli", "test1", bootstrap, t2,
                                                     t6, group, log_dir=logs, name="incrreb"),
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            if n == 4 and java is not None and changed is None:
                # one revocation; the Java member's rejoin may land in the same poll as the first assignment after
                # it (librdkafka's own run expects 2 assign calls here, polling every 500 ms on an idle machine)
                assert calls["revoke"] == 1 and calls["assign"] in (2, 3), calls
                c.subscribe([t2], on_assign=on_assign, on_revoke=on_revoke)
                changed = time.monotonic()
            if changed is not None and java.poll() is not None and n == 2 and calls["assign"] >= 5:
                break
        assert java is not None and changed is not None, (calls, c.assignment())
        assert java.wait(60) == 0
        out = java.stdout.read()
        assert "Java consumer process exiting" in out and "timed out" not in out, out
        assert sorted((tp.topic, tp.partition) for tp in c.assignment()) == [(t2, 0), (t2, 1)]
        assert time.monotonic() - changed < 30, "the group took too long to settle after the subscription change"
    finally:
        c.close()
        if java is not None and java.poll() is None:
            java.kill()
