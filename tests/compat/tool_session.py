"""Kafka's command-line tools and the Java probes run in one long-lived JVM per cluster
(tests/compat/java/ToolRunner.java): a tool's JVM start costs more than most of what it does, so a test run
starts one per cluster and xdist worker and sends it one command at a time."""

from __future__ import annotations

import json
import subprocess
import threading
from pathlib import Path

from reference.kafka import TOOL_JVM_OPTS, TOOLS, java

# Each command's answer must come within this (a verifiable consumer reading thousands of records on a loaded
# machine is the slowest).
COMMAND_TIMEOUT_S = 300


class ToolSession:
    """One ToolRunner JVM. :meth:`run` sends a command (a key of :data:`reference.kafka.TOOLS` or a class name of
    tests/compat/java, then its arguments) and returns its exit code and output. Thread-safe (one command at a
    time)."""

    def __init__(self, classpath: str, name: str) -> None:
        self.name = name
        self._lock = threading.Lock()
        self._proc = subprocess.Popen([java(), *TOOL_JVM_OPTS, "-Xmx384m", "-cp", classpath, "ToolRunner"],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                      text=True, bufsize=1)

    def run(self, command: list[str], *, stdin: Path | None = None) -> dict:
        """``{"code": exit code, "out": standard output, "err": standard error}`` of one command."""
        fields = ([f"stdin={stdin}"] if stdin else []) + [TOOLS.get(command[0], command[0]), *command[1:]]
        assert not any("\t" in f or "\n" in f for f in fields), fields
        with self._lock:
            assert self._proc.poll() is None, f"{self.name}: the tool JVM exited with {self._proc.returncode}"
            self._proc.stdin.write("\t".join(fields) + "\n")
            self._proc.stdin.flush()
            timer = threading.Timer(COMMAND_TIMEOUT_S, self._proc.kill)
            timer.start()
            try:
                while True:
                    line = self._proc.stdout.readline()
                    assert line, f"{self.name}: the tool JVM ended during {command[:3]} (exit {self._proc.poll()})"
                    if line.startswith("{"):
                        return json.loads(line)
            finally:
                timer.cancel()

    def run_all(self, commands: list[list[str]]) -> list[dict]:
        return [self.run(c) for c in commands]

    def close(self) -> None:
        if self._proc.poll() is None:
            self._proc.stdin.close()
            try:
                self._proc.wait(30)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(10)
