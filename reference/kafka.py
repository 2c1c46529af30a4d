"""Apache Kafka as the reference: one KRaft node (broker and controller in one JVM) on loopback, and Kafka's own
command-line tools, all from the pinned ``kafka`` set of maven.lock.

The node runs Kafka's defaults except what one node requires (replication factors of the internal topics 1) and
what the caller overrides; its log lives in ``workdir`` on local disk (page cache, no fsync per write, as Kafka
runs by default). Its own log goes to ``workdir/server.log`` at INFO.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from reference import maven

# Kafka's shell scripts (bin/kafka-*.sh) and the classes they run.
TOOLS = {
    "kafka-topics": "org.apache.kafka.tools.TopicCommand",
    "kafka-configs": "kafka.admin.ConfigCommand",
    "kafka-acls": "org.apache.kafka.tools.AclCommand",
    "kafka-consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "kafka-get-offsets": "org.apache.kafka.tools.GetOffsetShell",
    "kafka-delete-records": "org.apache.kafka.tools.DeleteRecordsCommand",
    "kafka-verifiable-producer": "org.apache.kafka.tools.VerifiableProducer",
    "kafka-verifiable-consumer": "org.apache.kafka.tools.VerifiableConsumer",
    "kafka-console-producer": "org.apache.kafka.tools.ConsoleProducer",
    "kafka-console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
    "kafka-producer-perf-test": "org.apache.kafka.tools.ProducerPerformance",
    "kafka-consumer-perf-test": "org.apache.kafka.tools.ConsumerPerformance",
    "connect-distributed": "org.apache.kafka.connect.cli.ConnectDistributed",
    "kafka-storage": "kafka.tools.StorageTool",
}
# A tool's JVM lives a few seconds: the JIT's first tier and the serial collector start it fastest.
TOOL_JVM_OPTS = ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xshare:auto"]
# The tests' shared broker serves small scenarios for a few minutes: the first JIT tier and the serial collector
# start it with the least CPU on a shared 2-core machine, and 512 MB holds what the scenarios write.
TEST_BROKER_JVM_OPTS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")
TEST_BROKER_HEAP = "512m"
# The scenarios' records carry fixed timestamps of 2023, past every retention.ms: Kafka's retention check (every
# 5 minutes by default, the first log.initial.task.delay.ms = 30 s after start) would delete them in the middle of
# a scenario on a broker that lives the whole test run (the first check emptied a codec scenario's topic).
TEST_BROKER_OVERRIDES = {"log.retention.check.interval.ms": str(24 * 3600 * 1000),
                         "log.initial.task.delay.ms": str(24 * 3600 * 1000)}
_LOG4J2 = """\
Configuration:
  Appenders:
    File:
      name: file
      fileName: "{path}"
      PatternLayout:
        pattern: "[%d] %p %m (%c)%n"
  Loggers:
    Root:
      level: {level}
      AppenderRef:
        - ref: file
"""


def java() -> str:
    home = os.environ.get("JAVA_HOME")
    exe = Path(home, "bin", "java") if home else shutil.which("java")
    if not exe or not Path(exe).exists():
        raise maven.ReferenceMissing("no `java` on PATH (Java 17 runs the reference Kafka)")
    return str(exe)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def log4j_config(workdir: Path, name: str, level: str = "INFO") -> Path:
    """A log4j2 config that sends everything at ``level`` and above to ``workdir/<name>.log``."""
    conf = workdir / f"{name}-log4j2.yaml"
    conf.write_text(_LOG4J2.format(path=workdir / f"{name}.log", level=level))
    return conf


def tool_command(tool: str, *args: str, sets: tuple[str, ...] = ("kafka",), log_dir: Path | None = None) -> list[str]:
    """The command line of one of Kafka's tools (a key of :data:`TOOLS`), as its script would run it."""
    opts = list(TOOL_JVM_OPTS)
    if log_dir is not None:
        opts.append(f"-Dlog4j2.configurationFile={log4j_config(log_dir, tool, 'WARN')}")
    return [java(), *opts, "-cp", maven.classpath(*sets), TOOLS[tool], *args]


def run_tool(tool: str, *args: str, timeout: float = 120, input: str | None = None,
             log_dir: Path | None = None, check: bool = True) -> subprocess.CompletedProcess:
    """Run a Kafka tool to completion; output captured as text. Raises CalledProcessError (with its output) when
    ``check`` and it exits non-zero."""
    proc = subprocess.run(tool_command(tool, *args, log_dir=log_dir), input=input, capture_output=True, text=True,
                          timeout=timeout)
    if check and proc.returncode != 0:
        raise subprocess.CalledProcessError(proc.returncode, proc.args, proc.stdout, proc.stderr)
    return proc


