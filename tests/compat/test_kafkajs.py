"""kafkajs 2.2.4 (from npm, with its Snappy and LZ4 codecs; installed by ``python -m reference peers``) through a
scenario covering its client surface (tests/compat/kafkajs/scenario.js): admin (createTopics, fetchTopicMetadata,
listTopics, fetchOffsets, setOffsets, resetOffsets, describeGroups, listGroups, deleteGroups, describeConfigs,
alterConfigs, createPartitions, deleteTopicRecords, fetchTopicOffsets and by timestamp, describeCluster,
deleteTopics, ACLs), producers with every codec kafkajs supports (none, gzip, snappy, lz4: its zstd codec needs a
native build that fails on Node 20), an idempotent producer, a consumer group, and transactions read by a
read_committed group -- against Apache Kafka and lakelog, each step's answer compared."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from compat_support import Target, assert_same, run_both, unique
from reference import npm

SCRIPT = Path(__file__).with_name("kafkajs") / "scenario.js"


def scenario(target: Target, name: str) -> dict:
    env = {**os.environ, "NODE_PATH": str(npm.node_modules())}
    proc = subprocess.run([npm.node(), str(SCRIPT), target.bootstrap, name], capture_output=True, text=True,
                          env=env, timeout=400)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    assert lines, f"{target.name}: kafkajs printed nothing (exit {proc.returncode}):\n{proc.stderr[-3000:]}"
    return json.loads(lines[-1])


def test_kafkajs_scenario(targets):
    kafka, lakelog = run_both(targets, scenario, unique("kjs"))
    errors = {k: v for k, v in kafka.items() if isinstance(v, dict) and "error" in v}
    assert errors == {"createPartitions_fewer": {"error": "INVALID_PARTITIONS"},
                      "deleteGroups_unknown": {"error": "KafkaJSDeleteGroupsError"},
                      "createAcls": {"error": "SECURITY_DISABLED"}, "describeAcls": {"error": "SECURITY_DISABLED"},
                      "deleteAcls": {"error": "SECURITY_DISABLED"}}, errors
    assert kafka["consume_read_committed"] == ["committed-1", "committed-2"]
    print(f"kafkajs: {sum(1 for k in kafka if k != 'fatal')} steps, "
          f"{sum(1 for k in kafka if kafka[k] == lakelog.get(k))} answered as Kafka answered")
    assert_same(kafka, lakelog)
