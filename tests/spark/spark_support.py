"""Helpers of the Spark tests: readers with storage options, rows as comparable tuples, topic builders."""

from __future__ import annotations

import json
from pathlib import Path

from spark_cluster import SPARK_ENV  # noqa: F401  (re-exported to this directory's tests)

REPO = Path(__file__).resolve().parents[2]


S3A_TEST_CREDENTIALS = ("org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider,"
                        "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider")


def hadoop_aws_classpath() -> str:
    """The ``hadoop-aws`` reference set's class path (hadoop-aws, the AWS SDK v2 bundle); raises
    ``reference.maven.ReferenceMissing`` naming the fetch command when it is not fetched."""
    from reference import maven

    return maven.classpath("hadoop-aws")


def with_hadoop_aws(env) -> Exception | None:
    """Put hadoop-aws on the class path of the PySpark sessions started with ``env`` (``PYSPARK_SUBMIT_ARGS``);
    the error when the reference set is not fetched (None when done)."""
    from reference import maven

    try:
        cp = hadoop_aws_classpath()
    except maven.ReferenceMissing as e:
        return e
    args = env.get("PYSPARK_SUBMIT_ARGS", "pyspark-shell")
    if "--driver-class-path" not in args:
        # Credentials from the Hadoop configuration only (the storage.* options and the AWS environment, which the
        # source translates into it): never S3A's last resort, the EC2 instance metadata service, which is no
        # loopback address.
        env["PYSPARK_SUBMIT_ARGS"] = (f"--driver-class-path {cp} --conf spark.hadoop.fs.s3a.aws.credentials.provider="
                                      f"{S3A_TEST_CREDENTIALS} {args}")
    return None


def without_hadoop_aws(env: dict[str, str]) -> dict[str, str]:
    """``env`` for a Spark whose class path has no hadoop-aws (as pyspark's wheel: S3 reads fall back to Python)."""
    return {k: v for k, v in env.items() if k != "PYSPARK_SUBMIT_ARGS"}


def s3a_loadable(spark) -> bool:
    """Whether the session's driver can load S3AFileSystem (hadoop-aws on its class path)."""
    try:
        spark._jvm.java.lang.Class.forName("org.apache.hadoop.fs.s3a.S3AFileSystem")
        return True
    except Exception:  # noqa: BLE001 -- py4j wraps the ClassNotFoundException
        return False


def scanned_by_jvm(df) -> bool:
    """Whether a batch DataFrame's scan is the JVM source's (a FileScan over LakelogFileIndex), not the Python
    data source's (a ``BatchScan ... (Python)``)."""
    plan = df._jdf.queryExecution().executedPlan().toString()
    assert ("LakelogFileIndex" in plan) != ("(Python)" in plan), plan
    return "LakelogFileIndex" in plan


def storage_options(root) -> dict[str, str]:
    """A StorageRoot's options as the source's ``storage.<key>`` options."""
    return {f"storage.{k}": v for k, v in root.options}


def lakelog_reader(spark, root, *, stream: bool = False, **options):
    """``spark.read(Stream).format("lakelog")`` with ``options`` and the root's storage options (not loaded)."""
    reader = (spark.readStream if stream else spark.read).format("lakelog")
    for k, v in {**storage_options(root), **options}.items():
        reader = reader.option(k, v)
    return reader


def records_of(df, *cols: str) -> list[tuple]:
    """The DataFrame's rows as sorted tuples of ``cols`` (default topic, partition, offset, key, value)."""
    cols = cols or ("topic", "partition", "offset", "key", "value")
    return sorted(tuple(bytes(v) if isinstance(v, bytearray) else v for v in row) for row in df.select(*cols).collect())


