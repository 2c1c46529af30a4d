"""Storage faults mid-commit: an S3 endpoint that fails, loses responses or stalls.

The topic lives on the real moto S3 server, reached through
:class:`bench.s3_proxy.S3FaultProxy` on loopback, which injects faults into the
PUT of the Delta commit file ``_delta_log/<version>.json`` (and, where a test
says so, into the reads that follow).  Clients use a short timeout and no
object-store retries so each fault surfaces at once.  Expected in every case:
a retriable error or a correct acknowledgement, nothing partially visible, and
a retry that does not duplicate.
"""

from __future__ import annotations

import re
import threading
import time
import uuid

import pytest

from s3_server import BUCKET, s3_options
from lakelog import Log, PartitionBatch
from lakelog.errors import KafkaError, ProducerFenced, RequestTimedOut
from lakelog.storage.orphan_files import find_orphan_files
from lakelog.storage.producer_ids import ProducerRegistry
from lakelog.storage.storage_root import StorageRoot
from lakelog.writer.records import normalize_records
from proc_support import Ack, check_log, value_of, wait_for
from bench.s3_proxy import COMMIT_FILE, S3FaultProxy, commit_put, delta_log_access


@pytest.fixture(params=["plain", "pipelined"])
def append(request):
    """An append of one group commit, waiting for its results: ``Log.append_batches``, or
    ``Log.append_pipelined`` (the accumulator's path on object stores: planned on the commits before it,
    uploaded, then its PUT once those have landed)."""
    if request.param == "plain":
        return lambda log, topic, batches: log.append_batches(topic, batches)
    return lambda log, topic, batches: log.append_pipelined(topic, batches)[0].result(timeout=60)


def faulty_root(proxy: S3FaultProxy, max_retries: int = 0) -> StorageRoot:
    """A fresh S3 root reached through the proxy, with short timeouts."""
    opts = dict(s3_options(proxy.url), timeout="2s", connect_timeout="2s", max_retries=str(max_retries))
    return StorageRoot.resolve(f"s3://{BUCKET}/{uuid.uuid4().hex}", opts)


def seeded(root: StorageRoot) -> tuple[Log, list[Ack]]:
    """A topic ``t`` (2 partitions) with 2 committed records in partition 0, and a writer whose committer is open."""
    log = Log(root)
    log.create_topic("t", 2)
    values = (value_of(0, 0, 0, 0), value_of(0, 0, 0, 1))
    res = log.append("t", [{"value": v} for v in values], partition=0)
    return log, [Ack(0, res[0].base_offset, values)]


def batch(i: int, producer=None, seq: int = -1) -> list[PartitionBatch]:
    recs = normalize_records([{"value": value_of(1, i, 0, j)} for j in range(3)])
    if producer is None:
        return [PartitionBatch(0, recs)]
    return [PartitionBatch(0, recs, producer.producer_id, producer.producer_epoch, seq)]


def ack_of(result, i: int) -> Ack:
    return Ack(0, result.base_offset, tuple(value_of(1, i, 0, j) for j in range(3)))


def high_watermark(root: StorageRoot) -> int:
    return Log(root).describe_topic("t").partitions[0].high_watermark


@pytest.mark.parametrize("fault", ["500", "503", "connection closed"])
def test_failed_commit_put_is_retriable_invisible_and_retried_without_duplicates(append, proxy, fault):
    root = faulty_root(proxy)
    log, acks = seeded(root)
    if fault == "connection closed":
        armed = proxy.drop(commit_put)
    else:
        armed = proxy.fail(commit_put, status=int(fault))
    err = append(log, "t", batch(1))[0]
    assert armed.hits and armed.done.is_set()
    assert isinstance(err, KafkaError) and err.retriable, err
    assert "t" in err.message
    assert high_watermark(root) == 2
    check_log(root, "t", acks)
    orphans = find_orphan_files(root, "t")  # the failed attempt's segment: on storage, never read
    assert len(orphans) == 1

    retry = append(log, "t", batch(1))[0]
    assert not isinstance(retry, KafkaError) and retry.base_offset == 2
    records = check_log(root, "t", acks + [ack_of(retry, 1)])
    assert len(records[0]) == 5  # the batch once, not twice


