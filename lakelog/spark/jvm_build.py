"""Build lakelog's JVM classes (``lakelog/spark/jvm/src``) into ``lakelog/spark/jars/lakelog-spark.jar`` with
``javac`` against the jars the installed pyspark ships: no Maven, no Scala. ``python -m lakelog.spark.jvm_build``
is part of the install step (``make``). Without ``javac`` (a JRE only) it says so and builds nothing: every
Python path keeps working.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

SOURCES = Path(__file__).resolve().parent / "jvm" / "src"
JAR = Path(__file__).resolve().parent / "jars" / "lakelog-spark.jar"


def spark_jars() -> Path:
    """The installed pyspark's ``jars`` directory (Spark, Hadoop client, parquet-hadoop, Jackson)."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent / "jars"


def classpath() -> str:
    """The classpath to run lakelog's JVM classes outside Spark: the jar, then pyspark's jars."""
    return f"{JAR}:{spark_jars()}/*"


def build() -> Path | None:
    """Compile and pack the jar; its path, or None without ``javac``. Raises on a compile error."""
    javac = shutil.which("javac")
    if javac is None:
        print("lakelog: javac not found, the JVM classes are not built (the Python paths need none)")
        return None
    sources = sorted(str(p) for p in SOURCES.rglob("*.java"))
    with tempfile.TemporaryDirectory() as out:
        subprocess.run([javac, "--release", "17", "-Xlint:deprecation", "-cp", f"{spark_jars()}/*", "-d", out,
                        *sources], check=True)
        JAR.parent.mkdir(parents=True, exist_ok=True)
        tmp = JAR.with_suffix(".tmp")
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as jar:
            jar.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\nCreated-By: lakelog.spark.jvm_build\n")
            for cls in sorted(Path(out).rglob("*.class")):
                jar.write(cls, cls.relative_to(out).as_posix())
        tmp.replace(JAR)  # whole or not at all, for a Spark session starting meanwhile
    return JAR


if __name__ == "__main__":
    try:
        built = build()
    except subprocess.CalledProcessError as e:
        sys.exit(f"lakelog: compiling the JVM classes failed (javac exit {e.returncode})")
    if built is not None:
        print(f"lakelog: built {built}")
