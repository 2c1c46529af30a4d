"""The spark-submit entry points of the maintenance jobs (lakelog.maintenance): launch.py, run by one script per job."""
