"""A failing store's errors, as clients see them, name the failure's kind but no file, object key, bucket or store
URL: an ``OSError``'s text names the file, a delta-rs or S3 error's the store's URL and keys, and these messages
reach HTTP bodies, Kafka ``error_message`` strings and delivery reports. The full text goes to the server's log.

Faults are real: a local topic whose ``_delta_log`` is replaced by a plain file (a commit's put-if-absent then
fails with ``NotADirectoryError`` naming the temporary file; chmod would not stop root), and the real moto S3
server behind the fault-injecting proxy (bench/s3_proxy.py)."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

import pytest

from s3_server import BUCKET, s3_options
from lakelog import Log, PartitionBatch
from lakelog.errors import KafkaError, KafkaStorageError
from lakelog.storage.storage_root import StorageRoot
from lakelog.writer.records import normalize_records
from bench.s3_proxy import commit_put, delta_log_access

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "api"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "kafka"))

from front_process import Front, free_port  # noqa: E402
from wire_client import WireClient  # noqa: E402

PRODUCE = 0


def batch(value: bytes) -> list[PartitionBatch]:
    return [PartitionBatch(0, normalize_records([{"value": value}]))]


def assert_storage_error(error, *leaks: str) -> None:
    """Kafka's retriable KAFKA_STORAGE_ERROR (56), naming the topic but none of ``leaks`` and no path."""
    assert isinstance(error, KafkaStorageError) and error.code == 56 and error.retriable, error
    for leak in (*leaks, "_delta_log", ".tmp", ".json", "http://", "s3://", "Traceback"):
        assert leak not in error.message, error.message
    assert " t" in error.message and "the storage failed" in error.message, error.message


def break_delta_log(topic_dir: Path) -> Path:
    """Put a plain file where the topic's ``_delta_log`` directory is (kept aside; see :func:`mend_delta_log`)."""
    log_dir = topic_dir / "_delta_log"
    log_dir.rename(topic_dir / "_delta_log.aside")
    log_dir.write_bytes(b"")
    return log_dir


def mend_delta_log(log_dir: Path) -> None:
    log_dir.unlink()
    (log_dir.parent / "_delta_log.aside").rename(log_dir)


def test_a_local_commit_that_cannot_be_written_names_no_path(tmp_path, caplog):
    root = tmp_path / "root"
    log = Log(str(root))
    log.create_topic("t", 1)
    assert log.append_batches("t", batch(b"a"))[0].base_offset == 0  # the writer is open, its snapshot current
    log_dir = break_delta_log(root / "topics" / "t")
    with caplog.at_level("WARNING", logger="lakelog.writer"):
        error = log.append_batches("t", batch(b"b"))[0]
    assert_storage_error(error, str(tmp_path), "topics/")
    assert "Not a directory" in error.message  # the failure's kind
    assert str(root) in caplog.text  # the detail, for the operator
    mend_delta_log(log_dir)
    retry = log.append_batches("t", batch(b"b"))[0]
    assert not isinstance(retry, KafkaError) and retry.base_offset == 1, retry


@pytest.fixture
def s3_root(proxy):
    prefix = uuid.uuid4().hex
    opts = dict(s3_options(proxy.url), timeout="2s", connect_timeout="2s", max_retries="0")
    return StorageRoot.resolve(f"s3://{BUCKET}/{prefix}", opts), prefix


def test_a_refresh_that_fails_on_s3_names_no_key_or_url(proxy, s3_root):
    """A commit PUT whose response is lost, and the reads of the log that would tell whether it landed fail: the
    append's error, and the next one's (its writer must read the log again first), name no key or URL."""
    root, prefix = s3_root
    log = Log(root)
    log.create_topic("t", 1)
    assert log.append_batches("t", batch(b"a"))[0].base_offset == 0
    lost = proxy.lose_response(commit_put)
    blind = proxy.fail(lambda m, t: bool(lost.hits) and delta_log_access(m, t) and "/topics/t/" in t and m != "PUT",
                       times=1_000_000, status=503)
    after_commit = log.append_batches("t", batch(b"b"))[0]  # refreshing after the lost response fails
    assert lost.hits and blind.hits
    assert_storage_error(after_commit, prefix, BUCKET, proxy.url)
    assert "after a commit" in after_commit.message
    before_append = log.append_batches("t", batch(b"c"))[0]  # the writer is stale: refreshing first fails
    assert_storage_error(before_append, prefix, BUCKET, proxy.url)
    assert "after a commit" not in before_append.message
    proxy.clear()
    retry = log.append_batches("t", batch(b"c"))[0]
    assert not isinstance(retry, KafkaError) and retry.base_offset == 2, retry  # b landed: its response was lost


