"""``make demo`` runs end to end without an activated venv, and what it tells a user to type works when typed."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path


def test_demo_runs_and_its_commands_work_as_typed(tmp_path):
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": os.environ.get("HOME", str(tmp_path))}
    if os.environ.get("JAVA_HOME"):
        env["JAVA_HOME"] = os.environ["JAVA_HOME"]
    proc = subprocess.run([sys.executable, "-m", "lakelog.demo", "demo-data"], cwd=tmp_path, env=env, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=900)
    out = proc.stdout
    assert proc.returncode == 0, out[-5000:]
    assert re.search(r"^==> \[15/15\]", out, re.M) and "Demo finished in" in out

    shown = [line[2:] for line in out.splitlines() if line.startswith("$ ")]
    cli_words = {w for c in shown for w in re.findall(r"(?:^|\s)(\S*lakelog)(?= [a-z])", c)}
    assert cli_words, "the demo showed no lakelog command"
    for word in cli_words:  # every lakelog command shown is a path a user's shell finds without the venv on PATH
        assert "/" in word and (tmp_path / word).exists(), f"the demo shows {word!r}, which is not found as typed"

    hint = re.search(r"\(try: (.*)\)\.$", out, re.M)
    assert hint, "the demo's closing hint is gone"
    typed = subprocess.run(["bash", "-c", hint.group(1)], cwd=tmp_path, env=env, text=True, capture_output=True,
                           timeout=120)
    assert typed.returncode == 0, typed.stderr
    assert "orders" in typed.stdout and Path(tmp_path / "demo-data").is_dir()
