"""``make demo``: a guided tour of lakelog on a fresh ``./demo-data`` root, printing every step.

The demo is :data:`STEPS`, a list of :class:`Step` run in order; each prints
its title, then the shell command it runs (through the real ``lakelog``
command line, as a subprocess) or the Python it executes, then the output.
Later features append their own steps (``STEPS.append(Step(...))`` or a new
entry in the list): HTTP produce, Spark reads, maintenance jobs.

Run it from the repository root: ``make demo`` or ``.venv/bin/python -m lakelog.demo``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

TOPIC = "orders"
T0 = 1_700_000_000_000  # 2023-11-14T22:13:20Z: fixed CreateTime timestamps make the time lookups reproducible


@dataclass
class Demo:
    """What the steps share: the root directory, the environment of the shell commands, a library handle."""

    root: Path
    env: dict[str, str] = field(default_factory=dict)
    cli: str = "lakelog"  # how the user types the command line from the demo's directory: .venv/bin/lakelog
    _log: object = None

    @property
    def log(self):
        """A :class:`lakelog.Log` on the demo root (opened on first use)."""
        if self._log is None:
            from lakelog import Log

            self._log = Log(str(self.root))
        return self._log

    def typed(self, command: str) -> str:
        """``command`` as the user types it: each ``lakelog`` command word becomes :attr:`cli`."""
        return re.sub(r"(?<![\w./-])lakelog (?=[a-z-])", f"{self.cli} ", command)

    def shell(self, command: str) -> str:
        """Show ``command`` as typed, run exactly that with ``/bin/sh`` (LAKELOG_ROOT exported); fail on error."""
        command = self.typed(command)
        print(f"$ {command}", flush=True)
        proc = subprocess.run(command, shell=True, env=self.env, cwd=self.root.parent, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
        if proc.stdout:
            print(textwrap.indent(proc.stdout.rstrip("\n"), "  "), flush=True)
        if proc.returncode != 0:
            raise SystemExit(f"demo step failed: {command!r} exited with {proc.returncode}")
        return proc.stdout

    def python(self, code: str, namespace: dict | None = None) -> dict:
        """Show and execute ``code`` (``log`` is bound to the demo's Log); returns its namespace."""
        code = textwrap.dedent(code).strip("\n")
        print(textwrap.indent(code, ">>> ", lambda _: True), flush=True)
        ns = {"log": self.log, **(namespace or {})}
        exec(compile(code, "<demo>", "exec"), ns)
        return ns


@dataclass(frozen=True)
class Step:
    title: str
    run: Callable[[Demo], None]


def fresh_root(demo: Demo) -> None:
    if demo.root.exists():
        shutil.rmtree(demo.root)
    demo.root.mkdir(parents=True)
    print(f"$ rm -rf {demo.root.name} && export LAKELOG_ROOT=./{demo.root.name}")
    print("  (every lakelog command below uses this root; --root or s3://bucket/prefix work the same)")


def create_topic(demo: Demo) -> None:
    demo.shell(f"lakelog topics create {TOPIC} --partitions 3 --config retention.ms=604800000")
    demo.shell("lakelog topics list")


def produce_with_python(demo: Demo) -> None:
    demo.python(f"""
        records = [{{"key": f"customer-{{i % 4}}", "value": f"order {{i}}", "timestamp": {T0} + i * 1000}}
                   for i in range(12)]
        for r in log.append("{TOPIC}", records):  # one Delta commit; partition = murmur2(key) % 3
            print(f"partition {{r.partition}}: offsets {{r.base_offset}}..{{r.last_offset}}")
    """)


def produce_with_cli(demo: Demo) -> None:
    demo.shell(r"printf 'customer-1:refund 3\ncustomer-2:order 12\ncustomer-9:order 13\n' | "
               f"lakelog produce {TOPIC} --property parse.key=true --property key.separator=:")


def idempotent_retry(demo: Demo) -> None:
    demo.python(f"""
        import pyarrow as pa
        from lakelog import PartitionBatch

        producer = log.init_producer()  # a durable producer id, epoch 0
        batch = PartitionBatch(0, pa.table({{"key": [b"customer-0"], "value": [b"order 14"]}}),
                               producer.producer_id, producer.producer_epoch, base_sequence=0)
        first = log.append_batches("{TOPIC}", [batch])[0]
        retry = log.append_batches("{TOPIC}", [batch])[0]  # e.g. after a timeout: same sequence number
        print("first:", first.base_offset, "retry:", retry.base_offset, "duplicate:", retry.duplicate)
    """)


def describe(demo: Demo) -> None:
    demo.shell(f"lakelog topics describe {TOPIC}")


def consume(demo: Demo) -> None:
    demo.shell(f"lakelog consume {TOPIC} --from-beginning --property print.partition=true "
               "--property print.offset=true --property print.key=true")
    demo.shell(f"lakelog consume {TOPIC}   # starts at the latest offset, like Kafka: nothing new to print")


def fetch_with_python(demo: Demo) -> None:
    demo.python(f"""
        result = log.fetch("{TOPIC}", partition=0, offset=0, max_records=3)
        for r in result.records.to_pylist():
            print(r["offset"], r["key"], r["value"], r["timestamp"])
        print("high watermark:", result.high_watermark, "next offset:", result.next_offset)
    """)


def offsets(demo: Demo) -> None:
    demo.shell(f"lakelog get-offsets {TOPIC} --time earliest")
    demo.shell(f"lakelog get-offsets {TOPIC} --time latest")
    demo.shell(f"lakelog get-offsets {TOPIC} --time {T0 + 6000}   # first offset with timestamp >= T")


def dump_log(demo: Demo) -> None:
    demo.shell(f"lakelog dump-log {TOPIC} --partition 0 --records")


@contextmanager
def _running_front(demo: Demo) -> Iterator[tuple[str, str]]:
    """Start ``lakelog serve`` on a free loopback port; yields (url, its start-up output); stops it after."""
    import signal
    import socket
    import tempfile

    import httpx

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    command = demo.typed(f"lakelog serve --port {port}")
    print(f"$ {command} &", flush=True)
    output = tempfile.TemporaryFile(mode="w+")
    front = subprocess.Popen(command, shell=True, env=demo.env, cwd=demo.root.parent, text=True,
                             stdout=output, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"{url}/v1/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if front.poll() is not None or time.monotonic() > deadline:
                output.seek(0)
                raise SystemExit(f"demo step failed: the front did not start:\n{output.read()}")
            time.sleep(0.1)
        output.seek(0)
        yield url, output.read()
    finally:
        os.killpg(front.pid, signal.SIGTERM)  # graceful: pending commits finish first
        front.wait(timeout=60)
        output.close()
        print("  (front stopped)", flush=True)


def http_front(demo: Demo) -> None:
    with _running_front(demo) as (url, startup):
        print(textwrap.indent(startup.rstrip("\n"), "  "), flush=True)  # its no-auth warning
        demo.python(f"""
            from lakelog.client import Admin, Producer

            with Producer("{url}") as producer:  # idempotent: retries never duplicate
                futures = [producer.send("{TOPIC}", f"http order {{i}}".encode(), key=f"customer-{{i % 4}}")
                           for i in range(6)]
                for f in futures:
                    meta = f.result()  # acknowledged after the durable commit
                    print(f"partition {{meta.partition}} offset {{meta.offset}}")
            admin = Admin("{url}")
            admin.commit_offsets("billing", [("{TOPIC}", 0, 2, "processed up to 2"), ("{TOPIC}", 1, 1, None)])
            for o in admin.fetch_offsets("billing"):
                print(f"{{o['topic']}}-{{o['partition']}}: committed {{o['offset']}} lag {{o['lag']}} "
                      f"({{o['metadata']!r}})")
        """)


def _spark(demo: Demo):
    """The demo's local[2] SparkSession (conf/spark-defaults.conf; workers run this interpreter)."""
    os.environ.setdefault("SPARK_CONF_DIR", str(Path(__file__).resolve().parent.parent / "conf"))
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    if SparkSession.getActiveSession() is None:
        print("  (starting Spark: a JVM starts first, which takes several seconds)", flush=True)
    spark = SparkSession.builder.master("local[2]").appName("lakelog-demo").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def spark_batch(demo: Demo) -> None:
    demo.python(f"""
        # no registration: PySpark finds the installed pyspark_lakelog module
        df = (spark.read.format("lakelog").option("subscribe", "{TOPIC}")
              .option("startingOffsets", "earliest").load("{demo.root}"))
        df.printSchema()
        (df.selectExpr("partition", "offset", "CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value",
                       "timestamp")
           .orderBy("partition", "offset").show(truncate=False))
    """, {"spark": _spark(demo)})


def spark_stream(demo: Demo) -> None:
    checkpoint = demo.root / "spark-checkpoints" / "demo-stream"
    demo.python(f"""
        query = (spark.readStream.format("lakelog").option("subscribe", "{TOPIC}")
                 .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", 6)
                 .option("groupId", "demo-spark").load("{demo.root}")
                 .writeStream.trigger(availableNow=True).option("checkpointLocation", "{checkpoint}")
                 .foreachBatch(lambda df, batch_id: print(f"micro-batch {{batch_id}}: {{df.count()}} records"))
                 .start())
        query.awaitTermination()
        print("drained to the high watermark; offsets committed to group demo-spark")
    """, {"spark": _spark(demo)})
    demo.shell("lakelog groups describe demo-spark")


def consumer_group(demo: Demo) -> None:
    with _running_front(demo) as (url, _):
        ns = demo.python(f"""
            import threading, time
            from lakelog.client import Consumer

            stop, joined = threading.Event(), []

            def member(name):  # each consumer reads the segment files itself; the front only coordinates
                with Consumer("{url}", group_id="dashboard", client_id=name, auto_offset_reset="earliest",
                              heartbeat_interval_ms=300, auto_commit_interval_ms=200) as consumer:
                    consumer.subscribe(["{TOPIC}"],
                                       on_assign=lambda tps: print(name, "assigned", [tp.partition for tp in tps]),
                                       on_revoke=lambda tps: print(name, "revoked", [tp.partition for tp in tps]))
                    while not stop.is_set():
                        for tp, records in consumer.poll(timeout_ms=200).items():
                            print(name, "read", len(records), "records of partition", tp.partition)
                        if consumer.assignment() and name not in joined:
                            joined.append(name)

            threads = [threading.Thread(target=member, args=(name,)) for name in ("alice", "bob")]
            threads[0].start()
            while "alice" not in joined:
                time.sleep(0.05)
            threads[1].start()  # a second member joins: the coordinator rebalances (range: eager)
            while len(joined) < 2:
                time.sleep(0.05)
            time.sleep(1.0)  # let both settle and auto-commit
        """)
        demo.shell(f"lakelog groups describe dashboard --url {url}   # the coordinator's live view")
        demo.python("""
            stop.set()
            for t in threads:
                t.join()  # close(): commit, then leave the group
        """, ns)
        demo.shell("lakelog groups describe dashboard   # from the root: no members left, lag 0")
        demo.shell(f"lakelog groups reset-offsets dashboard --topic {TOPIC} --to-earliest   # a dry run")


def maintenance(demo: Demo) -> None:
    """Key compaction as a Spark job (``lakelog job`` runs spark-submit), after the scheduler says it is due."""
    demo.python("""
        log.create_topic("customers", 1, {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01"})
        for version in ("v1", "v2", "v3"):
            log.append("customers", [{"key": "alice", "value": f"alice-{version}"},
                                     {"key": "bob", "value": f"bob-{version}"}])
        log.append("customers", [{"key": "bob", "value": None}])  # a tombstone: bob is deleted
        log.append("customers", [{"key": "carol", "value": "carol-v1"}])  # the newest segment is never cleaned
        for r in log.read("customers", 0).to_pylist():
            print(r["offset"], r["key"], r["value"])
    """)
    demo.shell("lakelog maintain --once --dry-run --topic customers")
    # a pass this small runs on the driver; a larger one, or any with --master, starts Spark (docs/maintenance.md)
    demo.shell("lakelog job compaction --topic customers   # jobs/compact.py, on this Python")
    demo.python("""
        # the latest value per key survives at its original offset; bob's tombstone stays for delete.retention.ms
        for r in log.read("customers", 0).to_pylist():
            print(r["offset"], r["key"], r["value"])
    """)


STEPS: list[Step] = [
    Step("Start from an empty root", fresh_root),
    Step("Create a topic with 3 partitions (a Delta table)", create_topic),
    Step("Produce keyed records with the Python API", produce_with_python),
    Step("Produce from stdin with the console producer", produce_with_cli),
    Step("An idempotent producer: a retried batch is written once", idempotent_retry),
    Step("Describe the topic: offsets, segments and configs per partition", describe),
    Step("Consume with the console consumer", consume),
    Step("Fetch with the Python API", fetch_with_python),
    Step("Offsets: earliest, latest and by timestamp", offsets),
    Step("Dump the segments (and records) of partition 0", dump_log),
    Step("Produce and commit offsets over HTTP (lakelog serve + lakelog.client)", http_front),
    Step("A consumer group: two Consumers share the topic; lakelog groups describe / reset-offsets",
         consumer_group),
    Step("Read the topic with Spark: spark.read.format(\"lakelog\")", spark_batch),
    Step("Stream it with Trigger.AvailableNow, committing offsets to a consumer group", spark_stream),
    Step("Maintenance: key compaction, a Spark job that lakelog maintain schedules", maintenance),
]


def make_demo(root: str | os.PathLike = "demo-data") -> Demo:
    root = Path(root).resolve()
    bin_dir = str(Path(sys.executable).parent)  # the venv's bin: its `lakelog` console script
    if shutil.which("lakelog", path=bin_dir) is None:  # not pip-installed: a stand-in running this interpreter
        bin_dir = str(root.parent / ".demo-bin")
        os.makedirs(bin_dir, exist_ok=True)
        script = Path(bin_dir) / "lakelog"
        script.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m lakelog.cli "$@"\n')
        script.chmod(0o755)
    env = dict(os.environ, LAKELOG_ROOT=f"./{root.name}")
    cli = os.path.relpath(Path(bin_dir) / "lakelog", root.parent)
    return Demo(root=root, env=env, cli=str(Path(bin_dir) / "lakelog") if cli.startswith("..") else cli)


def main(argv: list[str] | None = None) -> int:
    demo = make_demo((argv or sys.argv[1:] or ["demo-data"])[0])
    started = time.monotonic()
    for i, step in enumerate(STEPS, 1):
        print(f"\n==> [{i}/{len(STEPS)}] {step.title}", flush=True)
        step.run(demo)
    print(f"\nDemo finished in {time.monotonic() - started:.1f} s. The data is in ./{demo.root.name} "
          f"(try: {demo.typed(f'LAKELOG_ROOT=./{demo.root.name} lakelog dump-log {TOPIC} --partition 1')}).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
