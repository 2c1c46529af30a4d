"""The install step's build of the JVM source prints nothing but its result: javac's notes are not shown
unless the build fails (``lakelog.spark.jvm``)."""

from __future__ import annotations

import subprocess
import sys
import zipfile


def test_the_jar_builds_without_compiler_notes(tmp_path):
    out = tmp_path / "lakelog-spark.jar"
    proc = subprocess.run([sys.executable, "-c", f"from pathlib import Path; from lakelog.spark.jvm import build; "
                                                 f"build(Path({str(out)!r}))"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout == "" and proc.stderr == "", proc.stdout + proc.stderr
    with zipfile.ZipFile(out) as jar:
        names = jar.namelist()
    assert "io/lakelog/spark/LakelogSource.class" in names
    assert any(n.startswith("META-INF/services/") for n in names)
