"""Kafka's own command-line tools (Apache Kafka 4.1.1, from Maven Central) against lakelog, and against Apache Kafka
for comparison: kafka-topics, kafka-configs, kafka-get-offsets, kafka-delete-records, kafka-consumer-groups and
kafka-acls run one after another in one JVM per cluster (tests/compat/java/ToolRunner.java, the session's
``tool_sessions``), their exit codes and output compared line by line once the clusters' own ids are masked.
kafka-console-producer and kafka-console-consumer run in lakelog's tool JVM; kafka-verifiable-producer and
kafka-verifiable-consumer (the tools Kafka's system tests check delivery with) run as their own processes against
lakelog (the producer reports its totals from a shutdown hook), and their reports must show nothing lost or
duplicated.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections import Counter
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from compat_support import TIMEOUT, Target, assert_same, run_both, unique
from reference.kafka import run_tool, tool_command
from tool_session import ToolSession

MASKS = [(re.compile(r"TopicId: \S+"), "TopicId: <id>"),  # identity
         (re.compile(r"(rdkafka|consumer)-[0-9a-f-]{20,}"), "<member>"),  # identity
         (re.compile(r"/127\.0\.0\.1"), "/<host>"),
         (re.compile(r"127\.0\.0\.1:\d+"), "<broker>"),  # identity: the group coordinator's address
         # replication: eligible leader replicas (KIP-966) are Kafka's ("N/A" where DescribeTopicPartitions is not
         # served), and a formatted Kafka 4 node sets min.insync.replicas as a cluster-wide dynamic default
         (re.compile(r"Elr: [^\t]*\tLastKnownElr: ?\S*"), "Elr: <replication>"),
         (re.compile(r"(?<=Configs: )min\.insync\.replicas=1,?"), "")]


def masked(text: str) -> list[str]:
    for pattern, replacement in MASKS:
        text = pattern.sub(replacement, text)
    return [line.rstrip() for line in text.splitlines()]


def seed(target: Target, topic: str, group: str, base_ts: int) -> None:
    """Ten records in three partitions, a second apart from ``base_ts``, and committed offsets of ``group``."""
    p = Producer(target.conf(**{"linger.ms": 0}))
    for i in range(10):
        p.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=i % 3, timestamp=base_ts + i * 1000)
    assert p.flush(TIMEOUT) == 0
    c = Consumer(target.conf(**{"group.id": group, "enable.auto.commit": False}))
    deadline = time.monotonic() + TIMEOUT
    while True:  # a coordinator moving or loading (Kafka's, under load) answers a retriable error: retry as clients do
        try:
            c.commit(offsets=[TopicPartition(topic, 0, 2), TopicPartition(topic, 1, 3)], asynchronous=False)
            break
        except KafkaException as e:
            moving = e.args[0].code() in (KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
                                          KafkaError.COORDINATOR_NOT_AVAILABLE)
            if not (moving or e.args[0].retriable()) or time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    c.close()


def tools(target: Target, t: str, sessions: dict[str, ToolSession], workdir: Path, base_ts: int) -> dict:
    """Every tool's answer. The records' timestamps are recent (``base_ts``, a minute ago) and retention.ms stays
    above their age: Kafka's retention check would otherwise delete them in the middle of the scenario."""
    session = sessions[target.name]
    b = ["--bootstrap-server", target.bootstrap]
    group, client = f"{t}-group", f"{t}-client"
    first = session.run_all([
        ["kafka-topics", *b, "--create", "--topic", t, "--partitions", "3", "--replication-factor", "1",
         "--config", "retention.ms=3600000"],
        ["kafka-topics", *b, "--create", "--topic", f"{t}-2", "--partitions", "2"],
    ])
    seed(target, t, group, base_ts)
    offsets_json = workdir / f"{target.name}-delete.json"
    offsets_json.write_text(json.dumps({"version": 1, "partitions": [{"topic": t, "partition": 0, "offset": 2}]}))
    cfg = ["kafka-configs", *b, "--entity-type", "topics", "--entity-name", t]
    commands = {
        "topics_list": ["kafka-topics", *b, "--list", "--topic", f"{t}.*"],
        "topics_describe": ["kafka-topics", *b, "--describe", "--topic", t],
        "topics_alter": ["kafka-topics", *b, "--alter", "--topic", f"{t}-2", "--partitions", "3"],
        "topics_describe_2": ["kafka-topics", *b, "--describe", "--topic", f"{t}-2"],
        "topics_create_again": ["kafka-topics", *b, "--create", "--topic", f"{t}-2", "--partitions", "1"],
        "topics_under_replicated": ["kafka-topics", *b, "--describe", "--under-replicated-partitions",
                                    "--topic", t],
        "topics_delete": ["kafka-topics", *b, "--delete", "--topic", f"{t}-2"],
        "topics_describe_missing": ["kafka-topics", *b, "--describe", "--topic", f"{t}-2"],
        "configs_describe": [*cfg, "--describe"],
        "configs_add": [*cfg, "--alter", "--add-config", "retention.ms=86400000,cleanup.policy=[compact,delete]"],
        "configs_after_add": [*cfg, "--describe"],
        "configs_delete": [*cfg, "--alter", "--delete-config", "retention.ms"],
        "configs_all": [*cfg, "--describe", "--all"],
        "configs_bad": [*cfg, "--alter", "--add-config", "retention.ms=soon"],
        "quota_add": ["kafka-configs", *b, "--alter", "--entity-type", "clients", "--entity-name", client,
                      "--add-config", "producer_byte_rate=1048576,consumer_byte_rate=2097152"],
        "offsets": ["kafka-get-offsets", *b, "--topic", t],
        "offsets_earliest": ["kafka-get-offsets", *b, "--topic", t, "--time", "-2"],
        "offsets_max_timestamp": ["kafka-get-offsets", *b, "--topic", t, "--time", "-3"],
        "offsets_by_time": ["kafka-get-offsets", *b, "--topic", t, "--time", str(base_ts + 4000)],
        "delete_records": ["kafka-delete-records", *b, "--offset-json-file", str(offsets_json)],
        "offsets_after_delete": ["kafka-get-offsets", *b, "--topic", t, "--time", "-2"],
        "groups_list": ["kafka-consumer-groups", *b, "--list"],
        "groups_describe": ["kafka-consumer-groups", *b, "--describe", "--group", group],
        "groups_state": ["kafka-consumer-groups", *b, "--describe", "--group", group, "--state"],
        "groups_reset": ["kafka-consumer-groups", *b, "--reset-offsets", "--group", group, "--topic", t,
                         "--to-earliest", "--execute"],
        "groups_shift_dry_run": ["kafka-consumer-groups", *b, "--reset-offsets", "--group", group, "--topic",
                                 f"{t}:1", "--shift-by", "1", "--dry-run"],
        "groups_delete_offsets": ["kafka-consumer-groups", *b, "--delete-offsets", "--group", group, "--topic",
                                  f"{t}:1"],
        "groups_after": ["kafka-consumer-groups", *b, "--describe", "--group", group],
        "groups_delete": ["kafka-consumer-groups", *b, "--delete", "--group", group],
        "groups_describe_deleted": ["kafka-consumer-groups", *b, "--describe", "--group", group],
        "acls_list": ["kafka-acls", *b, "--list"],
        # Kafka's broker applies a quota after answering its alteration (KRaft replays it from the metadata log)
        "quota_describe": ["kafka-configs", *b, "--describe", "--entity-type", "clients", "--entity-name", client],
    }
    got = dict(zip(commands, session.run_all(list(commands.values()))))
    out = {"create": [r["code"] for r in first]}
    for name, r in got.items():
        lines = masked(r["out"])
        if name == "groups_list":
            lines = sorted(line for line in lines if line.startswith(t))
        out[name] = {"code": r["code"], "out": by_config(lines) if name == "configs_all" else lines}
    return out