def test_an_accumulated_append_whose_writer_cannot_open_names_no_key_or_url(proxy, s3_root):
    """The group commit's first append to a topic opens its writer, which reads the table: that failing, every
    append of the group gets the error, naming no key, bucket or URL."""
    root, prefix = s3_root
    Log(root).create_topic("t", 1)
    acc = Log(root).accumulator(linger_ms=1)  # a new process's log: no writer open yet
    try:
        proxy.fail(lambda m, t: True, times=1_000_000, status=503)
        futures = [acc.append("t", batch(b"x")) for _ in range(3)]
        errors = [f.result(60)[0] for f in futures]
        for error in errors:
            assert_storage_error(error, prefix, BUCKET, proxy.url)
        proxy.clear()
        result = acc.append("t", batch(b"y")).result(60)[0]
        assert not isinstance(result, KafkaError) and result.base_offset == 0, result
    finally:
        proxy.clear()
        acc.close()


@pytest.fixture
def local_front(tmp_path):
    kafka = f"127.0.0.1:{free_port()}"
    front = Front(str(tmp_path / "root"), tmp_path / "logs", args=("--kafka-listener", kafka)).start()
    front.bootstrap = kafka
    yield front
    front.kill()


def test_a_front_whose_commit_cannot_be_written_answers_a_storage_error_naming_no_path(local_front, tmp_path):
    """Through a real ``lakelog serve``: an HTTP produce and a Kafka Produce whose commit fails get
    KAFKA_STORAGE_ERROR, and their messages name no file of the root."""
    from kafka_front.record_batch import encode_batch

    front = local_front
    with front.client(timeout=120) as http:
        assert http.post("/v1/topics", json={"name": "t", "partitions": 1}).status_code == 201
        ok = http.post("/v1/topics/t/records", json={"records": [{"value": "a"}]})
        assert ok.status_code == 200, ok.text  # the topic's writer is open
        log_dir = break_delta_log(tmp_path / "root" / "topics" / "t")
        try:
            r = http.post("/v1/topics/t/records", json={"records": [{"value": "b"}]})
            body = r.json()
            assert r.status_code == 503 and body["error_code"] == 56, r.text
            records = encode_batch(base_offset=0, offset_deltas=[0], timestamps=[0], keys=[None], values=[b"c"],
                                   producer_id=-1, producer_epoch=-1, base_sequence=-1)
            with WireClient(front.bootstrap, timeout=120) as wire:
                produced = wire.request(PRODUCE, 9, {"acks": -1, "timeout": 30000, "topic_data": [
                    {"name": "t", "partition_data": [{"index": 0, "records": records}]}]})
            partition = produced.responses[0].partition_responses[0]
            assert partition.error_code == 56, partition
            for message in (body["message"], partition.error_message):
                for leak in (str(tmp_path), "/root/", "_delta_log", ".tmp", "Traceback"):
                    assert leak not in message, message
                assert message and "the storage failed" in message, message
        finally:
            mend_delta_log(log_dir)
        r = http.post("/v1/topics/t/records", json={"records": [{"value": "d"}]})
        assert r.status_code == 200, r.text
        assert str(tmp_path / "root") in front.log_tail(20_000)  # the detail went to the server's log
        values = [x["value"] for x in
                  http.get("/v1/topics/t/partitions/0/records", params={"offset": 0}).json()["records"]]
        assert values == ["a", "d"], values  # the failed produces left nothing behind
