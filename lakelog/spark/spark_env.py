"""Point Spark's Python workers at this interpreter: ``python -m lakelog.spark.spark_env`` (``make`` runs it).

Spark starts its Python workers -- the ones that find and run ``format("lakelog")`` -- with
``PYSPARK_PYTHON``, else whichever ``python3`` is on PATH. A script run as ``.venv/bin/python job.py``
without an activated venv would otherwise get workers without lakelog (``DATA_SOURCE_NOT_FOUND``).
This writes ``spark-env.sh`` into the installed PySpark's ``conf/`` (Spark's launcher sources it when no
``SPARK_CONF_DIR`` is set), defaulting ``PYSPARK_PYTHON`` to this interpreter; an explicit
``PYSPARK_PYTHON`` still wins. Idempotent.
"""

from __future__ import annotations

import sys
from pathlib import Path

MARKER = "# written by lakelog (python -m lakelog.spark.spark_env)"


def spark_env_path() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent / "conf" / "spark-env.sh"


def write_spark_env(python: str = sys.executable) -> Path:
    path = spark_env_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    quoted = "".join("\\" + c if c in '"$`\\' else c for c in python)  # inside sh double quotes
    path.write_text(f'{MARKER}\nexport PYSPARK_PYTHON="${{PYSPARK_PYTHON:-{quoted}}}"\n')
    return path


if __name__ == "__main__":
    write_spark_env()
