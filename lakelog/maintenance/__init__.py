"""Kafka's log maintenance as Spark jobs: the cleaner (key compaction), retention, segment merging, vacuum, and
the scheduler that runs them.

Pure planners (no I/O): :mod:`.retention_plan`, :mod:`.cleaner_plan`, :mod:`.segment_merge_plan`,
:mod:`.vacuum_plan`, :mod:`.key_map` (the cleaner's rule), :mod:`.tombstone_horizon`.
Jobs (plan, distribute, commit): :mod:`.retention`, :mod:`.cleaner`,
:mod:`.segment_merge`, :mod:`.vacuum`; their command line is :mod:`lakelog.cli.job_cli`, the
``spark-submit`` entry point is ``jobs/launch.py``, run by one script per job.  Shared: :mod:`.rewrite` (the fenced
commit), :mod:`.segment_scan` and :mod:`.segment_rewrite` (executor-side I/O),
:mod:`.topic_selection`, :mod:`.job_report`, :mod:`.job_lease` (the scheduler's lock),
:mod:`.spark_session`, :mod:`.crash_points`; the scheduler that runs the jobs when due:
:mod:`.scheduler`.  See docs/maintenance.md.

Importing this package needs neither Spark nor FastAPI.
"""
