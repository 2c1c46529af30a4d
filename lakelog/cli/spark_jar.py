"""``lakelog spark-jar``: print the path of the JVM Spark source's jar (for ``spark-submit --jars``).

    spark-submit --jars "$(lakelog spark-jar)" job.py

Exits 1 (with a message on stderr) when the jar was not built (no javac at install: see docs/spark.md).
"""

from __future__ import annotations

import argparse
import sys


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "spark-jar", help="print the path of the JVM Spark source's jar (for spark-submit --jars)",
        description="Print the path of lakelog's JVM Spark source jar, built at install with javac. Clusters add it "
                    "with: spark-submit --jars \"$(lakelog spark-jar)\". See docs/spark.md.")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from lakelog.spark.jvm import jar_path

    jar = jar_path()
    if not jar.is_file():
        print(f"lakelog: the JVM Spark source is not built ({jar} is missing); run 'python -m lakelog.spark.jvm' "
              f"with a JDK (javac) on PATH", file=sys.stderr)
        return 1
    print(jar)
    return 0
