"""A Kafka Connect distributed worker (Kafka 4.1.1 from ``reference/``, set ``kafka``) against a real ``lakelog serve
--kafka-listener``: a group of protocol type ``connect``, its REST API on a free port, the FileStream source and sink
connectors moving a file's lines through a topic. One worker JVM for the module.
"""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from pathlib import Path

import httpx

from front_process import free_port, new_topic
from java_programs import stop_process
from reference.kafka import tool_command


class ConnectWorker:
    """``connect-distributed`` on lakelog: one worker of group ``group``, its REST API on a free port."""

    def __init__(self, bootstrap: str, group: str, workdir: Path) -> None:
        self.url = f"http://127.0.0.1:{free_port()}"
        props = {
            "bootstrap.servers": bootstrap, "group.id": group, "listeners": self.url,
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.storage.StringConverter",
            "offset.storage.topic": f"{group}-offsets", "config.storage.topic": f"{group}-configs",
            "status.storage.topic": f"{group}-status", "offset.storage.replication.factor": "-1",
            "config.storage.replication.factor": "-1", "status.storage.replication.factor": "-1",
            "offset.flush.interval.ms": "500", "plugin.discovery": "only_scan",
        }
        conf = workdir / "worker.properties"
        conf.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        self.log = workdir / "connect-distributed.log"  # WARN and above
        self.proc = subprocess.Popen(tool_command("connect-distributed", str(conf), log_dir=workdir),
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def get(self, path: str):
        return httpx.get(self.url + path, timeout=30)

    def wait_ready(self, timeout: float = 240) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"connect-distributed exited:\n{self.log.read_text()[-3000:]}"
            try:
                if self.get("/connectors").status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        raise AssertionError(f"connect-distributed not ready in {timeout} s:\n{self.log.read_text()[-3000:]}")

    def stop(self) -> None:
        stop_process(self.proc)


def test_connect_distributed_moves_a_file_through_a_topic(bootstrap, http, tmp_path):
    """A Connect distributed worker forms its group (protocol type ``connect``, Connect's own protocols), stores
    its configs, offsets and statuses in compacted topics it creates itself, and its FileStream source and sink
    connectors move every line of a file, in order, through a one-partition topic into another file."""
    from wire_client import WireClient

    group = f"connect-{uuid.uuid4().hex[:8]}"
    topic = new_topic(http, 1)
    source, sink = tmp_path / "in.txt", tmp_path / "out.txt"
    lines = [f"line {i}: {uuid.uuid4().hex}" for i in range(500)]
    source.write_text("".join(f"{line}\n" for line in lines))
    worker = ConnectWorker(bootstrap, group, tmp_path)
    try:
        worker.wait_ready()
        for name, config in (("file-source", {"connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
                                              "file": str(source), "topic": topic, "tasks.max": "1"}),
                             ("file-sink", {"connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
                                            "file": str(sink), "topics": topic, "tasks.max": "1"})):
            r = httpx.post(worker.url + "/connectors", json={"name": name, "config": config}, timeout=60)
            assert r.status_code in (200, 201), r.text
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            got = sink.read_text().splitlines() if sink.exists() else []
            if len(got) >= len(lines):
                break
            time.sleep(0.5)
        assert got == lines, f"{len(got)} of {len(lines)} lines:\n{worker.log.read_text()[-3000:]}"
        for name in ("file-source", "file-sink"):
            status = worker.get(f"/connectors/{name}/status").json()
            assert status["connector"]["state"] == "RUNNING" and \
                [t["state"] for t in status["tasks"]] == ["RUNNING"], status
        with WireClient(bootstrap) as c:
            d = c.request(15, 5, {"groups": [group], "include_authorized_operations": False}).groups[0]
        assert (d.error_code, d.group_state, d.protocol_type) == (0, "Stable", "connect"), d
        assert d.protocol_data in ("sessioned", "compatible", "default") and len(d.members) == 1
        assert json.loads(worker.get("/").text)["kafka_cluster_id"]
    finally:
        worker.stop()
