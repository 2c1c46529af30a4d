"""Equivalence: for random topics, every kind of starting/ending spec returns what a brute-force model predicts.

The model knows only the records written (partition, offset, timestamp), the delete-records floors and Kafka's
rules; the source resolves specs against Delta snapshots, plans segment slices and reads Parquet row groups.
Random topics have non-monotonic timestamps, several segments per partition, compacted segments with offset
gaps and moved log start offsets.  Many examples run through the reader objects directly (the same code
Spark calls); fewer through ``spark.read.format("lakelog")``, on the JVM and the Python source (conftest), on a
local root and on the moto S3 server.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakelog import Log
from lakelog.spark.spark_source import KAFKA_SCHEMA, LakelogDataSource
from lakelog.storage.storage_root import StorageRoot

from s3_server import BUCKET, s3_options
from spark_support import append_segment, lakelog_reader

T0 = 1_700_000_000_000


@dataclass
class Topic:
    name: str
    records: dict[int, list[tuple[int, int]]] = field(default_factory=dict)  # partition -> [(offset, ts)]
    hw: dict[int, int] = field(default_factory=dict)
    lso: dict[int, int] = field(default_factory=dict)


@st.composite
def topics(draw):
    partitions = draw(st.integers(1, 2))
    plan = []
    for p in range(partitions):
        segments = []
        for _ in range(draw(st.integers(0, 3))):
            stamps = draw(st.lists(st.integers(0, 40), min_size=1, max_size=6))
            gaps = draw(st.booleans())
            keep = draw(st.lists(st.booleans(), min_size=len(stamps), max_size=len(stamps))) if gaps else None
            segments.append((stamps, keep))
        plan.append(segments)
    deletes = draw(st.lists(st.integers(0, 20), min_size=partitions, max_size=partitions))
    return plan, deletes


def build(log: Log, plan, deletes) -> Topic:
    topic = Topic(f"t-{uuid.uuid4().hex[:10]}")
    log.create_topic(topic.name, len(plan))
    for p, segments in enumerate(plan):
        hw, recs = 0, []
        for stamps, keep in segments:
            if keep is None:
                log.append(topic.name, [{"key": "k", "value": f"v{hw + i}", "timestamp": T0 + s * 1000}
                                        for i, s in enumerate(stamps)], partition=p)
                recs += [(hw + i, T0 + s * 1000) for i, s in enumerate(stamps)]
            else:  # a compacted segment: the first offset kept, some later ones gone
                kept = [(hw + i, T0 + s * 1000) for i, (s, k) in enumerate(zip(stamps, keep)) if k or i == 0]
                append_segment(log.root, topic.name, p, [o for o, _ in kept], [t for _, t in kept],
                               next_offset=hw + len(stamps))
                recs += kept
            hw += len(stamps)
        topic.records[p], topic.hw[p] = recs, hw
        floor = min(deletes[p], hw)
        if floor:
            log.delete_records(topic.name, p, floor)
        topic.lso[p] = floor
    return topic


@st.composite
def specs(draw, topic: Topic):
    parts = sorted(topic.records)
    n = topic.name
    start_kind = draw(st.sampled_from(["earliest", "offsets", "timestamp", "byTimestamp", "none"]))
    end_kind = draw(st.sampled_from(["latest", "offsets", "timestamp", "byTimestamp", "none"]))
    opts = {"subscribe": n}
    stamp = st.integers(0, 45).map(lambda s: T0 + s * 1000)
    if start_kind == "earliest":
        opts["startingOffsets"] = "earliest"
    elif start_kind == "offsets":
        opts["startingOffsets"] = json.dumps({n: {str(p): draw(st.sampled_from([-2, *range(topic.hw[p] + 1)]))
                                                  for p in parts}})
    elif start_kind == "timestamp":
        opts["startingTimestamp"] = str(draw(stamp))
    elif start_kind == "byTimestamp":
        opts["startingOffsetsByTimestamp"] = json.dumps({n: {str(p): draw(stamp) for p in parts}})
    if end_kind == "latest":
        opts["endingOffsets"] = "latest"
    elif end_kind == "offsets":
        opts["endingOffsets"] = json.dumps({n: {str(p): draw(st.sampled_from([-1, *range(topic.hw[p] + 2)]))
                                                for p in parts}})
    elif end_kind == "timestamp":
        opts["endingTimestamp"] = str(draw(stamp))
    elif end_kind == "byTimestamp":
        opts["endingOffsetsByTimestamp"] = json.dumps({n: {str(p): draw(stamp) for p in parts}})
    if draw(st.booleans()):
        opts["startingOffsetsByTimestampStrategy"] = "latest"
    if draw(st.booleans()):
        opts["failOnDataLoss"] = "false"
    return opts


def model(topic: Topic, opts: dict) -> list[tuple[int, int]] | None:
    """The records (partition, offset) the options select, or None when the read must fail."""
    if "startingTimestamp" in opts and "endingTimestamp" in opts \
            and int(opts["endingTimestamp"]) < int(opts["startingTimestamp"]):
        return None  # refused up front: the end can never be after the start
    out = []
    for p, recs in topic.records.items():
        lso, hw = topic.lso[p], topic.hw[p]
        live = [(o, t) for o, t in recs if o >= lso]

        def first_at(ts):
            return next((o for o, t in live if t >= ts), None)

        if "startingTimestamp" in opts or "startingOffsetsByTimestamp" in opts:
            ts = int(opts["startingTimestamp"]) if "startingTimestamp" in opts else \
                json.loads(opts["startingOffsetsByTimestamp"])[topic.name][str(p)]
            start = first_at(ts)
            if start is None:
                if opts.get("startingOffsetsByTimestampStrategy") != "latest":
                    return None
                start = hw
        elif opts.get("startingOffsets", "earliest") == "earliest":
            start = lso
        else:
            o = json.loads(opts["startingOffsets"])[topic.name][str(p)]
            start = lso if o == -2 else o
        if start < lso:
            if opts.get("failOnDataLoss") != "false":
                return None
            start = lso
        if "endingTimestamp" in opts or "endingOffsetsByTimestamp" in opts:
            ts = int(opts["endingTimestamp"]) if "endingTimestamp" in opts else \
                json.loads(opts["endingOffsetsByTimestamp"])[topic.name][str(p)]
            end = first_at(ts)
            end = hw if end is None else end
        elif opts.get("endingOffsets", "latest") == "latest":
            end = hw
        else:
            o = json.loads(opts["endingOffsets"])[topic.name][str(p)]
            end = hw if o == -1 else o
            if end > hw:
                return None
        if end < start:
            return None
        out += [(p, o) for o, _ in recs if start <= o < end]
    return sorted(out)


def read_with_reader_objects(log: Log, opts: dict) -> list[tuple[int, int]] | None:
    """What Spark would return, through the source's own objects (planner and executor code, no transport)."""
    options = {"path": log.root.uri, **{k.lower(): v for k, v in opts.items()}}
    try:
        source = LakelogDataSource(options)
        source.schema()
        reader = source.reader(KAFKA_SCHEMA)
        out = []
        for part in reader.partitions():
            for batch in reader.read(part):
                out += zip(batch.column("partition").to_pylist(), batch.column("offset").to_pylist())
        return sorted(out)
    except Exception as e:  # noqa: BLE001 -- every failure must be one the model predicts
        assert "KafkaError" in [c.__name__ for c in type(e).__mro__], f"untyped failure: {e!r}"
        return None