class KafkaBroker:
    """One Apache Kafka KRaft node on 127.0.0.1. ``start()`` formats ``workdir`` (once) and waits until the
    broker answers; ``bootstrap`` is its listener's ``host:port``. Not thread-safe."""

    def __init__(self, workdir: Path, *, overrides: dict[str, str] | None = None, heap: str = "1g",
                 jvm_opts: tuple[str, ...] = ()) -> None:
        self.workdir = Path(workdir)
        self.overrides = dict(overrides or {})
        self.heap = heap
        self.jvm_opts = tuple(jvm_opts)
        self.port = free_port()
        self.controller_port = free_port()
        self.proc: subprocess.Popen | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        """The broker JVM's process id (started)."""
        assert self.proc is not None, "the broker is not started"
        return self.proc.pid

    def _properties(self) -> Path:
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.workdir / "data"),
            # one node: the internal topics cannot have three replicas
            "offsets.topic.replication.factor": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            **self.overrides,
        }
        path = self.workdir / "server.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        return path

    def start(self, timeout: float = 120) -> "KafkaBroker":
        self.workdir.mkdir(parents=True, exist_ok=True)
        conf = self._properties()
        cp = maven.classpath("kafka")
        log_conf = log4j_config(self.workdir, "server")
        base = [java(), f"-Dlog4j2.configurationFile={log_conf}"]
        if not (self.workdir / "data" / "meta.properties").exists():
            subprocess.run([*base, *TOOL_JVM_OPTS, "-cp", cp, TOOLS["kafka-storage"], "format", "-t",
                            str(uuid.uuid4()).replace("-", "")[:22], "-c", str(conf)],
                           check=True, capture_output=True, timeout=timeout)
        self.proc = subprocess.Popen([*base, f"-Xmx{self.heap}", f"-Xms{self.heap}", *self.jvm_opts, "-cp", cp,
                                      "kafka.Kafka", str(conf)],
                                     stdout=(self.workdir / "stdout.log").open("ab"), stderr=subprocess.STDOUT,
                                     start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"Apache Kafka exited with {self.proc.returncode} at start; see "
                                   f"{self.workdir / 'server.log'}")
            if self._ready():
                return self
            time.sleep(0.3)
        self.stop()
        raise TimeoutError(f"Apache Kafka did not start within {timeout} s; see {self.workdir / 'server.log'}")

    def _ready(self) -> bool:
        log = self.workdir / "server.log"
        return log.exists() and "Kafka Server started" in log.read_text(errors="replace")

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def __enter__(self) -> "KafkaBroker":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


# -- one broker per test run, shared by its processes ---------------------------------------------------------


@dataclass(frozen=True)
class SharedBroker:
    """A broker started by :func:`shared_broker`: where it listens, its directory, and the watchdog that owns it."""

    bootstrap: str
    workdir: Path
    watchdog_pid: int
    pid: int  # the broker's JVM

    def stop(self) -> None:
        """Ask the watchdog to stop the broker now (it would anyway once its owner exits)."""
        try:
            os.kill(self.watchdog_pid, signal.SIGTERM)
        except ProcessLookupError:
            pass


def shared_broker(run_dir: Path, owner_pid: int, timeout: float = 300) -> SharedBroker:
    """The one Apache Kafka node of a test run, started by whichever process asks first.

    Processes of one run (pytest-xdist's workers) pass the same ``run_dir`` and ``owner_pid`` (the run's controller):
    under an exclusive lock on ``run_dir/kafka-reference.lock`` the first starts a detached watchdog
    (``python -m reference.kafka --watch OWNER WORKDIR``) that starts the broker, writes its address to
    ``WORKDIR/broker.json`` and stops it when ``owner_pid`` exits (or on SIGTERM); the others find the file and
    attach. Raises RuntimeError (with the broker's error) when it did not start; a later caller raises the same."""
    workdir = Path(run_dir) / "kafka-reference"
    workdir.mkdir(parents=True, exist_ok=True)
    info, error = workdir / "broker.json", workdir / "broker.error"
    with open(Path(run_dir) / "kafka-reference.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not info.exists() and not error.exists():
            with (workdir / "watchdog.log").open("ab") as log:
                watchdog = subprocess.Popen([sys.executable, "-m", "reference.kafka", "--watch", str(owner_pid),
                                             str(workdir)], stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, start_new_session=True,
                                            cwd=Path(__file__).resolve().parent.parent)
            deadline = time.monotonic() + timeout
            while not info.exists() and not error.exists():
                if watchdog.poll() is not None:
                    error.write_text(f"the broker's watchdog exited with {watchdog.returncode}; see "
                                     f"{workdir / 'watchdog.log'}")
                elif time.monotonic() > deadline:
                    watchdog.terminate()
                    error.write_text(f"Apache Kafka did not start within {timeout} s; see {workdir / 'server.log'}")
                else:
                    time.sleep(0.2)
        if error.exists():
            raise RuntimeError(error.read_text())
        got = json.loads(info.read_text())
    return SharedBroker(got["bootstrap"], workdir, got["watchdog_pid"], got["pid"])


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, exited but not yet reaped, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def _watch(owner_pid: int, workdir: Path) -> int:
    """The watchdog of :func:`shared_broker`: start the broker, publish its address, stop it when the owner is
    gone or on SIGTERM."""
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    broker = KafkaBroker(workdir, overrides=TEST_BROKER_OVERRIDES, heap=TEST_BROKER_HEAP, jvm_opts=TEST_BROKER_JVM_OPTS)
    try:
        broker.start(timeout=280)
    except Exception as e:  # noqa: BLE001 -- any failure is reported to the waiting test processes
        (workdir / "broker.error").write_text(f"Apache Kafka did not start: {e}")
        broker.stop()
        return 1
    part = workdir / "broker.json.part"
    part.write_text(json.dumps({"bootstrap": broker.bootstrap, "watchdog_pid": os.getpid(),
                                "pid": broker.pid}))
    part.replace(workdir / "broker.json")
    while not stop and _alive(owner_pid) and broker.proc.poll() is None:
        time.sleep(0.5)
    broker.stop()
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--watch":
        sys.exit(_watch(int(sys.argv[2]), Path(sys.argv[3])))
    print("usage: python -m reference.kafka --watch OWNER_PID WORKDIR", file=sys.stderr)
    sys.exit(2)
