"""``lakelog job NAME ...``: run one maintenance job through ``spark-submit``, as the scheduler does.

    lakelog job retention|compaction|merge|vacuum [--master URL] [JOB OPTIONS ...]

Without ``--master`` the job's script runs on this interpreter, which starts a local Spark session only
when the work needs one (a small compaction runs on the driver: a JVM's start-up would dominate it); with
``--master`` (or ``--spark-submit``) it goes through this installation's ``spark-submit``. Either way
Spark's Python workers run this interpreter and read the project's ``conf/`` -- so ``.venv/bin/lakelog
job compaction --root ROOT`` works without an activated venv, where a bare ``spark-submit
jobs/compact.py`` finds Spark through whichever ``python3`` is on PATH. The job's options are those of ``jobs/*.py``
(docs/maintenance.md); the global ``--root``, ``--storage-option`` and ``--json`` are passed on.
Exits with the job's exit code.
"""

from __future__ import annotations

import argparse
import subprocess
import sys


def register(subparsers) -> None:
    from lakelog.maintenance.job_scripts import JOB_ORDER

    p = subparsers.add_parser(
        "job", help="run one maintenance job (retention, compaction, merge, vacuum) via spark-submit",
        description="Run one maintenance job with this installation's spark-submit and Python "
                    "(no activated venv needed). Options after NAME are the job's own: run "
                    "'lakelog job NAME --help'. See docs/maintenance.md.")
    p.add_argument("name", choices=JOB_ORDER, metavar="NAME", help=f"the job: {', '.join(JOB_ORDER)}")
    p.add_argument("--master", default=None, metavar="URL", help="Spark master (default: local[*])")
    p.add_argument("--spark-submit", default=None, metavar="PATH", help="spark-submit to use")
    p.add_argument("job_args", nargs=argparse.REMAINDER, help="the job's options (see docs/maintenance.md)")
    p.set_defaults(func=run_job)


def command(args: argparse.Namespace) -> list[str]:
    """The spark-submit command line for ``args``."""
    from lakelog.maintenance.job_scripts import script_path
    from lakelog.maintenance.scheduler import spark_submit_path

    if args.master is None and args.spark_submit is None:
        # Local: the script runs on this Python and starts Spark (local[*]) only when its work needs it.
        cmd = [sys.executable, str(script_path(args.name))]
    else:
        cmd = [spark_submit_path(args.spark_submit)] + (["--master", args.master] if args.master else [])
        cmd.append(str(script_path(args.name)))
    if args.root:
        cmd += ["--root", args.root]
    for k, v in args.storage_options or ():
        cmd += ["--storage-option", f"{k}={v}"]
    if args.json:
        cmd.append("--json")
    return cmd + list(args.job_args)


def run_job(args: argparse.Namespace) -> int:
    from lakelog.maintenance.scheduler import job_environment

    return subprocess.run(command(args), env=job_environment()).returncode
