"""The session's Apache Kafka is one broker per test run: a second process of the run attaches to the running
broker (reference/kafka.py's ``shared_broker``) instead of starting another JVM."""

from __future__ import annotations

import json
import os

from reference.kafka import _alive, shared_broker


def test_a_second_caller_attaches_to_the_running_broker(kafka_reference, tmp_path_factory):
    basetemp = tmp_path_factory.getbasetemp()
    run_dir = basetemp.parent if os.environ.get("PYTEST_XDIST_WORKER") else basetemp
    again = shared_broker(run_dir, owner_pid=os.getpid(), timeout=5)
    assert again == kafka_reference
    assert _alive(kafka_reference.watchdog_pid)
    assert json.loads((kafka_reference.workdir / "broker.json").read_text())["bootstrap"] == again.bootstrap