@pytest.mark.parametrize("max_retries", [0, 2], ids=["no-store-retry", "store-retries"])
def test_commit_whose_response_was_lost_is_recognised_by_its_commit_id(append, proxy, max_retries):
    """The PUT reaches the store, the response never comes back: the writer must find its own commit.

    Without object-store retries the client sees a broken connection; with them its retried PUT
    finds the file already there (412), which delta-rs reports as a conflict.  Either way the
    ``lakelog.commitId`` in the log tells the writer that the commit is its own.
    """
    root = faulty_root(proxy, max_retries)
    log, acks = seeded(root)
    producer = log.init_producer()
    lost = proxy.lose_response(commit_put)
    res = append(log, "t", batch(1, producer, 0))[0]
    assert lost.upstream_statuses == [200]  # the store did apply the lost PUT
    puts = [t for m, t, _ in proxy.log if commit_put(m, t) and t.endswith(f"/topics/t/_delta_log/{2:020d}.json")]
    assert len(puts) == (2 if max_retries else 1)  # with store retries, the second PUT found the file (412)
    assert not isinstance(res, KafkaError), res
    assert (res.base_offset, res.record_count, res.duplicate) == (2, 3, False)
    acks.append(ack_of(res, 1))
    # a retry of the same idempotent batch is answered from producer state, not written again
    again = append(log, "t", batch(1, producer, 0))[0]
    assert again.duplicate and again.base_offset == 2
    nxt = append(log, "t", batch(2, producer, 3))[0]
    assert not nxt.duplicate and nxt.base_offset == 5
    records = check_log(root, "t", acks + [ack_of(nxt, 2)])
    assert len(records[0]) == 8
    assert find_orphan_files(root, "t") == []


def test_lost_response_then_failed_refresh_keeps_the_landed_commit_intact(append, proxy):
    """Commit landed, response lost, and the refresh that would confirm it fails too.

    The writer cannot know the outcome: it must answer with a retriable error and must not
    delete the files of a commit that may be (and here is) live.
    """
    root = faulty_root(proxy)
    log, acks = seeded(root)
    producer = log.init_producer()
    lost = proxy.lose_response(commit_put)
    # the topic's log only: the producers table is read in the background meanwhile
    blind = proxy.fail(lambda m, t: bool(lost.hits) and delta_log_access(m, t) and "/topics/t/" in t and m != "PUT",
                       status=503)
    err = append(log, "t", batch(1, producer, 0))[0]
    assert lost.upstream_statuses == [200] and blind.hits
    assert isinstance(err, KafkaError) and err.retriable, err
    # the commit is live and whole: every file it references is readable
    assert high_watermark(root) == 5
    check_log(root, "t", acks + [Ack(0, 2, tuple(value_of(1, 1, 0, j) for j in range(3)))])
    # the producer retries: deduplicated, answered with the original offsets
    retry = append(log, "t", batch(1, producer, 0))[0]
    assert retry.duplicate and (retry.base_offset, retry.record_count) == (2, 3)
    records = check_log(root, "t", acks + [ack_of(retry, 1)])
    assert len(records[0]) == 5


def test_stalled_commit_times_out_retriably_with_nothing_visible(append, proxy):
    root = faulty_root(proxy)
    log, acks = seeded(root)
    stall = proxy.stall(commit_put, 60.0, then="drop")  # the store never sees it
    err = append(log, "t", batch(1))[0]
    assert isinstance(err, RequestTimedOut) and err.retriable and err.code == 7, err
    assert high_watermark(root) == 2
    check_log(root, "t", acks)
    stall.release.set()
    assert stall.done.wait(30)
    assert high_watermark(root) == 2
    retry = append(log, "t", batch(1))[0]
    assert not isinstance(retry, KafkaError) and retry.base_offset == 2
    assert len(check_log(root, "t", acks + [ack_of(retry, 1)])[0]) == 5


