"""A real ``lakelog serve`` child process on 127.0.0.1, for the HTTP tests.

:class:`Front` starts ``python -m lakelog.cli serve`` on a free port, waits
until ``GET /v1/health`` answers, and can stop it gracefully, kill it with
SIGKILL, and restart it on the same port (so clients keep their URL).  The
child's output goes to a log file whose tail is shown when it fails to start.

Test modules import helpers from here, never from ``conftest`` (several
``conftest.py`` files exist under ``tests/``; the name is ambiguous).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx

import proc_support

REPO = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 120.0
MAX_REQUEST_BYTES = 1 << 20  # the shared test front's body limit (LAKELOG_MAX_REQUEST_BYTES)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Front:
    """One front over ``root``; ``env`` is added to the child's environment (AWS settings, LAKELOG_*)."""

    def __init__(self, root: str, workdir: Path, *, env: dict[str, str] | None = None,
                 auth_file: str | None = None, args: tuple[str, ...] = ()) -> None:
        self.root = root
        self.workdir = Path(workdir)
        self.env = dict(env or {})
        self.auth_file = auth_file
        self.args = args
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None
        self.starts = 0

    @classmethod
    def with_auth(cls, workdir: Path, auth: dict, **kwargs) -> "Front":
        """A front over ``<workdir>/root`` whose ``--auth-file`` holds ``auth`` (principals, super users, ACLs)."""
        workdir = Path(workdir)
        workdir.mkdir(parents=True, exist_ok=True)
        (workdir / "auth.json").write_text(json.dumps(auth))
        return cls(str(workdir / "root"), workdir, auth_file=str(workdir / "auth.json"), **kwargs)

    @property
    def log_path(self) -> Path:
        return self.workdir / f"front-{self.port}.log"

    def log_tail(self, chars: int = 4000) -> str:
        try:
            return self.log_path.read_text()[-chars:]
        except OSError:
            return "<no log>"

    def start(self) -> "Front":
        cmd = [sys.executable, "-m", "lakelog.cli", "serve", "--root", self.root, "--port", str(self.port), *self.args]
        if self.auth_file:
            cmd += ["--auth-file", self.auth_file]
        env = {**os.environ, **self.env, "PYTHONPATH": str(REPO)}
        self.workdir.mkdir(parents=True, exist_ok=True)
        out = open(self.log_path, "ab")
        self.proc = subprocess.Popen(cmd, cwd=str(REPO), env=env, stdout=out, stderr=subprocess.STDOUT)
        out.close()
        self.starts += 1
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if self.proc.poll() is not None:
                raise AssertionError(f"lakelog serve exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                if httpx.get(f"{self.url}/v1/health", timeout=2.0).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                self.kill()
                raise AssertionError(f"lakelog serve did not answer /v1/health in {START_TIMEOUT_S}s:\n"
                                     f"{self.log_tail()}")
            time.sleep(0.1)

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs (a crash)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=30)

    def stop(self) -> None:
        """SIGTERM and wait for the graceful shutdown (pending appends are committed)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.kill()

    def restart(self, *, crash: bool = False) -> "Front":
        self.kill() if crash else self.stop()
        return self.start()

    def client(self, token: str | None = None, timeout: float = 60.0) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=timeout)


def wait_for(check, timeout: float, what: str):
    """``check()``'s first truthy result, polled every 0.2 s (checks here are HTTP requests); AssertionError
    naming ``what`` after ``timeout``."""
    return proc_support.wait_for(check, what, timeout, interval=0.2)


def kafka_front_process(root: str, workdir: Path, *, env: dict | None = None, args: tuple = ()) -> Front:
    """A :class:`Front` that also serves Kafka's protocol; its address is ``front.bootstrap``."""
    port = free_port()
    f = Front(root, workdir, env=env, args=("--kafka-listener", f"127.0.0.1:{port}", *args))
    f.bootstrap = f"127.0.0.1:{port}"
    return f


def new_topic(http: httpx.Client, partitions: int = 2, configs: dict | None = None) -> str:
    """Create a uniquely named topic through the front; returns its name."""
    name = f"t-{uuid.uuid4().hex[:10]}"
    r = http.post("/v1/topics", json={"name": name, "partitions": partitions, "configs": configs or {}})
    assert r.status_code == 201, r.text
    return name
