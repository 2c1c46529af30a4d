"""``lakelog groups``: the real console script in subprocesses, on the root directly and with --url.

The root is the shared group front's: the CLI reads what the running coordinator saved
(``__consumer_offsets``) without going through it; ``--url`` asks it instead.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

from lakelog import Log
from lakelog.group.consumer_offsets import OFFSETS_TOPIC, OffsetStore

SCRIPT = Path(sys.executable).parent / "lakelog"
T0 = 1_700_000_000_000  # 2023-11-14T22:13:20Z


def lakelog(*args: str, expect: int = 0) -> subprocess.CompletedProcess:
    assert SCRIPT.exists(), f"the console script {SCRIPT} is missing: run `make install`"
    env = {k: v for k, v in os.environ.items() if k not in ("LAKELOG_ROOT", "LAKELOG_TOKEN")}
    proc = subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == expect, f"lakelog {' '.join(args)} -> {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc


def as_json(*args: str, expect: int = 0):
    return json.loads(lakelog(*args, "--json", expect=expect).stdout)


def seeded(root: str, partitions: int = 3) -> tuple[str, str]:
    """A topic with 10 records per partition (timestamps T0 + i s) and a group with committed offsets."""
    log = Log(root)
    topic = f"orders-{uuid.uuid4().hex[:6]}"
    log.create_topic(topic, partitions)
    for p in range(partitions):
        log.append(topic, [{"value": f"{p}-{i}".encode(), "timestamp": T0 + 1000 * i} for i in range(10)],
                   partition=p)
    group = f"cli-{topic}"
    OffsetStore(log).commit(group, [(topic, 0, 4, None), (topic, 1, 10, None)])
    return topic, group


def committed(root: str, group: str) -> dict[int, int]:
    return {e.partition: e.offset for e in OffsetStore(Log(root)).fetch(group)}


def test_describe_list_reset_delete_on_the_root(tmp_path):
    root_dir = str(tmp_path / "root")
    topic, group = seeded(root_dir)
    root = ["--root", root_dir]
    assert as_json(*root, "groups", "list") == [{"group": group, "state": "Empty"}]
    d = as_json(*root, "groups", "describe", group)
    assert (d["state"], d["source"], d["members"]) == ("Empty", "storage", [])
    assert [(r["partition"], r["current_offset"], r["log_end_offset"], r["lag"]) for r in d["partitions"]] == \
        [(0, 4, 10, 6), (1, 10, 10, 0)]
    text = lakelog(*root, "groups", "describe", group).stdout
    assert f"Consumer group '{group}' has no active members." in text
    assert "CURRENT-OFFSET  LOG-END-OFFSET  LAG" in text
    assert any(line.split()[:6] == [group, topic, "0", "4", "10", "6"] for line in text.splitlines())

    # a dry run (the default) prints the plan and commits nothing
    dry = lakelog(*root, "groups", "reset-offsets", group, "--topic", topic, "--to-earliest")
    assert "Dry run" in dry.stderr
    assert [line.split()[2:] for line in dry.stdout.splitlines()[1:]] == [["0", "4", "0"], ["1", "10", "0"],
                                                                         ["2", "-", "0"]]
    assert committed(root_dir, group) == {0: 4, 1: 10}

    cases = [
        (["--topic", f"{topic}:0,1", "--to-datetime", "2023-11-14T22:13:23.500Z"], {0: 4, 1: 4}),  # ts >= T0+3.5s
        (["--topic", f"{topic}:0", "--topic", f"{topic}:1", "--shift-by", "-50"], {0: 0, 1: 0}),  # clamped to 0
        (["--all-topics", "--to-offset", "99"], {0: 10, 1: 10}),  # committed partitions; clamped to the HW
    ]
    for spec, expected in cases:
        out = as_json(*root, "groups", "reset-offsets", group, *spec, "--execute")
        assert out["executed"] is True
        assert {o["partition"]: o["new_offset"] for o in out["offsets"]} == expected, spec
        assert committed(root_dir, group) == expected, spec

    # bad input: typed errors, nothing written
    err = as_json(*root, "groups", "reset-offsets", group, "--topic", f"{topic}:7", "--to-earliest", "--execute",
                  expect=1)
    assert err["error_code"] == 3
    bad = lakelog(*root, "groups", "reset-offsets", group, "--topic", topic, "--to-datetime", "yesterday", expect=2)
    assert "malformed date-time" in bad.stderr
    assert committed(root_dir, group) == {0: 10, 1: 10}

    assert as_json(*root, "groups", "delete", group) == {"group": group, "deleted_offsets": 2}
    assert as_json(*root, "groups", "describe", group, expect=1)["error_code"] == 69


def test_active_group_members_and_bootstrap(group_front, http):
    topic, group = seeded(group_front.root, partitions=2)
    joined = http.post(f"/v1/groups/{group}/members", json={"topics": [topic], "client_id": "cli-test",
                                                            "session_timeout_ms": 300_000})
    assert joined.status_code == 200, joined.text
    member = joined.json()["member_id"]
    root, boot = ["--root", group_front.root], ["--url", group_front.url]

    live = as_json("groups", "describe", group, *boot)
    assert (live["state"], live["source"], live["generation"]) == ("Stable", "front", 1)
    assert [(m["member_id"], m["client_id"]) for m in live["members"]] == [(member, "cli-test")]
    assert [(r["partition"], r["current_offset"], r["lag"], r["member_id"]) for r in live["partitions"]] == \
        [(0, 4, 6, member), (1, 10, 0, member)]
    saved = as_json(*root, "groups", "describe", group)  # the coordinator saved the rebalance in the root
    assert [m["member_id"] for m in saved["members"]] == [member] and saved["state"] == "Stable"
    text = lakelog("groups", "describe", group, *boot).stdout
    assert "CONSUMER-ID" in text and f"{topic}:0,{topic}:1" in text
    assert {"group": group, "state": "Stable"} in as_json("groups", "list", *boot)

    # Kafka resets only inactive groups (dry runs included), and deletes only empty ones
    for source in (boot, root):
        err = as_json("groups", "reset-offsets", group, "--topic", topic, "--to-earliest", *source, expect=1)
        assert err["error_code"] == 68 and "inactive" in err["message"]
    assert as_json("groups", "delete", group, *boot, expect=1)["error_code"] == 68
    assert http.delete(f"/v1/groups/{group}/members/{member}").status_code == 200

    out = as_json("groups", "reset-offsets", group, "--topic", topic, "--to-datetime", "2023-11-14T22:13:25Z",
                  "--execute", *boot)
    assert {o["partition"]: o["new_offset"] for o in out["offsets"]} == {0: 5, 1: 5}
    assert {o["partition"]: o["offset"] for o in http.get(f"/v1/groups/{group}/offsets").json()["offsets"]} == \
        {0: 5, 1: 5}
    assert as_json("groups", "delete", group, *boot) == {"group": group, "deleted_offsets": 2}
    assert as_json("groups", "describe", group, *boot, expect=1)["error_code"] == 69


def test_read_only_commands_write_nothing(tmp_path):
    root = str(tmp_path / "fresh")
    Log(root).create_topic("t", 1)
    assert as_json("--root", root, "groups", "list") == []
    assert as_json("--root", root, "groups", "describe", "g", expect=1)["error_code"] == 69
    plan = as_json("--root", root, "groups", "reset-offsets", "g", "--topic", "t", "--to-latest")
    assert plan["offsets"] == [{"topic": "t", "partition": 0, "current_offset": None, "new_offset": 0}]
    assert OFFSETS_TOPIC not in Log(root).list_topics(include_internal=True)