def test_stalled_commit_that_lands_after_the_timeout_is_deduplicated(append, proxy):
    """The timed-out PUT reaches the store later and lands: it must land whole, and the retry must not duplicate."""
    root = faulty_root(proxy)
    log, acks = seeded(root)
    producer = log.init_producer()
    stall = proxy.stall(commit_put, 60.0, then="forward")
    err = append(log, "t", batch(1, producer, 0))[0]
    assert isinstance(err, RequestTimedOut) and err.retriable, err
    assert high_watermark(root) == 2
    stall.release.set()  # now the store receives the PUT the writer gave up on
    assert stall.done.wait(30) and stall.upstream_statuses == [200]  # it landed after all
    assert high_watermark(root) == 5
    check_log(root, "t", acks + [Ack(0, 2, tuple(value_of(1, 1, 0, j) for j in range(3)))])
    retry = append(log, "t", batch(1, producer, 0))[0]
    assert retry.duplicate and (retry.base_offset, retry.record_count) == (2, 3)
    assert len(check_log(root, "t", acks + [ack_of(retry, 1)])[0]) == 5


def test_retry_that_overtakes_a_stalled_commit_wins_and_the_late_put_is_refused(append, proxy):
    root = faulty_root(proxy)
    log, acks = seeded(root)
    producer = log.init_producer()
    stall = proxy.stall(commit_put, 60.0, then="forward")
    err = append(log, "t", batch(1, producer, 0))[0]
    assert isinstance(err, RequestTimedOut), err
    retry = append(log, "t", batch(1, producer, 0))[0]  # before the stalled PUT reaches the store
    assert not isinstance(retry, KafkaError) and not retry.duplicate and retry.base_offset == 2
    stall.release.set()
    assert stall.done.wait(30) and stall.upstream_statuses == [412]  # put-if-absent refused the late one
    assert high_watermark(root) == 5
    assert len(check_log(root, "t", acks + [ack_of(retry, 1)])[0]) == 5
    assert len(find_orphan_files(root, "t")) == 1  # the late commit's segment, never referenced


SEGMENT = re.compile(r"/topics/t/partition=\d+/[^/]+\.parquet$")


def segment_put(method: str, path: str) -> bool:
    return method == "PUT" and bool(SEGMENT.search(path.split("?")[0]))


def test_each_segment_is_one_put_and_a_commit_uploads_its_partitions_at_once(append, proxy):
    """A segment on S3 is a single PUT (no multipart upload, no HEAD for its size), and a commit that spans
    partitions uploads them side by side: both uploads are in flight before either answers."""
    root = faulty_root(proxy)
    log, _ = seeded(root)
    proxy.log.clear()
    stalls = [proxy.stall(lambda m, t, p=p: segment_put(m, t) and f"/partition={p}/" in t, 60.0, then="forward")
              for p in (0, 1)]
    done: list = []
    batches = [PartitionBatch(p, normalize_records([{"value": value_of(1, p, 0, 0)}])) for p in (0, 1)]
    writer = threading.Thread(target=lambda: done.append(append(log, "t", batches)))
    writer.start()
    try:
        deadline = time.monotonic() + 20
        while not all(s.hits for s in stalls) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert all(s.hits for s in stalls), "the second partition's upload waited for the first"
    finally:
        for s in stalls:
            s.release.set()
        writer.join(30)
    assert [r.partition for r in done[0]] == [0, 1] and not any(isinstance(r, KafkaError) for r in done[0])
    methods = [(m, t) for m, t, _ in proxy.log if "/partition=" in t]
    assert sorted(m for m, _ in methods) == ["PUT", "PUT"], methods  # no POST (multipart), no HEAD


