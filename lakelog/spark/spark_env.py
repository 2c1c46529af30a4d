"""Point the installed PySpark at this interpreter and the project's Spark settings: ``python -m
lakelog.spark.spark_env`` (``make`` runs it).

Spark starts its Python workers -- the ones that find and run ``format("lakelog")`` -- with
``PYSPARK_PYTHON``, else whichever ``python3`` is on PATH. A script run as ``.venv/bin/python job.py``
without an activated venv would otherwise get workers without lakelog (``DATA_SOURCE_NOT_FOUND``).
And a plain script or ``spark-submit`` would use Spark's own defaults: its default log4j profile (INFO
lines, "Using Spark's default log4j profile", the loopback-hostname and native-library warnings) and the
console progress bar. This writes ``spark-env.sh`` into the installed PySpark's ``conf/`` (Spark's launcher
sources it when no ``SPARK_CONF_DIR`` is set): ``PYSPARK_PYTHON`` defaults to this interpreter (an explicit
one still wins), ``SPARK_CONF_DIR`` to the project's ``conf/`` -- its ``spark-defaults.conf``,
``log4j2.properties`` and ``spark-env.sh`` -- so a plain script prints nothing from the JVM below WARN that
its user did not ask for. An explicit ``SPARK_CONF_DIR`` is the user's own and is left alone.

PySpark's ``bin/spark-submit`` and ``bin/pyspark`` find Spark through ``python3`` on PATH, so typed as
``.venv/bin/spark-submit`` without an activated venv they fail (``/bin/spark-class: No such file or
directory``); the venv's ``find-spark-home`` is made to default to this interpreter instead. Idempotent.
"""

from __future__ import annotations

import sys
from pathlib import Path

MARKER = "# written by lakelog (python -m lakelog.spark.spark_env)"


def spark_env_path() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent / "conf" / "spark-env.sh"


def project_conf() -> Path:
    """The project's Spark configuration directory (``conf/`` of the source tree)."""
    return Path(__file__).resolve().parents[2] / "conf"


def _sh_quoted(text: str) -> str:
    """``text`` for the inside of sh double quotes."""
    return "".join("\\" + c if c in '"$`\\' else c for c in text)


def write_spark_env(python: str = sys.executable, conf: Path | None = None) -> Path:
    path = spark_env_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    conf = project_conf() if conf is None else conf
    lines = [MARKER, f'export PYSPARK_PYTHON="${{PYSPARK_PYTHON:-{_sh_quoted(python)}}}"']
    if (conf / "spark-defaults.conf").is_file():
        quoted = _sh_quoted(str(conf))
        lines += [f'export SPARK_CONF_DIR="{quoted}"',
                  f'if [ -f "{quoted}/spark-env.sh" ]; then . "{quoted}/spark-env.sh"; fi']
    path.write_text("\n".join(lines) + "\n")
    return path


def default_find_spark_home(python: str = sys.executable) -> Path | None:
    """Make the venv's ``find-spark-home`` (next to ``python``) ask ``python``, not PATH's ``python3``, where
    the Spark installation is; None if there is no such script (PySpark not pip-installed beside it)."""
    path = Path(python).parent / "find-spark-home"
    if not path.is_file():
        return None
    text = path.read_text()
    fixed = text.replace('PYSPARK_DRIVER_PYTHON="${PYSPARK_PYTHON:-"python3"}"',
                         f'PYSPARK_DRIVER_PYTHON="${{PYSPARK_PYTHON:-"{_sh_quoted(python)}"}}"  {MARKER}')
    if fixed != text:
        path.write_text(fixed)
    return path


if __name__ == "__main__":
    write_spark_env()
    default_find_spark_home()
