"""Retention, key compaction, segment merging and vacuum: Kafka's log maintenance as Spark jobs.

Pure planners (no I/O): :mod:`.retention`, :mod:`.compaction_plan`, :mod:`.merge_plan`,
:mod:`.vacuum`, :mod:`.key_map` (the cleaner's rule), :mod:`.tombstone_horizon`.
Jobs (plan, distribute, commit): :mod:`.retention_job`, :mod:`.compaction_job`,
:mod:`.merge_job`, :mod:`.vacuum_job`; their command line is :mod:`lakelog.cli.job_cli`, the
``spark-submit`` entry points are ``jobs/*.py``.  Shared: :mod:`.rewrite` (the fenced
commit), :mod:`.segment_scan` and :mod:`.segment_rewrite` (executor-side I/O),
:mod:`.topic_selection`, :mod:`.job_report`, :mod:`.job_lease` (the scheduler's lock),
:mod:`.spark_session`, :mod:`.crash_points`; the scheduler that runs the jobs when due:
:mod:`.maintenance`.  See docs/maintenance.md.

Importing this package needs neither Spark nor FastAPI.
"""