@pytest.mark.parametrize("fault", ["503", "connection closed"])
def test_failed_segment_upload_is_a_storage_error_without_paths_and_nothing_is_committed(append, proxy, fault):
    root = faulty_root(proxy)
    log, acks = seeded(root)
    failing = (proxy.drop(lambda m, t: segment_put(m, t) and "/partition=1/" in t) if fault == "connection closed"
               else proxy.fail(lambda m, t: segment_put(m, t) and "/partition=1/" in t, status=503))
    batches = [PartitionBatch(p, normalize_records([{"value": value_of(1, p, 0, 0)}])) for p in (0, 1)]
    results = append(log, "t", batches)
    assert failing.hits
    for r in results:  # all or nothing: partition 0's upload succeeded, but its records are not committed
        assert isinstance(r, KafkaError) and r.retriable and r.name == "KAFKA_STORAGE_ERROR", r
        assert "s3://" not in r.message and BUCKET not in r.message and ".parquet" not in r.message, r.message
    assert high_watermark(root) == 2
    check_log(root, "t", acks)
    assert find_orphan_files(root, "t") == []  # partition 0's uploaded segment was removed again
    retry = append(log, "t", batches)
    assert [r.base_offset for r in retry] == [2, 0]


def test_pipelined_groups_upload_while_the_commits_before_them_are_in_flight(proxy):
    """Later groups' offsets are planned on top of the commits still in flight and their segments upload at
    once; their PUTs wait for the commits before them, so commits land in order with consecutive offsets."""
    root = faulty_root(proxy, max_retries=0)
    root = StorageRoot.resolve(root.uri, {**dict(root.options), "timeout": "20s"})
    log, acks = seeded(root)
    producer = log.init_producer()
    stall = proxy.stall(commit_put, 60.0, then="forward")
    first = log.append_pipelined("t", batch(1, producer, 0))[0]
    wait_for(lambda: stall.hits, "the first commit's PUT")
    proxy.log.clear()
    later = [log.append_pipelined("t", batch(i, producer, 3 * (i - 1)))[0] for i in (2, 3)]
    wait_for(lambda: sum(segment_put(m, t) for m, t, _ in proxy.log) == 2, "the later groups' segment uploads")
    assert not any(commit_put(m, t) for m, t, _ in proxy.log)  # their PUTs wait for the held commit
    assert not first.done() and not any(f.done() for f in later)
    before = log.snapshot("t").version
    stall.release.set()
    results = [f.result(timeout=30)[0] for f in (first, *later)]
    assert [r.base_offset for r in results] == [2, 5, 8] and not any(r.duplicate for r in results)
    assert log.snapshot("t").version == before + 2  # the two groups uploaded meanwhile went out in one commit
    check_log(root, "t", acks + [ack_of(r, i) for i, r in enumerate(results, 1)])
    assert find_orphan_files(root, "t") == []


def test_a_stalled_read_of_the_producers_table_holds_up_no_append(append, proxy):
    """Writers re-read the producers table (epochs bumped by other processes) at most once a second, in the
    background: while that read is stalled, checks answer from the table as last read and an idempotent
    append commits; once a read lands, the producer another process fenced is refused."""
    root = faulty_root(proxy)
    log, acks = seeded(root)
    producer, tx = log.init_producer(), log.init_producer("tx")
    ProducerRegistry(root).init_producer("tx")  # another process bumps the epoch: ``tx`` is fenced
    # a read of the table starts with a LIST of its log (checks may GET commits they have not read)
    stall = proxy.stall(lambda method, path: "list-type=2" in path and "/_lakelog/producers/" in path, 120.0,
                        then="forward")
    first = append(log, "t", batch(1, producer, 0))[0]  # the writer's first idempotent batch: due to read
    assert not isinstance(first, KafkaError), first
    wait_for(lambda: stall.hits, "the writer's read of the producers table")
    second = append(log, "t", batch(2, producer, 3))[0]
    assert not isinstance(second, KafkaError), second
    assert not stall.done.is_set()  # neither append waited for that read
    assert log.registry.check(tx.producer_id, tx.producer_epoch) is True  # not yet seen: answered as last read
    stall.release.set()
    wait_for(lambda: fenced_once_read(log.registry, tx), "the fence, once a read of the producers table lands")
    check_log(root, "t", acks + [ack_of(first, 1), ack_of(second, 2)])


def fenced_once_read(registry: ProducerRegistry, producer) -> bool:
    """Whether ``producer`` is refused as fenced, after asking for a background read of the producers table."""
    registry.refresh_soon(0)
    try:
        registry.check(producer.producer_id, producer.producer_epoch)
    except ProducerFenced:
        return True
    return False


