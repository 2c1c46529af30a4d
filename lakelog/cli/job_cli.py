"""The command line shared by the ``spark-submit`` entry points in ``jobs/``.

    spark-submit jobs/retention.py      --root ROOT [--topic T ...] [--dry-run] [--storage-option K=V ...] [--json]
    spark-submit jobs/compact.py        ... [--min-dirty-ratio R | --force]
    spark-submit jobs/merge_segments.py ... [--segment-bytes N] [--segment-ms N]
    spark-submit jobs/vacuum.py         ... [--orphan-min-age-ms N]

Prints the job's summary (text, or one JSON document with ``--json``) and
exits 0 on success, 1 on failure (``error: NAME (code): message`` on stderr;
nothing is changed when the input is bad), 2 on bad usage.  Retention and
vacuum are metadata and file operations on the driver and start no Spark
session; compaction and merging distribute their work with Spark (``--master``
or spark-submit's master, else ``local[*]``).
"""

from __future__ import annotations

import argparse
import logging
import sys
import time

from lakelog.cli.global_options import key_value, non_negative_int
from lakelog.maintenance.job_scripts import JOB_ORDER as JOBS, SCRIPTS




def _ratio(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, got {value}")
    return value


def build_parser(job: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=f"spark-submit jobs/{SCRIPTS[job]}",
                                     description=f"lakelog {job} job (see docs/maintenance.md)")
    parser.add_argument("--root", default=None,
                        help="storage root: a local directory or s3://bucket/prefix (default: $LAKELOG_ROOT)")
    parser.add_argument("--topic", action="append", dest="topics", metavar="TOPIC",
                        help="a topic to process, repeatable (default: every topic the job applies to)")
    parser.add_argument("--dry-run", action="store_true", help="print the plan and change nothing")
    parser.add_argument("--storage-option", action="append", type=key_value, default=[], metavar="KEY=VALUE",
                        dest="storage_options", help="delta-rs/object_store option, repeatable")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.add_argument("--master", default=None, help="Spark master when not run through spark-submit")
    if job == "compaction":
        g = parser.add_mutually_exclusive_group()
        g.add_argument("--min-dirty-ratio", type=_ratio, default=None,
                       help="clean partitions whose dirty ratio exceeds this (default: min.cleanable.dirty.ratio)")
        g.add_argument("--force", action="store_true", help="clean every partition with any dirty record")
    if job == "merge":
        parser.add_argument("--segment-bytes", type=non_negative_int, default=None,
                            help="target merged size (default: the topic's segment.bytes)")
        parser.add_argument("--segment-ms", type=non_negative_int, default=None,
                            help="largest time span of a merged segment (default: the topic's segment.ms)")
    if job == "vacuum":
        from lakelog.maintenance.vacuum import DEFAULT_ORPHAN_MIN_AGE_MS

        parser.add_argument("--orphan-min-age-ms", type=non_negative_int, default=DEFAULT_ORPHAN_MIN_AGE_MS,
                            help="orphan files must also be at least this old (default: one hour)")
    return parser


def run_job(job: str, args: argparse.Namespace, *, stop_session: bool = False):
    """Run ``job`` as parsed; returns its :class:`~lakelog.maintenance.job_report.JobReport`.

    ``stop_session`` stops the Spark session the job started (the entry points do, to free the cluster).
    """
    from lakelog.storage.storage_root import StorageRoot

    root = StorageRoot.resolve(args.root, dict(args.storage_options))
    if job == "retention":
        from lakelog.maintenance.retention import run_retention

        return run_retention(root, args.topics, dry_run=args.dry_run)
    if job == "vacuum":
        from lakelog.maintenance.vacuum import run_vacuum

        return run_vacuum(root, args.topics, dry_run=args.dry_run, orphan_min_age_ms=args.orphan_min_age_ms)
    from lakelog.maintenance.topic_selection import check_root, select_topics

    # validate before paying for a Spark session
    check_root(root)
    select_topics(root, args.topics, policy="compact" if job == "compaction" else None, job=job)
    spark = None
    if not args.dry_run:
        from lakelog.maintenance.spark_session import LazySession

        spark = LazySession(f"lakelog-{job}", master=args.master)
    try:
        if job == "compaction":
            from lakelog.maintenance.cleaner import run_compaction

            report = run_compaction(spark, root, args.topics, dry_run=args.dry_run,
                                    min_dirty_ratio=-1.0 if args.force else args.min_dirty_ratio)
        else:
            from lakelog.maintenance.segment_merge import run_merge

            report = run_merge(spark, root, args.topics, dry_run=args.dry_run, segment_bytes=args.segment_bytes,
                               segment_ms=args.segment_ms)
        report.spark_master = spark.sparkContext.master if spark is not None and spark.started else None
        return report
    finally:
        if spark is not None and stop_session:
            spark.stop()


def main(job: str, argv: list[str] | None = None) -> int:
    """Parse, run, print; the process exit code."""
    from lakelog.errors import KafkaError

    args = build_parser(job).parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                        stream=sys.stderr)
    for noisy in ("py4j", "urllib3"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    started = time.monotonic()
    try:
        report = run_job(job, args, stop_session=True)
    except KafkaError as e:
        sys.stderr.write(f"error: {e}\n")
        if args.json:
            sys.stdout.write(_failure_json(job, args, e, time.monotonic() - started) + "\n")
        return 1
    except ValueError as e:  # a malformed root URI
        sys.stderr.write(f"error: {e}\n")
        return 1
    sys.stdout.write((report.to_json() if args.json else report.format_text()) + "\n")
    sys.stdout.flush()
    return 0 if report.ok else 1


def _failure_json(job: str, args, error, duration: float) -> str:
    import json

    return json.dumps({"job": job, "root": args.root, "dry_run": args.dry_run, "topics": [],
                       "duration_s": duration, "error": str(error), **error.to_dict()})
