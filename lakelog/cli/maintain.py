"""``lakelog maintain``: the maintenance scheduler (retention, compaction, merging, vacuum) for a storage root.

    lakelog maintain [--root ROOT] [--once] [--dry-run] [--topic T ...] [--interval-ms N] [--master URL]

Every tick it runs the jobs that are due on each topic as ``spark-submit``
subprocesses (see :mod:`lakelog.maintenance.scheduler`).  ``--once`` runs one tick and
exits 1 if any job failed (the form for cron); without it, it ticks until
SIGINT/SIGTERM.  ``--dry-run`` lists what is due and runs nothing.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading

from lakelog.cli.global_options import key_values, positive_int


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "maintain", help="run due retention/compaction/merge/vacuum jobs via spark-submit",
        description="The maintenance scheduler: for every topic, run the jobs that are due "
                    "(retention, compaction, segment merging, vacuum) as spark-submit subprocesses, "
                    "never two of the same job on the same topic at once. See docs/maintenance.md.")
    p.add_argument("--once", action="store_true", help="run one round of due jobs and exit (for cron)")
    p.add_argument("--dry-run", action="store_true", help="print the due jobs, run nothing")
    p.add_argument("--topic", action="append", dest="topics", metavar="TOPIC",
                   help="only these topics (repeatable; default: every topic)")
    p.add_argument("--interval-ms", type=positive_int, default=15_000, metavar="N",
                   help="time between rounds without --once (default 15000)")
    p.add_argument("--master", default=None, metavar="URL", help="Spark master for the jobs (default: local[*])")
    p.add_argument("--spark-submit", default=None, metavar="PATH", help="spark-submit to use")
    p.add_argument("--merge-min-segments", type=positive_int, default=10, metavar="N",
                   help="merge a topic once this many small segments would be joined (default 10)")
    p.add_argument("--vacuum-interval-ms", type=positive_int, default=3_600_000, metavar="N",
                   help="sweep for orphan files at least this often (default one hour)")
    p.add_argument("--job-timeout-s", type=positive_int, default=3600, metavar="S",
                   help="kill a job running longer than this (default 3600)")
    p.set_defaults(func=maintain)


def maintain(args: argparse.Namespace) -> int:
    from lakelog.maintenance.scheduler import SchedulerConfig, run_forever, run_once
    from lakelog.storage.storage_root import StorageRoot

    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s lakelog.maintain: %(message)s")
    options = key_values(args.storage_options)
    root = StorageRoot.resolve(args.root, options)
    config = SchedulerConfig(merge_min_segments=args.merge_min_segments, vacuum_interval_ms=args.vacuum_interval_ms,
                             job_timeout_s=float(args.job_timeout_s), master=args.master,
                             spark_submit=args.spark_submit, storage_options=options)
    if args.once or args.dry_run:
        results = run_once(root, config, topics=args.topics, dry_run=args.dry_run)
        if args.json:
            from dataclasses import asdict

            from lakelog.cli.output import print_json

            print_json([asdict(r) for r in results])
            return 1 if any(r.exit_code not in (0, None) for r in results) else 0
        for r in results:
            status = "due" if args.dry_run else ("skipped (lease held elsewhere)" if r.exit_code is None
                                                 else f"exit {r.exit_code} in {r.duration_s:.1f} s")
            line = f"{r.topic}\t{r.job}\t{status}\t{r.reason}" + (f"\t{r.summary}" if r.summary else "")
            print(line)
        if not results:
            print("nothing due")
        return 1 if any(r.exit_code not in (0, None) for r in results) else 0
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    run_forever(root, config, interval_s=args.interval_ms / 1000, topics=args.topics, stop=stop)
    return 0
