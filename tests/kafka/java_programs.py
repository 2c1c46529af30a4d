"""The Java programs of ``tests/kafka/java/`` and Kafka's own tools, run against a lakelog front.

:func:`compiled` builds every ``.java`` file there with ``javac`` against the reference jars (sets ``kafka`` and
``kafka-streams``: the Java client, Kafka Streams, log4j's binding) into one directory, once per session;
:func:`java_command` is the command line that runs one of them, its log (log4j2, INFO) in ``log_dir``. The jars
come from ``python -m reference fetch`` (``make test`` runs it): when they are missing this raises
``ReferenceMissing`` naming that command; nothing is downloaded here.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
from pathlib import Path

from reference import maven
from reference.kafka import TOOL_JVM_OPTS, java, log4j_config, tool_command

SOURCES = Path(__file__).with_name("java")
SETS = ("kafka-streams", "kafka")


def classpath() -> str:
    return maven.classpath(*SETS)


def compiled(out: Path) -> Path:
    """Compile ``tests/kafka/java/*.java`` into ``out`` (once: a second call with the same ``out`` reuses it)."""
    stamp = out / ".compiled"
    if stamp.exists():
        return out
    javac = shutil.which("javac")
    if javac is None:
        raise maven.ReferenceMissing("no `javac` on PATH (a JDK 17 compiles the tests' Java programs)")
    out.mkdir(parents=True, exist_ok=True)
    sources = sorted(str(p) for p in SOURCES.glob("*.java"))
    subprocess.run([javac, "-nowarn", "-d", str(out), "-cp", classpath(), *sources], check=True, timeout=300,
                   capture_output=True, text=True)
    stamp.touch()
    return out


def java_command(classes: Path, main: str, *args: str, log_dir: Path, name: str) -> list[str]:
    """Run class ``main`` of the compiled programs; its log4j2 log goes to ``log_dir/<name>.log``."""
    conf = log4j_config(log_dir, name, "INFO")
    return [java(), *TOOL_JVM_OPTS, f"-Dlog4j2.configurationFile={conf}", "-cp", f"{classes}:{classpath()}", main,
            *args]


def stop_process(proc: subprocess.Popen) -> None:
    """SIGTERM, and SIGKILL if the JVM has not exited within 60 s (its shutdown hooks close clients)."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


class VerifiableConsumer:
    """Kafka's ``kafka-verifiable-consumer`` (the Java client) as a group member: its JSON events are collected
    with their time; ``events`` in the shape of ``kafka_consumer_proc.py``'s (``assign``/``revoke`` with
    ``[topic, partition]`` lists and epoch seconds), so one ownership checker reads both."""

    def __init__(self, bootstrap: str, topic: str, group: str, *, log_dir: Path, name: str,
                 extra: tuple[str, ...] = ()) -> None:
        self.name = name
        cmd = tool_command("kafka-verifiable-consumer", "--bootstrap-server", bootstrap, "--topic", topic,
                           "--group-id", group, "--reset-policy", "earliest", *extra, log_dir=log_dir)
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=(log_dir / f"{name}.err").open("wb"),
                                     text=True)
        self.events: list[dict] = []
        self.consumed = 0
        self.committed: dict[tuple, int] = {}
        self.ended: float | None = None
        self.started = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            kind, at = ev.get("name"), ev.get("timestamp", time.time() * 1000) / 1000
            tps = sorted([p["topic"], p["partition"]] for p in ev.get("partitions", []))
            if kind == "startup_complete":
                self.started.set()
            elif kind == "partitions_assigned":
                self.events.append({"event": "assign", "tps": tps, "time": at})
            elif kind in ("partitions_revoked", "partitions_lost"):
                self.events.append({"event": "revoke", "tps": tps, "time": at})
            elif kind == "records_consumed":
                self.consumed += ev["count"]
            elif kind == "offsets_committed" and ev.get("success"):
                for o in ev["offsets"]:
                    self.committed[(o["topic"], o["partition"])] = o["offset"]

    @property
    def assignment(self) -> set:
        held: set = set()
        for ev in self.events:
            tps = {tuple(tp) for tp in ev["tps"]}
            held = held | tps if ev["event"] == "assign" else held - tps
        return held

    def stop(self) -> None:
        """SIGTERM: the tool closes its consumer (leaving the group) and exits."""
        stop_process(self.proc)
        self.ended = self.ended or time.time()