def by_config(lines: list[str]) -> dict[str, str]:
    """``kafka-configs --describe --all`` as config name -> its line (a heading under ""): a set of key=value
    lines, so a config one cluster describes and the other does not is a difference at its own name rather than
    a shift of every line after it."""
    return {(line.strip().split("=", 1)[0] if line.startswith(" ") else ""): line for line in lines}


# Configs lakelog describes beside Kafka's (``lakelog-configs``), and min.insync.replicas's synonyms (``replication``)
CONFIG_DIFFERENCES = {**{f"configs_all/out/{key}": "lakelog-configs" for key in (
    "confluent.*.schema.validation", "confluent.*.subject.name.strategy", "lakelog.*",
    "log.retention.check.interval.ms")}, "configs_all/out/min.insync.replicas": "replication"}


def test_tools_against_both(targets, tool_sessions, tmp_path):
    kafka, lakelog = run_both(targets, tools, unique("tools"), tool_sessions, tmp_path, int(time.time() * 1000) - 60_000)
    assert kafka["create"] == [0, 0] and kafka["offsets_after_delete"]["out"][0].endswith(":0:2")
    assert "retention.ms" in kafka["configs_all"]["out"]
    assert_same(kafka, lakelog, CONFIG_DIFFERENCES)


# -- console and verifiable clients, as processes against lakelog --------------------------------------------