def test_checks_read_the_producers_table_once_per_version(proxy):
    """delta-rs's ``transaction_version`` reads every commit since the checkpoint on each call: checks of
    producer ids read the table's app ids once per version instead, and a background read does it for them."""
    root = faulty_root(proxy)
    other = ProducerRegistry(root)
    ids = [other.init_producer(f"tx{i}") for i in range(8)]
    registry = ProducerRegistry(root)
    assert registry.check(ids[0].producer_id, ids[0].producer_epoch) is True  # opens the table, reads its app ids
    proxy.log.clear()
    assert all(registry.check(i.producer_id, i.producer_epoch) for i in ids[1:])
    assert proxy.log == []  # the other ids at the same version: no request
    other.init_producer("tx0")  # a new version, which fences ids[0]
    wait_for(lambda: fenced_once_read(registry, ids[0]), "the fence, once a read of the producers table lands")
    proxy.log.clear()
    assert all(registry.check(i.producer_id, i.producer_epoch) for i in ids[1:])
    assert proxy.log == []  # read in the background with the new version


@pytest.mark.parametrize("then", ["drop", "fail"])
def test_groups_planned_on_a_commit_that_fails_are_appended_again_from_scratch(proxy, then):
    """The commit in flight fails (its connection drops, or the store answers 500: an unknown outcome, and the
    commit is not in the log): the groups planned on top of it must not land on their offsets. They are
    appended again, in order, on what did land; the failed group gets a retriable error and its retry is no
    duplicate."""
    root = faulty_root(proxy, max_retries=0)
    root = StorageRoot.resolve(root.uri, {**dict(root.options), "timeout": "20s"})
    log, acks = seeded(root)
    stall = proxy.stall(commit_put, 60.0, then=then)
    first = log.append_pipelined("t", batch(1))[0]
    wait_for(lambda: stall.hits, "the first commit's PUT")
    proxy.log.clear()
    later = [log.append_pipelined("t", batch(i))[0] for i in (2, 3)]
    wait_for(lambda: sum(segment_put(m, t) for m, t, _ in proxy.log) == 2, "the later groups' segment uploads")
    stall.release.set()
    r1 = first.result(timeout=60)[0]
    r2, r3 = (f.result(timeout=60)[0] for f in later)
    assert isinstance(r1, KafkaError) and r1.retriable, r1
    # on what landed, not on the failed group
    assert not isinstance(r2, KafkaError) and not isinstance(r3, KafkaError), (r2, r3)
    assert (r2.base_offset, r3.base_offset) == (2, 5)
    assert high_watermark(root) == 8
    check_log(root, "t", acks + [ack_of(r2, 2), ack_of(r3, 3)])
    retry = log.append_pipelined("t", batch(1))[0].result(timeout=60)[0]
    assert retry.base_offset == 8 and not retry.duplicate
    assert len(check_log(root, "t", acks + [ack_of(r2, 2), ack_of(r3, 3), ack_of(retry, 1)])[0]) == 11
    # the failed commit's segment stays (its PUT might still land); the replayed groups' first ones are gone
    assert len(find_orphan_files(root, "t")) == 1


