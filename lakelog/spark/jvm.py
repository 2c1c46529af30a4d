"""The JVM ``lakelog`` source: build its jar with javac against the installed PySpark, and register it.

``python -m lakelog.spark.jvm`` (``make`` runs it in its install step) compiles ``lakelog/spark/java/`` with
``javac --release 17 -cp "<pyspark>/jars/*"`` -- no Maven, no Scala compiler -- packs
``lakelog/spark/jars/lakelog-spark.jar`` with its ``META-INF/services`` registration, and copies it into the
installed PySpark's ``jars/`` directory, which every Spark entry point of that environment loads (a plain
``SparkSession.builder.getOrCreate()``, ``spark-submit``, the standalone master and worker). Spark then resolves
``format("lakelog")`` to the JVM source, which prefers itself over the Python data source of the same name.

A machine with a JRE and no ``javac`` skips the build with one line and keeps reading through the Python source.
``lakelog spark-jar`` prints the jar's path, for clusters: ``spark-submit --jars "$(lakelog spark-jar)"``.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
JAVA_DIR = HERE / "java"
JAR = HERE / "jars" / "lakelog-spark.jar"
INSTALLED_NAME = "lakelog-spark.jar"


def pyspark_jars() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent / "jars"


def jar_path() -> Path:
    """The built jar (it may not exist: see :func:`build`)."""
    return JAR


def sources() -> list[Path]:
    return sorted(JAVA_DIR.rglob("*.java"))


def build(out: Path = JAR) -> Path | None:
    """Compile and pack the jar; None (with a message on stderr) when there is no javac/jar."""
    javac, jar = shutil.which("javac"), shutil.which("jar")
    if not javac or not jar:
        print("lakelog: no javac/jar on PATH: the JVM Spark source is not built; format(\"lakelog\") reads through "
              "the Python data source", file=sys.stderr)
        return None
    cp = str(pyspark_jars() / "*")
    with tempfile.TemporaryDirectory() as tmp:
        classes = Path(tmp) / "classes"
        classes.mkdir()
        # javac's summary notes (deprecated or unchecked API use in the sources) are not the installing user's
        # business; its output is shown only when the build fails
        compiled = subprocess.run([javac, "--release", "17", "-nowarn", "-encoding", "UTF-8", "-cp", cp,
                                   "-d", str(classes), *map(str, sources())], capture_output=True, text=True)
        if compiled.returncode != 0:
            sys.stderr.write(compiled.stdout + compiled.stderr)
            raise subprocess.CalledProcessError(compiled.returncode, compiled.args)
        services = JAVA_DIR / "META-INF"
        shutil.copytree(services, classes / "META-INF")
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp_jar = Path(tmp) / "lakelog-spark.jar"
        subprocess.run([jar, "cf", str(tmp_jar), "-C", str(classes), "."], check=True)
        shutil.move(str(tmp_jar), out)
    return out


def install(jar: Path = JAR) -> Path:
    """Copy the jar into the installed PySpark's jars/ (every Spark started from this environment loads it)."""
    target = pyspark_jars() / INSTALLED_NAME
    tmp = target.with_suffix(".tmp")
    shutil.copyfile(jar, tmp)
    tmp.replace(target)
    return target


def uninstall() -> None:
    (pyspark_jars() / INSTALLED_NAME).unlink(missing_ok=True)


def main() -> int:
    jar = build()
    if jar is None:
        uninstall()  # a stale jar from an earlier build would no longer match the sources
        return 0
    print(f"lakelog: built {jar} and installed it as {install(jar)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
