"""A streaming query in its own process (own SparkSession), for the crash tests: lakelog → Parquet sink.

    python stream_job.py ROOT CHECKPOINT SINK STOP_FILE

It uses ``format("lakelog")`` with no registration call (run it outside the repository to prove PySpark finds
the installed ``pyspark_lakelog``), and prints the source's description (the JVM stream's class name) once the
first micro-batch ran.  It runs a processing-time query until STOP_FILE exists, then stops it
gracefully; the tests also kill it with SIGKILL mid-run.
"""

from __future__ import annotations

import os
import sys
import time


def main(root: str, checkpoint: str, sink: str, stop_file: str) -> int:
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.master("local[2]").appName("lakelog-stream-job").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    df = (spark.readStream.format("lakelog").option("subscribe", "orders").option("startingOffsets", "earliest")
          .option("maxOffsetsPerTrigger", "400").load(root))
    q = (df.select("partition", "offset", "value").writeStream.format("parquet")
         .option("checkpointLocation", checkpoint).option("path", sink)
         .trigger(processingTime="300 milliseconds").start())
    print("started", flush=True)
    described = False
    while not os.path.exists(stop_file):
        progress = q.lastProgress
        if not described and progress and progress["sources"]:
            print(f"source: {progress['sources'][0]['description']}", flush=True)  # which implementation read
            described = True
        if q.exception() is not None:
            print(f"query failed: {q.exception()}", flush=True)
            return 1
        time.sleep(0.2)
    q.stop()
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
