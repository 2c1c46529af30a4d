"""spark-submit entry points of the maintenance jobs (thin wrappers over lakelog.compaction)."""