@pytest.fixture(scope="module")
def shared_log(tmp_path_factory):
    return Log(StorageRoot.resolve(str(tmp_path_factory.mktemp("equivalence") / "root")))


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data(), shape=topics())
def test_reader_matches_the_model(shared_log, data, shape):
    topic = build(shared_log, *shape)
    for _ in range(4):
        opts = data.draw(specs(topic))
        assert read_with_reader_objects(shared_log, opts) == model(topic, opts), opts


@pytest.fixture(scope="module")
def s3_shared_log(s3_endpoint):
    return Log(StorageRoot.resolve(f"s3://{BUCKET}/{uuid.uuid4().hex}", s3_options(s3_endpoint)))


@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data(), shape=topics())
def test_spark_matches_the_model(spark, shared_log, data, shape):
    spark_matches_the_model(spark, shared_log, data, shape)


@pytest.mark.s3
@settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data(), shape=topics())
def test_spark_matches_the_model_on_s3(spark, s3_shared_log, data, shape):
    spark_matches_the_model(spark, s3_shared_log, data, shape)


def spark_matches_the_model(spark, shared_log, data, shape):
    topic = build(shared_log, *shape)
    opts = data.draw(specs(topic))
    expected = model(topic, opts)
    df = lakelog_reader(spark, shared_log.root, **opts)
    if expected is None:  # the source's own error, surfaced by Spark with its Kafka name and code
        with pytest.raises(Exception, match=r"[A-Z_]+ \(\d+\): "):
            df.load(shared_log.root.uri).collect()
    else:
        rows = df.load(shared_log.root.uri).select("partition", "offset").collect()
        assert sorted((r.partition, r.offset) for r in rows) == expected, opts
