"""spark-submit entry point: the lakelog compaction job.

    spark-submit jobs/compact.py --root ROOT [--topic T ...] [--dry-run] [--storage-option K=V ...] [--json]

See ``lakelog.cli.job_cli`` for the options and docs/maintenance.md for what the job does.
"""

import sys
from pathlib import Path

try:
    import lakelog  # noqa: F401
except ImportError:  # run from a source tree without lakelog installed
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lakelog.cli.job_cli import main

if __name__ == "__main__":
    sys.exit(main("compaction"))
