"""The ``lakelog`` command line, run as the real console script in subprocesses, on a local root and on moto S3."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from s3_server import BUCKET, s3_options
from lakelog import Log
from lakelog.writer.partitioner import partition_for_key
from lakelog.storage.storage_root import StorageRoot

SCRIPT = Path(sys.executable).parent / "lakelog"
TIMEOUT = 120


def clean_env() -> dict[str, str]:
    """The test process's environment without anything that would point the CLI at some other root."""
    return {k: v for k, v in os.environ.items() if not k.startswith("AWS_") and k != "LAKELOG_ROOT"}


@dataclass
class Cli:
    """Runs ``lakelog`` against one root; ``log`` is a library handle on the same root."""

    env: dict[str, str]
    root_args: list[str]
    root: StorageRoot
    #: whether to also check what does not depend on the storage (output formats): once, on the local root
    check_formats: bool = True

    @property
    def log(self) -> Log:
        return Log(self.root)

    def run(self, *args: str, stdin: str | bytes | None = None, expect: int = 0,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        assert SCRIPT.exists(), f"the console script {SCRIPT} is missing: run `make install`"
        data = stdin.encode() if isinstance(stdin, str) else stdin
        proc = subprocess.run([str(SCRIPT), *self.root_args, *args], input=data, capture_output=True,
                              env=env or self.env, timeout=TIMEOUT)
        assert proc.returncode == expect, (
            f"lakelog {' '.join(args)} exited {proc.returncode}, expected {expect}\n"
            f"stdout: {proc.stdout.decode(errors='replace')}\nstderr: {proc.stderr.decode(errors='replace')}")
        return proc

    def json(self, *args: str, **kwargs):
        return json.loads(self.run(*args, "--json", **kwargs).stdout)

    def lines(self, *args: str, **kwargs) -> list[str]:
        return self.run(*args, **kwargs).stdout.decode().splitlines()


@pytest.fixture(params=["local", "s3"])
def cli(request, tmp_path) -> Cli:
    """Local: the root comes from $LAKELOG_ROOT. S3: ``--root s3://...`` with the standard AWS env vars."""
    env = clean_env()
    if request.param == "local":
        path = str(tmp_path / "root")
        env["LAKELOG_ROOT"] = path
        return Cli(env, [], StorageRoot.resolve(path))
    endpoint = request.getfixturevalue("s3_endpoint")
    uri = f"s3://{BUCKET}/{uuid.uuid4().hex}"
    env.update(AWS_ENDPOINT_URL=endpoint, AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing",
               AWS_REGION="us-east-1", AWS_ALLOW_HTTP="true")
    return Cli(env, ["--root", uri], StorageRoot.resolve(uri, s3_options(endpoint)), check_formats=False)


@pytest.fixture
def local_cli(tmp_path) -> Cli:
    path = str(tmp_path / "root")
    return Cli(dict(clean_env(), LAKELOG_ROOT=path), [], StorageRoot.resolve(path))


def test_help_lists_commands_without_loading_the_storage_stack():
    proc = subprocess.run([str(SCRIPT), "--help"], capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 0
    for command in ("topics", "produce", "consume", "get-offsets", "dump-log", "--root", "--storage-option", "--json"):
        assert command in proc.stdout
    probe = ("import sys; from lakelog.cli import build_parser; build_parser(); "
             "print(sorted(m for m in ('pyarrow', 'deltalake', 'numpy') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=TIMEOUT)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
    usage = subprocess.run([str(SCRIPT), "topics", "frobnicate"], capture_output=True, text=True, timeout=TIMEOUT)
    assert usage.returncode == 2 and "invalid choice" in usage.stderr


def test_every_command_end_to_end(cli: Cli):
    # topics create / list
    created = cli.json("topics", "create", "orders", "--partitions", "3", "--config", "retention.ms=86400000")
    assert created["name"] == "orders" and [p["partition"] for p in created["partitions"]] == [0, 1, 2]
    assert created["overrides"] == {"retention.ms": "86400000"}
    assert cli.lines("topics", "create", "timed", "--partitions", "2") == ["Created topic timed."]
    assert cli.json("topics", "list") == ["orders", "timed"]

    # produce: KEY:VALUE lines, 20 lines per commit -> 3 commits for 50 lines
    lines = [f"k{i % 7}:v{i}" for i in range(50)]
    summary = cli.json("produce", "orders", "--key-separator", ":", "--batch-size", "20",
                       stdin="\n".join(lines) + "\n")
    assert summary["records"] == 50 and summary["commits"] == 3
    # the Kafka spelling of the same, to an explicit partition
    cli.run("produce", "orders", "--partition", "2", "--property", "parse.key=true",
            "--property", "key.separator=|", stdin="x|explicit-1\ny|explicit-2")

    # consume from the beginning: every record once, keys partitioned by murmur2, offsets dense
    records = [json.loads(line) for line in cli.lines("consume", "orders", "--from-beginning", "--json")]
    assert len(records) == 52
    by_partition: dict[int, list[dict]] = {}
    for r in records:
        by_partition.setdefault(r["partition"], []).append(r)
    for p, recs in by_partition.items():
        assert [r["offset"] for r in recs] == list(range(len(recs)))
    keyed = [r for r in records if r["value"].startswith("v")]
    assert sorted(r["value"] for r in keyed) == sorted(f"v{i}" for i in range(50))
    for r in keyed:
        assert r["key"] == f"k{int(r['value'][1:]) % 7}"
        assert r["partition"] == partition_for_key(r["key"].encode(), 3)
    explicit = [r for r in records if r["value"].startswith("explicit")]
    assert [(r["partition"], r["key"], r["value"]) for r in explicit] == [(2, "x", "explicit-1"),
                                                                       (2, "y", "explicit-2")]

    # Kafka's formatter properties; --offset; the default start (latest) prints nothing for a static topic
    if cli.check_formats:
        check_consume_formats(cli, by_partition)

    # get-offsets: earliest / latest / a timestamp (records written by the library, with CreateTimes)
    cli.log.append("timed", [{"key": f"t{i}", "value": str(i), "timestamp": 1_000 * i} for i in range(1, 11)])
    timed = {p: [int(r["value"]) * 1000 for r in cli.log.read("timed", p).to_pylist()]  # value i: timestamp 1000*i
             for p in range(2)}
    assert cli.lines("get-offsets", "orders", "--time", "earliest") == ["orders:0:0", "orders:1:0", "orders:2:0"]
    assert cli.lines("get-offsets", "orders") == [f"orders:{p}:{len(by_partition.get(p, []))}" for p in range(3)]
    expected = [f"timed:{p}:{next(i for i, ts in enumerate(timed[p]) if ts >= 5500)}"
                for p in range(2) if any(ts >= 5500 for ts in timed[p])]
    assert cli.lines("get-offsets", "timed", "--time", "5500") == expected and expected
    # no record at or after the time: no line (Kafka's GetOffsetShell), null in JSON
    if cli.check_formats:
        assert cli.lines("get-offsets", "timed", "--time", "20000") == []
    assert cli.json("get-offsets", "timed", "--time", "20000") == [
        {"topic": "timed", "partition": p, "offset": None} for p in range(2)]

    # topics describe
    desc = cli.json("topics", "describe", "orders")
    assert [p["high_watermark"] for p in desc["partitions"]] == [len(by_partition.get(p, [])) for p in range(3)]
    assert sum(p["segments"] for p in desc["partitions"]) >= 4 and all(p["log_start_offset"] == 0
                                                                        for p in desc["partitions"])
    assert desc["configs"]["retention.ms"] == "86400000" and desc["configs"]["cleanup.policy"] == "delete"

    # dump-log with an orphan file planted next to the segments: reported, never read
    seg0 = cli.log.segments("orders", 0)[0]
    fs = cli.root.filesystem
    orphan = "partition=0/00000000000000009999-orphan.parquet"
    fs.copy_file(cli.root.path_for("topics", "orders", seg0.path), cli.root.path_for("topics", "orders", orphan))
    dump = cli.json("dump-log", "orders", "--partition", "0", "--records")
    (part,) = dump["partitions"]
    assert part["high_watermark"] == len(by_partition[0]) and [o["path"] for o in part["orphan_files"]] == [orphan]
    assert part["orphan_files"][0]["size"] == seg0.bytes
    dumped = [r for s in part["segments"] for r in s["records"]]
    assert [r["offset"] for r in dumped] == list(range(len(by_partition[0])))
    assert [(r["key"], r["value"]) for r in dumped] == [(r["key"], r["value"]) for r in by_partition[0]]
    assert all(r["producerId"] == -1 and r["sequence"] == -1 for r in dumped)
    for s in part["segments"]:
        assert s["last_offset"] - s["base_offset"] + 1 == s["count"] == len(s["records"])
        assert s["file"].startswith("partition=0/") and s["min_timestamp"] <= s["max_timestamp"]
    assert [s["base_offset"] for s in part["segments"][1:]] == [s["last_offset"] + 1 for s in part["segments"][:-1]]
    if cli.check_formats:
        text = cli.run("dump-log", "orders", "--partition", "0", "--records").stdout.decode()
        assert f"| offset: 0 CreateTime: {by_partition[0][0]['timestamp']}" in text and orphan in text
    assert cli.log.read("orders", 0).num_rows == len(by_partition[0])

    # topics alter: configs and a partition increase
    altered = cli.json("topics", "alter", "orders", "--config", "retention.ms=1000", "--partitions", "4")
    assert len(altered["partitions"]) == 4 and altered["configs"]["retention.ms"] == "1000"

    # errors: exit 1, "error: NAME (code): message" on stderr, the error dict on stdout with --json
    err = cli.run("topics", "describe", "nope", expect=1)
    assert err.stderr.decode().startswith("error: UNKNOWN_TOPIC_OR_PARTITION (3): ") and b"nope" in err.stderr
    err = json.loads(cli.run("topics", "alter", "orders", "--partitions", "2", "--json", expect=1).stdout)
    assert err["error_code"] == 37 and err["error_name"] == "INVALID_PARTITIONS"

    # topics delete
    assert cli.lines("topics", "delete", "timed") == ["Deleted topic timed."]
    assert cli.json("topics", "list") == ["orders"]


def check_consume_formats(cli: Cli, by_partition: dict[int, list[dict]]) -> None:
    """Kafka's formatter properties, --offset, and the default start at the latest offset."""
    text = cli.lines("consume", "orders", "--from-beginning", "--partition", "2", "--max-messages", "3",
                     "--property", "print.key=true", "--property", "print.offset=true",
                     "--property", "print.partition=true", "--property", "print.timestamp=true",
                     "--property", "key.separator=|")
    assert len(text) == 3
    first = by_partition[2][0]
    assert text[0] == f"CreateTime:{first['timestamp']}|Partition:2|Offset:0|{first['key']}|{first['value']}"
    # --offset on one partition; and the default start (latest) prints nothing for a static topic
    tail = cli.lines("consume", "orders", "--partition", "2", "--offset", str(len(by_partition[2]) - 2))
    assert tail == ["explicit-1", "explicit-2"]
    latest = cli.run("consume", "orders")
    assert latest.stdout == b"" and b"Processed a total of 0 messages" in latest.stderr


def test_admin_errors_and_text_output(local_cli: Cli):
    cli = local_cli
    cli.run("topics", "create", "orders", "--partitions", "2", "--config", "cleanup.policy=compact")
    described = cli.run("topics", "describe", "orders").stdout.decode()
    assert described.startswith("Topic: orders\tPartitionCount: 2\t") and "Configs: cleanup.policy=compact" in described
    assert "HIGH-WATERMARK" in described and "TOPIC_CONFIG" in described and "retention.ms" in described
    assert json.loads(cli.run("consume", "nope", "--json", expect=1).stdout) == {
        "error_code": 3, "error_name": "UNKNOWN_TOPIC_OR_PARTITION",
        "message": f"topic nope does not exist under {cli.root.uri}"}
    err = cli.run("topics", "create", "bad", "--config", "retention.mss=5", expect=1)
    assert err.stderr.startswith(b"error: INVALID_CONFIG (40): ") and b"retention.mss" in err.stderr
    err = cli.run("topics", "alter", "orders", "--config", "retention.ms=soon", expect=1)
    assert b"INVALID_CONFIG (40)" in err.stderr and b"retention.ms" in err.stderr
    err = cli.run("topics", "alter", "orders", "--partitions", "1", expect=1)
    assert err.stderr.startswith(b"error: INVALID_PARTITIONS (37): ")
    err = cli.run("topics", "create", "../escape", expect=1)
    assert b"INVALID_TOPIC_EXCEPTION (17)" in err.stderr
    cli.run("topics", "create", "x", "--config", "retention.ms", expect=2)  # not KEY=VALUE: usage error
    assert cli.lines("topics", "list") == ["orders"]  # nothing written by the failed commands
    assert cli.log.describe_topic("orders").configs["retention.ms"] == "604800000"


def test_storage_options_override_the_environment(s3_endpoint):
    """S3 settings given only as --storage-option (no AWS_* variables at all)."""
    uri = f"s3://{BUCKET}/{uuid.uuid4().hex}"
    opts = [f"{k}={v}" for k, v in s3_options(s3_endpoint).items()]
    args = ["--root", uri] + [a for o in opts for a in ("--storage-option", o)]
    cli = Cli(clean_env(), args, StorageRoot.resolve(uri, s3_options(s3_endpoint)))
    cli.run("topics", "create", "t")
    cli.run("produce", "t", stdin="a\nb\n")
    assert cli.lines("consume", "t", "--from-beginning") == ["a", "b"]
    assert cli.log.describe_topic("t").partitions[0].high_watermark == 2


def test_produce_line_format_and_bad_input(local_cli: Cli):
    cli = local_cli
    cli.run("topics", "create", "t")
    cli.run("produce", "t", "--property", "parse.headers=true", "--property", "parse.key=true",
            "--property", "null.marker=NULL",
            stdin="h1:a,h2:b\tk1\tv1\n\tk2\tNULL\nh3:c\tNULL\tv3\r\n")
    recs = cli.log.read("t", 0).to_pylist()
    assert [(r["key"], r["value"]) for r in recs] == [(b"k1", b"v1"), (b"k2", None), (None, b"v3")]
    assert recs[0]["headers"] == [{"key": "h1", "value": b"a"}, {"key": "h2", "value": b"b"}]
    assert recs[1]["headers"] is None and recs[2]["headers"] == [{"key": "h3", "value": b"c"}]
    text = cli.lines("consume", "t", "--from-beginning", "--property", "print.headers=true",
                     "--property", "print.key=true", "--property", "null.literal=<null>")
    assert text == ["h1:a,h2:b\tk1\tv1", "NO_HEADERS\tk2\t<null>", "h3:c\t<null>\tv3"]

    # a line without the separator fails its batch (nothing of it written), like Kafka; ignore.error keeps it
    err = cli.run("produce", "t", "--key-separator", ":", stdin="a:1\nno separator\n", expect=1)
    assert b"INVALID_RECORD" in err.stderr and b"line number 2" in err.stderr
    assert cli.log.describe_topic("t").partitions[0].high_watermark == 3
    cli.run("produce", "t", "--key-separator", ":", "--property", "ignore.error=true", stdin="a:1\nplain\n")
    assert [(r["key"], r["value"]) for r in cli.log.read("t", 0, start=3).to_pylist()] == [(b"a", b"1"),
                                                                                         (None, b"plain")]
    # usage errors exit 2
    assert b"unknown --property" in cli.run("produce", "t", "--property", "parse.kee=true", expect=2).stderr
    assert b"--offset requires --partition" in cli.run("consume", "t", "--offset", "0", expect=2).stderr
    cli.run("consume", "t", "--from-beginning", "--offset", "0", "--partition", "0", expect=2)
    cli.run("get-offsets", "t", "--time", "yesterday", expect=2)
    assert cli.lines("get-offsets", "t", "--time", "-2") == ["t:0:0"]  # Kafka's spelling of earliest
    err = cli.run("produce", "t", "--partition", "5", stdin="x\n", expect=1)
    assert b"UNKNOWN_TOPIC_OR_PARTITION" in err.stderr
    err = cli.run("consume", "t", "--partition", "0", "--offset", "99", expect=1)
    assert b"OFFSET_OUT_OF_RANGE" in err.stderr
    assert b"Unsupported storage root" in cli.run("--root", "gs://bucket/x", "topics", "list", expect=2).stderr
    # a storage option the root refuses: a usage error naming it (exit 2), no traceback
    err = cli.run("--root", "s3://bucket/x", "--storage-option", "commit_put_copies=4", "topics", "list",
                  expect=2).stderr
    assert b"commit_put_copies must be 1, 2 or 3" in err and b"Traceback" not in err
    err = cli.run("--root", "s3://bucket/x", "--storage-option", "timeout=abc", "topics", "list", expect=2).stderr
    assert b"timeout must be a positive duration" in err and b"Traceback" not in err
    # a LAKELOG_* setting of the wrong type: serve refuses to start, naming it (exit 2), no traceback; a typo in a
    # boolean is not read as false
    for var, value in (("LAKELOG_EAGER_UPLOADS", "maybe"), ("LAKELOG_LINGER_MS", "abc"), ("LAKELOG_BATCH_SIZE", "1MB")):
        err = cli.run("serve", "--port", "0", env={**cli.env, var: value}, expect=2).stderr
        assert f"{var}={value!r} is not a valid".encode() in err and b"Traceback" not in err, err


def test_consume_follow_polls_until_idle_timeout_or_ctrl_c(local_cli: Cli):
    cli = local_cli
    cli.run("topics", "create", "t", "--partitions", "2")
    log = cli.log
    log.append("t", [{"key": f"k{i}", "value": f"before-{i}"} for i in range(3)])
    cmd = [str(SCRIPT), "consume", "t", "--from-beginning", "--follow", "--poll-interval-ms", "100",
           "--timeout-ms", "4000"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=cli.env)
    try:
        seen = [proc.stdout.readline() for _ in range(3)]  # it is running and has caught up
        log.append("t", [{"key": f"k{i}", "value": f"after-{i}"} for i in range(3)])
        log.alter_topic("t", partitions=3)
        log.append("t", [{"value": "in-new-partition"}], partition=2)
        out, err = proc.communicate(timeout=TIMEOUT)  # exits by itself 4 s after the last record
    finally:
        proc.kill()
    values = sorted(line.strip().decode() for line in seen + out.splitlines())
    assert values == sorted([f"before-{i}" for i in range(3)] + [f"after-{i}" for i in range(3)]
                            + ["in-new-partition"])
    assert proc.returncode == 0 and b"Processed a total of 7 messages" in err

    # As a terminal's foreground job gets Ctrl-C: a suite started in the background by a script (`cmd &`) runs
    # with SIGINT ignored, which its children would inherit (Python installs no KeyboardInterrupt then).
    proc = subprocess.Popen(cmd[:-2], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=cli.env,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        assert all(proc.stdout.readline() for _ in range(7))  # it has printed everything and is following
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=TIMEOUT)
    finally:
        proc.kill()
    assert proc.returncode == 0 and b"Processed a total of 7 messages" in err


@pytest.mark.parametrize("args, expected", [
    (("topics", "describe", "--topic", "kafka-spelled"), "kafka-spelled"),
    (("get-offsets", "--topic", "kafka-spelled"), "kafka-spelled:1:0"),
    (("dump-log", "--topic", "kafka-spelled", "--partition", "1"), "kafka-spelled"),
])
def test_kafka_tools_topic_spelling(local_cli, args, expected):
    """``--topic T`` works wherever a topic is positional, as with kafka-topics / kafka-get-offsets."""
    local_cli.run("topics", "create", "--topic", "kafka-spelled", "--partitions", "2")
    assert len(local_cli.log.describe_topic("kafka-spelled").partitions) == 2
    assert expected in local_cli.run(*args).stdout.decode()


def test_kafka_tools_produce_and_consume_with_topic_flag(local_cli):
    local_cli.run("topics", "create", "--topic", "flagged")
    local_cli.run("produce", "--topic", "flagged", stdin="one\ntwo\n")
    assert local_cli.lines("consume", "--topic", "flagged", "--from-beginning") == ["one", "two"]


@pytest.mark.parametrize("args, message", [
    (("get-offsets",), "a topic is required"),
    (("get-offsets", "a", "--topic", "b"), "the topic is given twice"),
])
def test_topic_flag_errors(local_cli, args, message):
    proc = local_cli.run(*args, expect=2)
    assert message in proc.stderr.decode()


@pytest.fixture(scope="module")
def running_front(tmp_path_factory):
    """A real ``lakelog serve`` with a Kafka listener, on a root of its own."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "api"))
    from front_process import kafka_front_process

    root = str(tmp_path_factory.mktemp("cli-front") / "root")
    front = kafka_front_process(root, tmp_path_factory.mktemp("cli-front-logs")).start()
    yield front, Cli(dict(clean_env(), LAKELOG_ROOT=root), [], StorageRoot.resolve(root))
    front.stop()


def test_every_kafka_tool_over_the_kafka_listener(running_front):
    """``--bootstrap-server HOST:PORT`` is a Kafka listener, as in Kafka's tools: topics, produce, consume,
    get-offsets and groups all work through it, and agree with the root they write."""
    front, cli = running_front
    boot = ["--bootstrap-server", front.bootstrap]
    assert cli.lines("topics", "create", "kt", "--partitions", "3", "--config", "retention.ms=86400000",
                     *boot) == ["Created topic kt."]
    assert "kt" in cli.json("topics", "list", *boot)
    lines = [f"k{i}:v{i}" for i in range(12)]
    summary = cli.json("produce", "kt", "--key-separator", ":", *boot, stdin="\n".join(lines) + "\n")
    assert summary["records"] == 12
    # keys land where Kafka's Java producer puts them (murmur2), as on the root path
    for p in range(3):
        keys = [r["key"] for r in cli.log.read("kt", p).select(["key"]).to_pylist()]
        assert all(partition_for_key(k, 3) == p for k in keys), (p, keys)
    printed = cli.lines("consume", "kt", "--from-beginning", "--property", "print.key=true",
                        "--property", "key.separator=:", *boot)
    assert sorted(printed) == sorted(lines)
    assert cli.lines("consume", "kt", *boot) == []  # from the latest offset, as Kafka's console consumer
    one = cli.json("consume", "kt", "--partition", "1", "--offset", "1", "--max-messages", "1", *boot)
    assert one["partition"] == 1 and one["offset"] == 1
    out_of_range = cli.run("consume", "kt", "--partition", "0", "--offset", "999", *boot, expect=1)
    assert b"OFFSET_OUT_OF_RANGE" in out_of_range.stderr
    hws = {p: cli.log.describe_topic("kt").partitions[p].high_watermark for p in range(3)}
    assert cli.lines("get-offsets", "kt", *boot) == [f"kt:{p}:{hws[p]}" for p in range(3)]
    assert cli.lines("get-offsets", "kt", "--time", "earliest", *boot) == [f"kt:{p}:0" for p in range(3)]
    assert cli.lines("get-offsets", "kt", "--time", str(2**62), *boot) == []  # nothing that late: no line
    described = cli.json("topics", "describe", "kt", *boot)
    assert described["overrides"] == {"retention.ms": "86400000"}
    assert [p["high_watermark"] for p in described["partitions"]] == [hws[p] for p in range(3)]
    cli.run("topics", "alter", "kt", "--config", "retention.ms=3600000", "--partitions", "4", *boot)
    assert cli.log.describe_topic("kt").overrides["retention.ms"] == "3600000"
    assert len(cli.log.describe_topic("kt").partitions) == 4
    missing = cli.run("produce", "nope", *boot, stdin="x\n", expect=1)
    assert b"UNKNOWN_TOPIC_OR_PARTITION" in missing.stderr

    # a group that committed through Kafka: listed, described with its lag, reset
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": front.bootstrap, "group.id": "cli-group",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe(["kt"])
    got, deadline = 0, __import__("time").monotonic() + 60
    while got < 12 and __import__("time").monotonic() < deadline:
        msg = consumer.poll(0.5)
        got += msg is not None and msg.error() is None
    consumer.commit(asynchronous=False)
    consumer.close()
    assert got == 12
    assert ["cli-group", "Empty"] in [[g["group"], g["state"]] for g in cli.json("groups", "list", *boot)]
    described = cli.json("groups", "describe", "cli-group", *boot)
    assert sum(r["current_offset"] or 0 for r in described["partitions"]) == 12
    assert all(r["lag"] == 0 for r in described["partitions"])
    reset = cli.json("groups", "reset-offsets", "cli-group", "--all-topics", "--to-earliest", "--execute", *boot)
    assert reset["executed"] and all(r["new_offset"] == 0 for r in reset["offsets"])
    assert sum(r["lag"] for r in cli.json("groups", "describe", "cli-group", *boot)["partitions"]) == 12
    deleted = cli.json("groups", "delete", "cli-group", *boot)  # DeleteGroups
    assert deleted["group"] == "cli-group" and deleted["deleted_offsets"] >= 3, deleted
    assert "cli-group" not in [g["group"] for g in cli.json("groups", "list", *boot)]

    cli.run("topics", "delete", "kt", *boot)
    assert "kt" not in cli.json("topics", "list")


def test_http_front_gets_its_own_flag(running_front):
    """``--url`` is the front's HTTP address; the old spellings are refused with an error naming it."""
    front, cli = running_front
    cli.run("topics", "create", "via-http")
    cli.run("produce", "via-http", "--url", front.url, stdin="over-http\n")
    assert cli.lines("consume", "via-http", "--from-beginning") == ["over-http"]
    assert cli.run("groups", "list", "--url", front.url).returncode == 0
    http_port = front.url.rsplit(":", 1)[1]
    for args in (("produce", "via-http", "--bootstrap-server", front.url),   # a URL
                 ("produce", "via-http", "--bootstrap", front.url),          # lakelog's old flag
                 ("consume", "via-http", "--bootstrap-server", f"127.0.0.1:{http_port}"),  # the HTTP port
                 ("groups", "list", "--bootstrap-server", f"127.0.0.1:{http_port}")):
        refused = cli.run(*args, stdin="x\n", expect=2)
        err = refused.stderr.decode()
        assert "--kafka-listener" in err or "--url" in err, (args, err)
        assert "Traceback" not in err
    both = cli.run("groups", "list", "--url", front.url, "--bootstrap-server", front.bootstrap, expect=2)
    assert b"not both" in both.stderr
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    nobody = cli.run("topics", "list", "--bootstrap-server", f"127.0.0.1:{closed}", expect=1)
    assert b"NETWORK_EXCEPTION" in nobody.stderr and b"Traceback" not in nobody.stderr


def test_job_runs_without_an_activated_venv(local_cli):
    """``lakelog job`` runs a maintenance job with this installation's spark-submit, PATH without the venv."""
    local_cli.run("topics", "create", "jobbed", "--config", "cleanup.policy=compact")
    env = dict(local_cli.env, PATH="/usr/local/bin:/usr/bin:/bin")
    env.pop("VIRTUAL_ENV", None)
    env.pop("PYSPARK_PYTHON", None)
    proc = local_cli.run("job", "retention", "--dry-run", env=env)
    assert b"retention (dry run)" in proc.stdout
    bad = local_cli.run("job", "nosuchjob", expect=2, env=env)
    assert b"invalid choice" in bad.stderr
