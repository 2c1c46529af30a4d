"""A Spark standalone cluster for tests: a master and one worker on 127.0.0.1, importable from any test module.

Test modules use the fixture by importing it (``from spark_cluster import standalone``); each importing module
gets its own cluster (module scope), torn down (process groups killed) when the module's tests are done.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import sysconfig
import time
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent  # spark-class / spark-submit of the pip-installed PySpark
SPARK_ENV = {"SPARK_CONF_DIR": str(REPO / "conf"), "PYSPARK_PYTHON": sys.executable,
             "PYSPARK_DRIVER_PYTHON": sys.executable}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cluster_env(**overrides: str) -> dict[str, str]:
    """This process's environment with the project's Spark settings, loopback only, daemons in the foreground."""
    return {**os.environ, **SPARK_ENV, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_NO_DAEMONIZE": "1", **overrides}


@pytest.fixture(scope="module")
def standalone(tmp_path_factory):
    """``(spark://127.0.0.1:<port>, logs)`` with one registered worker (2 cores, 2g); both processes killed at the end.

    ``logs`` holds ``master.log``, ``worker.log`` and the worker's ``work`` directory (``work/<app id>/<executor
    id>/`` is each executor's working directory and log directory).
    """
    yield from run_standalone(tmp_path_factory.mktemp("standalone"), cluster_env(), BIN)


def run_standalone(logs: Path, env: dict[str, str], bin_dir: Path):
    """Start a master and a worker with ``bin_dir``'s ``spark-class`` in ``env``; yield ``(master URL, logs)`` once
    the worker registered, then kill both.

    Their ports are picked free, but another process (a test's Spark UI) may take one before a daemon binds it.
    The daemons do not fall back to the next port (``spark.port.maxRetries=0``: the UI polled here is then the
    master's, not a stranger's), and a daemon that could not bind is started again on new ports (3 tries).
    """
    # No REST submission server either: its fixed port (6066) would be taken by the master of a test run alongside.
    opts = f"{env.get('SPARK_DAEMON_JAVA_OPTS', '')} -Dspark.port.maxRetries=0 -Dspark.master.rest.enabled=false"
    env = {**env, "SPARK_DAEMON_JAVA_OPTS": opts.strip()}
    for _ in range(3):
        procs: list[subprocess.Popen] = []
        try:
            master = _start_cluster(logs, env, bin_dir, procs)
            if master is not None:
                yield master, logs
                return
        finally:
            for p in procs:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait(timeout=60)
    pytest.fail(f"the standalone cluster did not start in 3 tries: {(logs / 'master.log').read_text()[-2000:]}")


def _start_cluster(logs: Path, env: dict[str, str], bin_dir: Path, procs: list) -> str | None:
    """The master URL once a worker registered; None if a daemon exited or failed to bind first (a port taken
    under it)."""
    port, ui, worker_ui = free_port(), free_port(), free_port()
    procs.append(subprocess.Popen(
        [str(bin_dir / "spark-class"), "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
         "--port", str(port), "--webui-port", str(ui)], env=env, start_new_session=True,
        stdout=open(logs / "master.log", "w"), stderr=subprocess.STDOUT))
    procs.append(subprocess.Popen(
        [str(bin_dir / "spark-class"), "org.apache.spark.deploy.worker.Worker", f"spark://127.0.0.1:{port}",
         "--host", "127.0.0.1", "--webui-port", str(worker_ui), "--cores", "2", "--memory", "2g",
         "--work-dir", str(logs / "work")], env=env, start_new_session=True,
        stdout=open(logs / "worker.log", "w"), stderr=subprocess.STDOUT))
    deadline = time.monotonic() + 240
    while True:
        try:
            state = json.load(urllib.request.urlopen(f"http://127.0.0.1:{ui}/json/", timeout=5))
            if state.get("aliveworkers", 0) >= 1:
                return f"spark://127.0.0.1:{port}"
        except (OSError, ValueError):  # not up yet (a ValueError: not JSON, not yet the master's page)
            pass
        if any(p.poll() is not None for p in procs) or any(
                "BindException" in (logs / name).read_text(errors="replace") for name in ("master.log", "worker.log")):
            return None  # a daemon that failed to bind may also live on without its service
        assert time.monotonic() < deadline, "the standalone worker never registered"
        time.sleep(1)


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory) -> str:
    """A Python with lakelog's dependencies importable but not lakelog (nor ``pyspark_lakelog``).

    A venv whose site-packages holds one ``.pth`` file naming this venv's site-packages: that adds the directory
    to the path, but does not run the ``.pth`` files inside it, among them the editable install's entry for the
    checkout (``make install`` installs lakelog editable).
    """
    venv = tmp_path_factory.mktemp("bare") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    deps = sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]})
    (Path(site) / "lakelog-deps.pth").write_text("".join(f"{d}\n" for d in deps))
    return str(python)
