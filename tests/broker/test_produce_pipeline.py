"""The broker's produce pipeline on a real log, stage by stage, as every front calls it: authorize -> validate ->
partition and leadership check -> producer state check -> accumulator (no front: the fronts' own tests drive
the same stages over HTTP /v1, REST v3 and Kafka's protocol)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from lakelog import Log
from lakelog.broker.authorizer import Authorizer, Principal
from lakelog.broker.metrics import Metrics
from lakelog.broker.produce import ProducePipeline, StaleMetadata
from lakelog.broker.topic_metadata import TopicMetadata
from lakelog.errors import (InvalidTopic, KafkaError, MessageTooLarge, ProducerFenced,
                            TopicAuthorizationFailed, TransactionalIdAuthorizationFailed, UnknownProducerId,
                            UnknownTopicOrPartition)
from lakelog.security.acl import AclBinding
from lakelog.writer.records import PartitionBatch
from lakelog.writer.records import normalize_records

ALICE, BOB = Principal("User:alice"), Principal("User:bob")


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory):
    log = Log(str(tmp_path_factory.mktemp("pipeline") / "root"))
    log.create_topic("orders", 2, {"max.message.bytes": 1000})
    acls = [AclBinding("Topic", "orders", "Literal", "User:alice", "*", "Write", "Allow"),
            AclBinding("TransactionalId", "tx", "Literal", "User:alice", "*", "Write", "Allow")]
    accumulator = log.accumulator(linger_ms=1)
    yield ProducePipeline(log, accumulator, TopicMetadata(log, 60_000), Authorizer({}, acls), Metrics())
    accumulator.close()
    log.close()


def records(*values: bytes) -> pa.Table:
    return normalize_records(pa.table({"key": pa.array([None] * len(values), pa.binary()),
                                       "value": pa.array(values, pa.binary())}))


@pytest.mark.parametrize("principal, topic, refused", [
    (ALICE, "orders", None),
    (BOB, "orders", TopicAuthorizationFailed),
    (ALICE, "payments", TopicAuthorizationFailed),  # authorization comes first: no hint the topic is absent
    (ALICE, "__consumer_offsets", TopicAuthorizationFailed),
])
def test_authorize_before_anything_else(pipeline, principal, topic, refused):
    if refused is None:
        pipeline.authorize(principal, topic)
    else:
        with pytest.raises(refused):
            pipeline.admit(principal, topic)


def test_a_transactional_id_needs_write_on_it(pipeline):
    pipeline.authorize_transactional(ALICE, "tx")
    with pytest.raises(TransactionalIdAuthorizationFailed):
        pipeline.authorize_transactional(ALICE, "other")


@pytest.mark.parametrize("topic", ["__consumer_offsets", "__transaction_state", "bad/name", "", "x" * 250])
def test_internal_topics_and_illegal_names_are_refused_once_for_every_front(topic):
    with pytest.raises(InvalidTopic):
        ProducePipeline.check_topic(topic)


def test_records_are_validated_against_the_topic(pipeline):
    snap = pipeline.snapshot("orders")
    ProducePipeline.validate(snap, records(b"small"), 0)
    with pytest.raises(MessageTooLarge):
        ProducePipeline.validate(snap, records(b"x" * 2000), 0)


def test_a_partition_beyond_the_cached_count_is_read_again_once(pipeline):
    snap = pipeline.snapshot("orders", 1)
    with pytest.raises(StaleMetadata):
        ProducePipeline.check_partition("orders", snap, 2, fresh=False)
    with pytest.raises(UnknownTopicOrPartition):
        pipeline.snapshot("orders", 2)
    pipeline.log.alter_topic("orders", None, 3)  # grown behind the cache's back (another front)
    assert pipeline.snapshot("orders", 2).partition_count == 3
    with pytest.raises(UnknownTopicOrPartition):
        pipeline.snapshot("absent")


def test_records_without_a_partition_are_placed_by_the_partitioner(pipeline):
    batches = pipeline.partition("orders", records(b"a", b"b", b"c"), [0, 1, 0], 3)
    assert sorted((b.partition, b.records.column("value").to_pylist()) for b in batches) == \
        [(0, [b"a", b"c"]), (1, [b"b"])]
    keyless = pipeline.partition("orders", records(b"a", b"b"), None, 3)
    assert len(keyless) == 1 and keyless[0].records.num_rows == 2  # sticky: one batch


def test_producer_state_is_checked_before_the_accumulator(pipeline):
    ident = pipeline.log.init_producer(None)
    good = PartitionBatch(0, records(b"a"), ident.producer_id, ident.producer_epoch, 0)
    assert pipeline.check_producers([good]) == {(ident.producer_id, ident.producer_epoch): False}
    assert pipeline.check_producers([good], known={(ident.producer_id, ident.producer_epoch)}) == {}
    with pytest.raises(UnknownProducerId):
        pipeline.check_producers([PartitionBatch(0, records(b"a"), ident.producer_id + 10_000, 0, 0)])
    first = pipeline.log.init_producer("tx-fenced")
    again = pipeline.log.init_producer("tx-fenced")  # the transactional id's next producer: the first is fenced
    assert pipeline.check_producers([PartitionBatch(0, records(b"a"), again.producer_id, again.producer_epoch, 0)]) \
        == {(again.producer_id, again.producer_epoch): True}
    with pytest.raises(ProducerFenced):
        pipeline.check_producers([PartitionBatch(0, records(b"a"), first.producer_id, first.producer_epoch, 0)])


def test_appended_batches_commit_in_order(pipeline):
    before = pipeline.metadata.get("orders", fresh=True).high_watermark(1)
    first = pipeline.append("orders", [PartitionBatch(1, records(b"1", b"2"))])
    second = pipeline.append("orders", [PartitionBatch(1, records(b"3"))])
    (a,), (b,) = first.result(timeout=60), second.result(timeout=60)
    assert not isinstance(a, KafkaError) and not isinstance(b, KafkaError)
    assert (a.base_offset, b.base_offset) == (before, before + 2)
    fetched = pipeline.log.fetch("orders", 1, before, max_records=10, max_bytes=1 << 20)
    assert fetched.records.column("value").to_pylist() == [b"1", b"2", b"3"]