def test_console_producer_and_consumer(lakelog_front, tool_sessions, tmp_path):
    session, b = tool_sessions["lakelog"], ["--bootstrap-server", lakelog_front.bootstrap]
    t = unique("console")

    def run(*command: str, stdin: Path | None = None) -> str:
        got = session.run(list(command), stdin=stdin)
        assert got["code"] == 0, got
        return got["out"]

    run("kafka-topics", *b, "--create", "--topic", t, "--partitions", "2")
    lines = tmp_path / "lines.txt"
    lines.write_text("".join(f"k{i}:v{i}\n" for i in range(20)))
    run("kafka-console-producer", *b, "--topic", t, "--property", "parse.key=true", "--property", "key.separator=:",
        "--producer-property", "compression.type=lz4", stdin=lines)
    got = run("kafka-console-consumer", *b, "--topic", t, "--from-beginning", "--max-messages", "20",
              "--timeout-ms", "60000", "--group", f"{t}-g", "--property", "print.key=true",
              "--property", "print.partition=true", "--property", "print.offset=true")
    rows = [line.split("\t") for line in got.splitlines() if line.startswith("Partition:")]
    assert sorted(r[-2:] for r in rows) == sorted([f"k{i}", f"v{i}"] for i in range(20)), got
    per_partition = Counter(r[0] for r in rows)
    offsets = {p: sorted(int(r[1].split(":")[1]) for r in rows if r[0] == p) for p in per_partition}
    assert all(o == list(range(len(o))) for o in offsets.values()), offsets
    described = run("kafka-consumer-groups", *b, "--describe", "--group", f"{t}-g")
    assert all(re.search(rf"{t}\s+{p}\s+{n}\s+{n}\s+0", described) for p, n in
               ((int(p.split(":")[1]), c) for p, c in per_partition.items())), described


def events(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def test_verifiable_producer_and_consumer(lakelog_front, tool_sessions, tmp_path):
    """kafka-verifiable-producer acknowledges N values (idempotent, acks=all); kafka-verifiable-consumer, in a
    group that commits, reads each acknowledged value exactly once and commits past them. The tool sets retries=0
    of its own, which an idempotent producer refuses at construction: the config sets Kafka's default again."""
    b = lakelog_front.bootstrap
    t, n = unique("verifiable"), 3000
    created = tool_sessions["lakelog"].run(["kafka-topics", "--bootstrap-server", b, "--create", "--topic", t,
                                            "--partitions", "3"])
    assert created["code"] == 0, created
    prod = run_tool("kafka-verifiable-producer", "--bootstrap-server", b, "--topic", t, "--max-messages", str(n),
                    "--acks", "-1", "--producer.config", str(_props(tmp_path, "enable.idempotence=true", "retries=2147483647")),
                    log_dir=tmp_path, timeout=300)
    evs = events(prod.stdout)
    acked = [e for e in evs if e["name"] == "producer_send_success"]
    assert not [e for e in evs if e["name"] == "producer_send_error"], prod.stdout[-2000:]
    assert sorted(int(e["value"]) for e in acked) == list(range(n))
    assert evs[-1]["name"] == "tool_data" and evs[-1]["acked"] == n, evs[-1]
    where = {(e["partition"], e["offset"]) for e in acked}
    assert len(where) == n  # no two values at one offset

    cons = subprocess.run(tool_command("kafka-verifiable-consumer", "--bootstrap-server", b, "--topic", t,
                                       "--group-id", f"{t}-g", "--max-messages", str(n), "--reset-policy",
                                       "earliest", "--verbose", log_dir=tmp_path),
                          capture_output=True, text=True, timeout=300)
    evs = events(cons.stdout)
    consumed = [r for e in evs if e["name"] == "records_consumed" for r in e.get("partitions", [])]
    records = [(r["partition"], o) for r in consumed for o in range(r["minOffset"], r["maxOffset"] + 1)]
    assert sorted(records) == sorted(where), "lost or duplicated records"
    commits = [e for e in evs if e["name"] == "offsets_committed"]
    assert commits and all(e["success"] for e in commits), commits[-3:]
    final = {(o["topic"], o["partition"]): o["offset"] for e in commits for o in e["offsets"]}
    ends = Counter(p for p, _ in where)
    assert final == {(t, p): c for p, c in ends.items()}, final


def _props(tmp_path: Path, *lines: str) -> Path:
    path = tmp_path / f"props-{time.monotonic_ns()}.properties"
    path.write_text("".join(f"{line}\n" for line in lines))
    return path
