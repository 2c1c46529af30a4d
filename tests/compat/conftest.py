"""Fixtures of the compatibility tests: Apache Kafka (the session's ``kafka_reference``) beside a real
``lakelog serve --kafka-listener``, both with their defaults.

* ``lakelog_front`` -- one front per session (xdist worker) on a local root, nothing overridden: the
  differential scenarios compare Kafka's defaults with lakelog's;
* ``targets`` -- ``{"kafka": Target, "lakelog": Target}`` for :func:`compat_support.run_both`;
* ``java_classes`` -- tests/compat/java compiled with javac against the reference ``kafka`` set (Kafka's tools
  run in one JVM, the Java AdminClient probe): the class path to run them with;
* ``tool_sessions`` -- ``{"kafka": ToolSession, "lakelog": ToolSession}``: one ToolRunner JVM per cluster, for
  every module of the worker that runs Kafka's tools or the Java probes.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "api"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "kafka"))

from compat_support import Target  # noqa: E402
from tool_session import ToolSession  # noqa: E402
from front_process import kafka_front_process  # noqa: E402


@pytest.fixture(scope="session")
def lakelog_front(tmp_path_factory):
    f = kafka_front_process(str(tmp_path_factory.mktemp("compat-root") / "root"),
                            tmp_path_factory.mktemp("compat-logs"))
    f.start()
    yield f
    f.stop()


@pytest.fixture(scope="session")
def targets(kafka_reference, lakelog_front) -> dict[str, Target]:
    return {"kafka": Target("kafka", kafka_reference.bootstrap), "lakelog": Target("lakelog", lakelog_front.bootstrap)}


@pytest.fixture(scope="session")
def java_classes() -> str:
    """tests/compat/java compiled once per source version: into the reference cache under the hash of the sources
    and the class path, under a lock (xdist's workers ask at once)."""
    import fcntl
    import hashlib
    import os
    import subprocess

    from reference import maven

    cp = maven.classpath("kafka")
    sources = sorted((Path(__file__).parent / "java").glob("*.java"))
    digest = hashlib.sha256(cp.encode() + b"".join(p.read_bytes() for p in sources)).hexdigest()[:16]
    out = maven.cache_dir() / "compat-java" / digest
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (out / ".done").exists():
            out.mkdir(exist_ok=True)
            subprocess.run(["javac", "-nowarn", "-d", str(out), "-cp", cp, *map(str, sources)], check=True,
                           capture_output=True, timeout=600)
            (out / ".done").touch()
    return f"{out}{os.pathsep}{cp}"


@pytest.fixture(scope="session")
def tool_sessions(targets, java_classes):
    sessions = {name: ToolSession(java_classes, name) for name in targets}
    yield sessions
    for s in sessions.values():
        s.close()
