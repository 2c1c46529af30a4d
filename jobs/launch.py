"""spark-submit entry point of the maintenance jobs: one launcher, run by one script per job.

    spark-submit jobs/retention.py      --root ROOT [--topic T ...] [--dry-run] [--storage-option K=V ...] [--json]
    spark-submit jobs/compact.py        ... [--min-dirty-ratio R | --force]
    spark-submit jobs/merge_segments.py ... [--segment-bytes N] [--segment-ms N]
    spark-submit jobs/vacuum.py         ... [--orphan-min-age-ms N]

Each of those is generated from :data:`lakelog.maintenance.job_scripts.SCRIPTS` and calls :func:`run` with its
job. See ``lakelog.cli.job_cli`` for the options and docs/maintenance.md for what the jobs do.
"""

import sys
from pathlib import Path

try:
    import lakelog  # noqa: F401
except ImportError:  # run from a source tree without lakelog installed
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def run(job: str) -> None:
    """Run maintenance ``job`` with this process's arguments, and exit with its status."""
    from lakelog.cli.job_cli import main

    sys.exit(main(job))


if __name__ == "__main__":
    from lakelog.maintenance.job_scripts import SCRIPTS

    sys.exit(f"run one of {', '.join(f'jobs/{s}' for s in SCRIPTS.values())}")