@pytest.mark.parametrize("other_partition", [1, 0], ids=["other-partition", "same-partition"])
def test_pipelined_commit_that_loses_its_version_to_another_writer(proxy, other_partition):
    """Another writer (another front) commits while our commit PUT is held, so ours is refused (412). When that
    commit touched other partitions, ours goes again unchanged at the next version -- the same segment files
    and offsets, nothing uploaded twice (Delta's conflict rule). When it appended to our partition, our offsets
    are taken: our groups are appended again from scratch after its records. Either way every append is in the
    log once, in order, and no file is left unreferenced."""
    root = faulty_root(proxy, max_retries=0)
    root = StorageRoot.resolve(root.uri, {**dict(root.options), "timeout": "20s"})
    log, acks = seeded(root)
    stall = proxy.stall(commit_put, 60.0, then="forward")
    first = log.append_pipelined("t", batch(1))[0]
    wait_for(lambda: stall.hits, "the first commit's PUT")
    proxy.log.clear()
    later = log.append_pipelined("t", batch(2))[0]
    wait_for(lambda: sum(segment_put(m, t) for m, t, _ in proxy.log) == 1, "the later group's segment upload")
    values = tuple(value_of(2, 0, 0, j) for j in range(3))
    other = Log(root).append("t", [{"value": v} for v in values], partition=other_partition)[0]
    assert other.base_offset == (0 if other_partition == 1 else 2)
    stall.release.set()
    r1, r2 = first.result(timeout=60)[0], later.result(timeout=60)[0]
    assert stall.done.wait(30) and stall.upstream_statuses == [412]
    assert not isinstance(r1, KafkaError) and not isinstance(r2, KafkaError), (r1, r2)
    shift = 3 if other_partition == 0 else 0
    assert (r1.base_offset, r2.base_offset) == (2 + shift, 5 + shift)
    check_log(root, "t", acks + [Ack(other_partition, other.base_offset, values), ack_of(r1, 1), ack_of(r2, 2)])
    ours = [t for m, t, _ in proxy.log if segment_put(m, t) and "/partition=0/" in t]
    deleted = [t for m, t, _ in proxy.log if m == "DELETE" and SEGMENT.search(t.split("?")[0])]
    if other_partition == 1:
        assert len(ours) == 1 and deleted == []  # the later group's upload; the first group's segment reused
    else:
        # the other writer's segment, and both groups uploaded again, their first segments removed
        assert len(ours) == 4 and len(deleted) == 2
    assert find_orphan_files(root, "t") == []


def snapshot_after_three_appends(proxy: S3FaultProxy, writer: Log, reader: Log):
    """``reader``'s snapshot of ``t`` after ``writer`` appended 3 commits to ``seeded``'s topic, with the
    proxy's log holding only what that snapshot read."""
    before = reader.snapshot("t").version
    for i in range(3):
        writer.append_batches("t", batch(i))
    proxy.log.clear()
    after = reader.snapshot("t")
    assert after.version == before + 3 and after.high_watermark(0) == 11
    return after


def test_reading_new_commits_on_s3_is_one_get_per_commit(proxy):
    """A reader catching up replays each new commit with one GET (pyarrow's S3 reads are a HEAD and a GET),
    in windows of 1, 2, 4, ... commits read at once."""
    root = faulty_root(proxy)
    log, _ = seeded(root)
    reader = Log(root)
    snapshot_after_three_appends(proxy, log, reader)
    commit_reads = [(m, t) for m, t, _ in proxy.log if COMMIT_FILE.search(t)]
    # windows of 1, 2 and 4: the 3 new commits, and 4 probes past the end read at once with the third
    assert [m for m, _ in commit_reads].count("GET") == 7
    assert [m for m, _ in commit_reads].count("HEAD") <= 1  # only the "anything new?" probe


def test_a_writers_own_commits_are_not_read_back_by_its_snapshots(proxy):
    """``Log.snapshot`` (the front's metadata cache, its readers) starts from the process's writer's state:
    the writer's own commits cost no GET; another writer's commit after them is read as usual."""
    root = faulty_root(proxy)
    log, _ = seeded(root)
    after = snapshot_after_three_appends(proxy, log, log)
    version = after.version
    assert not [t for m, t, _ in proxy.log if m == "GET" and COMMIT_FILE.search(t)]
    other = Log(root).append_batches("t", [PartitionBatch(1, normalize_records([{"value": b"o"}]))])[0]
    proxy.log.clear()
    latest = log.snapshot("t")
    assert latest.version == after.version + 1 and latest.high_watermark(1) == other.base_offset + 1 == 1
    assert [t for m, t, _ in proxy.log if m == "GET" and COMMIT_FILE.search(t)]  # read: not this writer's
    assert after.version == version  # the shared snapshot handed out before is not changed


