"""kafkajs from npm (the reference cache's pinned packages, ``reference/npm``, which ``make test`` installs) against a
real front:
two members with kafkajs's default assignor (``RoundRobinAssigner``, a name Kafka's broker never hears of) share
a topic and read every record exactly once; then its admin client's setOffsets, resetOffsets and deleteGroups,
which join the group with an internal consumer of their own."""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from collections import Counter
from pathlib import Path

from front_process import new_topic
from reference import npm

JS = Path(__file__).with_name("kafkajs")
PARTITIONS, RECORDS = 4, 200


def test_kafkajs_group_and_admin(bootstrap, http):
    node = npm.node()  # raises, naming the install command, when node or the packages are missing
    env = {**os.environ, "NODE_PATH": str(npm.node_modules())}
    topic = new_topic(http, PARTITIONS)
    group = f"kafkajs-{uuid.uuid4().hex[:8]}"
    cfg = {"brokers": bootstrap, "topic": topic, "group": group, "partitions": PARTITIONS, "records": RECORDS}
    run = subprocess.run([node, str(JS / "groups.js"), json.dumps(cfg)], capture_output=True, text=True,
                         timeout=300, cwd=str(JS), env=env)
    steps = {}
    for line in run.stdout.splitlines():
        if line.startswith("{"):
            step = json.loads(line)
            steps[step.pop("step")] = step
    assert run.returncode == 0, (steps.get("error"), run.stderr[-2000:])
    assert steps["joined"] == {"protocol": "RoundRobinAssigner", "members": 2}
    seen = steps["consumed"]["seen"]
    reads = Counter((p, o) for _, p, o in seen)
    assert set(reads) == {(p, o) for p in range(PARTITIONS) for o in range(RECORDS // PARTITIONS)}
    assert set(reads.values()) == {1}  # every record exactly once
    assert len({member for member, _, _ in seen}) == 2  # both members read
    per = RECORDS // PARTITIONS
    assert steps["committed"]["offsets"] == [[p, per] for p in range(PARTITIONS)]
    assert steps["setOffsets"]["offsets"] == [[p, p + 1] for p in range(PARTITIONS)]
    # kafkajs commits the earliest-offset sentinel itself; a broker stores it as sent
    assert steps["resetOffsets"]["offsets"] == [[p, -2] for p in range(PARTITIONS)]
    d = steps["deleteGroups"]
    assert d["listed_before"] and not d["listed_after"]
    assert d["offsets"] == [[p, -1] for p in range(PARTITIONS)]  # nothing committed any more
