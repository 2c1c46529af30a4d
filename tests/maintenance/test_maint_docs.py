"""docs/maintenance.md's example runs as written: typed from a directory holding the project's
``.venv``, with no activated venv (PATH has only the system's directories, no PYSPARK_PYTHON)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def example_lines() -> list[str]:
    text = (REPO / "docs" / "maintenance.md").read_text()
    block = re.search(r"run, line by line, by\n`tests/maintenance/test_maint_docs.py`\):\n\n```sh\n(.*?)```", text, re.S)
    assert block, "docs/maintenance.md lost the example this test runs"
    return [line for line in block.group(1).splitlines() if line.strip()]


def test_documented_job_commands_run_as_written(tmp_path):
    (tmp_path / ".venv").symlink_to(REPO / ".venv")
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": os.environ.get("HOME", str(tmp_path)),
           "JAVA_HOME": os.environ.get("JAVA_HOME", "")}
    env = {k: v for k, v in env.items() if v}
    outputs = []
    for line in example_lines():
        proc = subprocess.run(["bash", "-c", line], cwd=tmp_path, env=env, text=True, capture_output=True,
                              timeout=600)
        assert proc.returncode == 0, f"{line!r} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr[-3000:]}"
        assert "spark-class: No such file" not in proc.stderr
        outputs.append(proc.stdout)
    assert "compaction on" in outputs[3] and "customers" in outputs[3]
    records = [tuple(line.split("\t")) for line in outputs[-1].splitlines() if line.startswith("Offset:")]
    # Compaction cleaned the closed segment: alice's first value (offset 0) is gone; the rest keep their offsets.
    assert records == [("Offset:1", "bob", "v1"), ("Offset:2", "alice", "v2"), ("Offset:3", "carol", "v1")], outputs
