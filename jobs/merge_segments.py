"""``spark-submit jobs/merge_segments.py``: the merge job, through jobs/launch.py.

Generated from lakelog.maintenance.job_scripts.SCRIPTS.
"""

if __name__ == "__main__":
    from launch import run  # (this script's folder is first on sys.path)

    run("merge")
