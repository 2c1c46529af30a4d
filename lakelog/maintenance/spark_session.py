"""The Spark session of a maintenance job, configured from ``conf/spark-defaults.conf``.

``spark-submit`` already applies ``--conf``, ``--master`` and
``--properties-file``; on top of that a job reads the project's
``conf/spark-defaults.conf`` (or ``$LAKELOG_SPARK_CONF``) and sets every key not
set otherwise, so ``spark-submit jobs/compact.py ...`` and
``python jobs/compact.py ...`` behave alike.  Without a master the job runs
on ``local[*]``.  Executors run ``$PYSPARK_PYTHON``, defaulting to the driver's
interpreter (lakelog must be importable there, e.g. installed in the same venv
on every worker).
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

CONF_ENV = "LAKELOG_SPARK_CONF"
# Below this much to read, a compaction or merge pass whose session allows it (``LazySession.driver_may_run``:
# a local master) runs on the driver, without Spark: its start-up would cost more than the work (a pass over a
# few small segments is a few seconds on the driver, most of it the interpreter's imports).
DRIVER_WORK_BYTES = 16 << 20


def defaults_file() -> Path | None:
    """``$LAKELOG_SPARK_CONF``, else ``conf/spark-defaults.conf`` of the source tree, if it exists."""
    explicit = os.environ.get(CONF_ENV)
    if explicit:
        return Path(explicit)
    candidate = Path(__file__).resolve().parents[2] / "conf" / "spark-defaults.conf"
    return candidate if candidate.is_file() else None


def read_properties(path: Path) -> dict[str, str]:
    """A Spark properties file: ``key value`` or ``key=value`` lines, ``#`` comments."""
    out: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = re.match(r"([^\s=:]+)\s*[\s=:]\s*(.*)$", line)
        if m:
            out[m.group(1)] = m.group(2).strip()
    return out


def build_session(app_name: str, *, master: str | None = None, conf: dict[str, str] | None = None):
    """Get or create the job's SparkSession (``master`` and ``conf`` override the files)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession

    if "PYSPARK_GATEWAY_PORT" in os.environ:
        # Under spark-submit: join its JVM first, so SparkConf sees what spark-submit was given
        # (--master, --conf, --properties-file arrive as JVM system properties).
        SparkContext._ensure_initialized()
    spark_conf = SparkConf()  # otherwise empty: every setting below is applied when the JVM starts
    path = defaults_file()
    settings = read_properties(path) if path is not None and path.is_file() else {}
    settings.update(conf or {})
    builder = SparkSession.builder.appName(app_name)
    for key, value in settings.items():
        if not spark_conf.contains(key) or key in (conf or {}):
            builder = builder.config(key, value)
    if master:
        builder = builder.master(master)
    elif not spark_conf.contains("spark.master") and "spark.master" not in settings:
        builder = builder.master("local[*]")
    return builder.getOrCreate()


class LazySession:
    """The job's SparkSession, built on first use (:func:`build_session`): a pass that finds nothing to do, or
    little enough to do on the driver, never pays Spark's start-up.

    Attribute access goes to the session (building it). ``driver_may_run`` says whether small work may skip
    Spark: only when the master is local (``--master local[...]``, or none given, outside spark-submit, or
    spark-submit's own master being local). Not thread-safe.
    """

    def __init__(self, app_name: str, master: str | None = None) -> None:
        self.app_name, self.master = app_name, master
        self._session = None

    @property
    def started(self) -> bool:
        return self._session is not None

    @property
    def driver_may_run(self) -> bool:
        master = self.master
        if master is None and "PYSPARK_GATEWAY_PORT" in os.environ:  # under spark-submit: its --master counts
            from pyspark import SparkConf, SparkContext

            SparkContext._ensure_initialized()
            master = SparkConf().get("spark.master", None)
        return master is None or master.startswith("local")

    def get(self):
        if self._session is None:
            self._session = build_session(self.app_name, master=self.master)
        return self._session

    def __getattr__(self, name: str):
        return getattr(self.get(), name)

    def stop(self) -> None:
        if self._session is not None:
            self._session.stop()