def append_segment(root, topic: str, partition: int, offsets: list[int], timestamps_ms: list[int], *,
                   next_offset: int | None = None) -> None:
    """Commit one segment holding exactly ``offsets`` (gaps allowed, as after key compaction) to ``partition``.

    The partition's high watermark becomes ``next_offset`` (default ``offsets[-1] + 1``: compaction may have
    removed the segment's last offsets); offsets must start at or after the current one.
    """
    import pyarrow as pa
    from deltalake import CommitProperties, DeltaTable, Transaction

    from lakelog.storage.record_schema import FILE_SCHEMA, TABLE_SCHEMA, TIMESTAMP_TYPE
    from lakelog.storage.topic_snapshot import leo_app
    from lakelog.writer.segment_writer import write_segment

    n = len(offsets)
    values = [f"v{o}".encode() for o in offsets]
    table = pa.table({
        "offset": pa.array(offsets, pa.int64()),
        "timestamp": pa.array([t * 1000 for t in timestamps_ms], pa.int64()).cast(TIMESTAMP_TYPE),
        "timestampType": pa.array([0] * n, pa.int32()),
        "key": pa.array([f"k{o % 3}".encode() for o in offsets], pa.binary()),
        "value": pa.array(values, pa.binary()),
        "headers": pa.array([[] for _ in offsets], FILE_SCHEMA.field("headers").type),
        "producerId": pa.array([-1] * n, pa.int64()),
        "producerEpoch": pa.array([-1] * n, pa.int16()),
        "sequence": pa.array([-1] * n, pa.int32()),
    }, schema=FILE_SCHEMA)
    add = write_segment(root, topic, partition, table)
    dt = DeltaTable(root.uri_for("topics", topic), storage_options=root.storage_options)
    dt.create_write_transaction([add], mode="append", schema=TABLE_SCHEMA, partition_by=["partition"],
                                commit_properties=CommitProperties(
                                    app_transactions=[Transaction(leo_app(partition), next_offset or offsets[-1] + 1)],
                                    custom_metadata={"lakelog.operation": "compaction"}))


def produce(log, topic: str, partition: int, n: int, *, t0_ms: int = 1_700_000_000_000, step_ms: int = 1000,
            prefix: str = "v") -> None:
    """Append ``n`` records to one partition, timestamps ``t0 + i * step``."""
    log.append(topic, [{"key": f"k{i % 5}", "value": f"{prefix}{i}", "timestamp": t0_ms + i * step_ms}
                       for i in range(n)], partition=partition)


class JvmStreamReader:
    """The JVM source's ``LakelogMicroBatchStream`` behind the Python stream reader's interface (offsets as dicts,
    PySpark's read limits, lakelog's errors), so one test drives both implementations call by call."""

    def __init__(self, spark, options: dict[str, str]) -> None:
        self._jvm = spark._jvm
        jmap = self._jvm.java.util.HashMap()
        for k, v in options.items():
            jmap.put(k, v)
        self._stream = self._call(lambda: self._jvm.io.lakelog.spark.LakelogMicroBatchStream.open(jmap))
        self._default = self._stream.getDefaultReadLimit()

    def _call(self, fn):
        from py4j.java_gateway import get_field
        from py4j.protocol import Py4JJavaError

        from lakelog.errors import KafkaError, error_for_code

        try:
            return fn()
        except Py4JJavaError as e:
            cause = e.java_exception
            while cause is not None and cause.getClass().getName() != "io.lakelog.spark.LakelogError":
                cause = cause.getCause()
            if cause is None:
                raise
            err: KafkaError = error_for_code(get_field(cause, "code"), cause.getMessage().split(": ", 1)[1])
            raise err from None

    def _offset(self, offsets: dict):
        return self._jvm.io.lakelog.spark.LakelogOffset.parse(json.dumps(offsets))

    def _limit(self, limit):
        from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, ReadMinRows

        if limit == self.getDefaultReadLimit():
            return self._default
        read_limit = self._jvm.org.apache.spark.sql.connector.read.streaming.ReadLimit
        if isinstance(limit, ReadMaxRows):
            return read_limit.maxRows(limit.max_rows)
        if isinstance(limit, ReadMinRows):
            return read_limit.minRows(limit.min_rows, 0)
        assert isinstance(limit, ReadAllAvailable), limit
        return read_limit.allAvailable()

    def getDefaultReadLimit(self):
        from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, ReadMinRows

        name = self._default.getClass().getSimpleName()
        if name == "ReadMaxRows":
            return ReadMaxRows(self._default.maxRows())
        if name == "ReadMinRows":
            return ReadMinRows(self._default.minRows())
        return ReadAllAvailable()

    def initialOffset(self) -> dict:
        return json.loads(self._call(lambda: self._stream.initialOffset().json()))

    def prepareForTriggerAvailableNow(self) -> None:
        self._call(self._stream.prepareForTriggerAvailableNow)

    def latestOffset(self, start: dict, limit) -> dict:
        jstart = self._offset(start)
        end = self._call(lambda: self._stream.latestOffset(jstart, self._limit(limit)))
        return start if end.equals(jstart) else json.loads(end.json())

    def reportLatestOffset(self) -> dict | None:
        latest = self._stream.reportLatestOffset()
        return None if latest is None else json.loads(latest.json())

    def planned(self, start: dict, end: dict) -> dict[tuple[str, int], list[int]]:
        """The offsets a micro-batch from ``start`` to ``end`` reads, per partition."""
        ranges = json.loads(self._call(lambda: self._stream.plannedRanges(json.dumps(start), json.dumps(end))))
        return {(t, int(p)): list(range(s, e)) for t, parts in ranges.items() for p, (s, e) in parts.items()}
