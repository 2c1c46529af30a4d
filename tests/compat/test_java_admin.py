"""Kafka's Java AdminClient (kafka-clients 4.1.1) against lakelog and Apache Kafka: every admin API lakelog serves
(tests/compat/java/AdminProbe.java, run in the session's tool JVM of each cluster), each call's answer compared."""

from __future__ import annotations

import json

from compat_support import Target, assert_same, run_both, unique
from tool_session import ToolSession


def probe(target: Target, name: str, sessions: dict[str, ToolSession]) -> dict:
    got = sessions[target.name].run(["AdminProbe", target.bootstrap, name])
    assert got["code"] == 0, f"{target.name}: AdminProbe exited {got['code']}:\n{got['err'][-3000:]}"
    return json.loads([line for line in got["out"].splitlines() if line.startswith("{")][-1])


def test_java_admin_client(targets, tool_sessions):
    kafka, lakelog = run_both(targets, probe, unique("java"), tool_sessions)
    assert kafka["01_createTopics"] == "ok" and kafka["29_describeClientQuotas"] == {
        "producer_byte_rate": 1048576.0, "request_percentage": 50.0}
    assert_same(kafka, lakelog, {"*_describeConfigs*/min.insync.replicas/1": "replication",
                                 "*_describeConfigs*/confluent.*": "lakelog-configs",
                                 "*_describeConfigs*/lakelog.*": "lakelog-configs",
                                 "*_describeConfigs*/log.retention.check.interval.ms": "lakelog-configs"})