def test_a_sequential_consumer_on_s3_reads_each_segment_once_ahead_and_in_order(proxy):
    """The fetcher reads ahead by segment (whole-object GETs in parallel): every record once, in order, one
    GET per segment; a seek back re-reads from the store."""
    from lakelog.reader.fetcher import Fetcher
    from lakelog.group.assignors import TopicPartition

    root = faulty_root(proxy)
    log = Log(root)
    log.create_topic("t", 1)
    for i in range(12):
        log.append_batches("t", batch(i))
    tp = TopicPartition("t", 0)
    fetcher = Fetcher(Log(root), max_partition_fetch_bytes=1)  # one segment per fetch
    proxy.log.clear()
    offsets, position = [], 0
    while position < 36:
        table, position = fetcher.take(tp, position, 10**6)
        offsets += table.column("offset").to_pylist()
    assert offsets == list(range(36))
    segment_gets = [t for m, t, _ in proxy.log if m == "GET" and SEGMENT.search(t.split("?")[0])]
    assert len(segment_gets) == len(set(segment_gets)) == 12, segment_gets
    assert not [t for m, t, _ in proxy.log if m == "HEAD" and ".parquet" in t]

    table, _ = fetcher.take(tp, 6, 10**6)  # a seek back
    assert table.column("offset").to_pylist()[:3] == [6, 7, 8]


@pytest.mark.parametrize("then", ["forward", "drop"], ids=["lands", "upload-fails"])
def test_accumulator_uploads_a_group_of_other_partitions_while_one_partition_uploads(proxy, then):
    """Through the accumulator on S3, a partition has one group uploading at a time: while partition 0's segment
    PUT is held, a group for partition 1 uploads at once, and the appends for partition 0 that come meanwhile
    wait and go out together, in one segment, once it is done. Commits stay in order: partition 1's waits for
    partition 0's. If the held upload fails, its append gets a retriable error and the groups behind it land,
    re-planned on what did; every acknowledged batch is in the log once, in order."""
    root = faulty_root(proxy, max_retries=0)
    root = StorageRoot.resolve(root.uri, {**dict(root.options), "timeout": "20s"})
    log, acks = seeded(root)
    acc = log.accumulator(linger_ms=1)
    try:
        proxy.log.clear()
        stall = proxy.stall(lambda m, t: segment_put(m, t) and "/partition=0/" in t, 60.0, then=then)
        first = acc.append("t", batch(1))
        wait_for(lambda: stall.hits, "partition 0's segment upload")
        ones = tuple(value_of(1, 9, 0, j) for j in range(3))
        other = acc.append("t", [PartitionBatch(1, normalize_records([{"value": v} for v in ones]))])
        wait_for(lambda: any(segment_put(m, t) and "/partition=1/" in t for m, t, _ in proxy.log),
                 "partition 1's segment upload, while partition 0's is held")
        behind = [acc.append("t", batch(i)) for i in (2, 3)]
        time.sleep(0.3)  # time enough for partition 0's next group to upload, were it not waiting
        assert sum(segment_put(m, t) and "/partition=0/" in t for m, t, _ in proxy.log) == 1
        assert not any(commit_put(m, t) for m, t, _ in proxy.log)  # partition 1's commit waits for partition 0's
        assert not first.done() and not other.done() and not any(f.done() for f in behind)
        stall.release.set()
        r1, r_other = first.result(60)[0], other.result(60)[0]
        r2, r3 = (f.result(60)[0] for f in behind)
    finally:
        acc.close()
    puts = sum(segment_put(m, t) and "/partition=0/" in t for m, t, _ in proxy.log)
    assert not isinstance(r_other, KafkaError) and r_other.base_offset == 0, r_other
    landed = [Ack(1, 0, ones)]
    if then == "forward":
        assert puts == 2  # the two that waited went out as one segment
        assert [r.base_offset for r in (r1, r2, r3)] == [2, 5, 8], (r1, r2, r3)
        landed.append(ack_of(r1, 1))
    else:
        # as one segment, written again if it was planned on the failed group before that failure was concluded
        assert puts in (2, 3), puts
        assert isinstance(r1, KafkaError) and r1.retriable, r1
        assert [r.base_offset for r in (r2, r3)] == [2, 5], (r2, r3)
    records = check_log(root, "t", acks + landed + [ack_of(r2, 2), ack_of(r3, 3)])
    assert len(records[0]) == (11 if then == "forward" else 8) and len(records[1]) == 3
