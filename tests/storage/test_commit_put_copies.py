"""A root's ``commit_put_copies`` (2 or 3): every conditional PUT (a Delta commit, a lease) sent that many times at
once.

Against the real moto server through :class:`bench.s3_proxy.S3FaultProxy`, which counts the copies and fails,
stalls or loses one of them. Expected: the first copy that creates the key answers the call; only when neither
did is there an error (an unknown outcome before a conflict); and a log written so acknowledges every record
once, in order, with a commit file that only one copy created.
"""

from __future__ import annotations

import threading
import uuid

import pytest

from s3_server import BUCKET, s3_options
from lakelog import Log, PartitionBatch
from lakelog.errors import KafkaError
from lakelog.storage.orphan_files import find_orphan_files
from lakelog.storage.s3_objects import commit_put_copies, create_object, get_object
from lakelog.storage.storage_root import StorageRoot
from lakelog.writer.records import normalize_records
from proc_support import Ack, check_log, value_of, wait_for
from bench.s3_proxy import S3FaultProxy, commit_put


@pytest.fixture
def proxy(s3_endpoint):
    p = S3FaultProxy(s3_endpoint).start()
    yield p
    p.stop()


def copies_root(proxy: S3FaultProxy, copies: str = "2") -> StorageRoot:
    """A fresh root through the proxy: two copies of each conditional PUT, no store retries, short timeouts."""
    opts = dict(s3_options(proxy.url), commit_put_copies=copies, max_retries="0", timeout="5s")
    return StorageRoot.resolve(f"s3://{BUCKET}/{uuid.uuid4().hex}", opts)


def key_put(key: str):
    return lambda method, path: method == "PUT" and path.split("?")[0].endswith(key)


def puts_of(proxy: S3FaultProxy, key: str, settled: int = 0) -> int:
    """The PUTs of ``key`` the proxy has received, once it has ``settled`` of them: a call returns on the first
    copy's answer, and the other copy may reach the proxy later."""
    wait_for(lambda: sum(1 for m, p, _ in proxy.log if key_put(key)(m, p)) >= settled, f"{settled} PUTs of {key}")
    return sum(1 for m, p, _ in proxy.log if key_put(key)(m, p))


@pytest.mark.parametrize("value, copies", [(None, 1), ("1", 1), ("2", 2), ("3", 3)])
def test_the_option_says_how_many_copies(value, copies) -> None:
    options = {} if value is None else {"commit_put_copies": value}
    assert commit_put_copies(StorageRoot.resolve(f"s3://{BUCKET}/x", options)) == copies


@pytest.mark.parametrize("value", ["0", "4", "two", ""])
def test_any_other_number_of_copies_is_refused_when_the_root_is_resolved(value) -> None:
    with pytest.raises(ValueError, match="commit_put_copies must be 1, 2 or 3"):
        StorageRoot.resolve(f"s3://{BUCKET}/x", {"commit_put_copies": value})


def test_both_copies_go_out_and_the_key_is_created_once(proxy) -> None:
    root = copies_root(proxy)
    path = root.path_for("a", "key")
    create_object(root, path, b"first")
    assert puts_of(proxy, "/a/key", 2) == 2 and get_object(root, path) == b"first"
    with pytest.raises(FileExistsError):  # both copies refused: the key was there
        create_object(root, path, b"second")
    assert puts_of(proxy, "/a/key", 4) == 4 and get_object(root, path) == b"first"


def test_one_copy_sends_one_put(proxy) -> None:
    root = copies_root(proxy, "1")
    create_object(root, root.path_for("one"), b"x")
    assert puts_of(proxy, "/one") == 1


def test_the_first_copy_to_create_the_key_answers_while_the_other_is_held(proxy) -> None:
    root = copies_root(proxy)
    path = root.path_for("held")
    held = proxy.stall(key_put("/held"), 60.0, then="forward")  # the first copy to arrive waits
    create_object(root, path, b"data")  # returns on the other copy's answer
    assert len(held.hits) == 1 and not held.done.is_set()
    held.release.set()
    assert held.done.wait(30)
    assert held.upstream_statuses == [412]  # the held copy found the key its twin had created
    assert get_object(root, path) == b"data"


def test_three_copies_answer_on_the_first_while_two_are_held(proxy) -> None:
    root = copies_root(proxy, "3")
    path = root.path_for("three")
    held = proxy.stall(key_put("/three"), 60.0, times=2, then="forward")  # the first two copies to arrive wait
    create_object(root, path, b"data")  # returns on the third copy's answer
    assert len(held.hits) == 2 and not held.done.is_set() and puts_of(proxy, "/three", 3) == 3
    held.release.set()
    assert held.done.wait(30)
    wait_for(lambda: len(held.upstream_statuses) == 2, "both held copies' answers")
    assert held.upstream_statuses == [412, 412]  # the held copies found the key their twin had created
    assert get_object(root, path) == b"data"
    with pytest.raises(FileExistsError):  # all three refused: the key was there
        create_object(root, path, b"again")
    assert puts_of(proxy, "/three", 6) == 6 and get_object(root, path) == b"data"


def test_a_copy_that_fails_does_not_fail_the_put(proxy) -> None:
    root = copies_root(proxy)
    failed = proxy.fail(key_put("/one-fails"), status=500)
    create_object(root, root.path_for("one-fails"), b"data")
    assert len(failed.hits) == 1 and get_object(root, root.path_for("one-fails")) == b"data"


def test_when_neither_copy_creates_the_key_an_unknown_outcome_outranks_a_conflict(proxy) -> None:
    root = copies_root(proxy)
    proxy.fail(key_put("/both-fail"), status=500, times=2)
    with pytest.raises(OSError) as raised:
        create_object(root, root.path_for("both-fail"), b"data")
    assert not isinstance(raised.value, FileExistsError)
    assert get_object(root, root.path_for("both-fail")) is None
    path = root.path_for("exists")
    create_object(root, path, b"first")
    assert puts_of(proxy, "/exists", 2) == 2  # both copies in, before the fault is armed for the next call
    proxy.fail(key_put("/exists"), status=500)  # one copy's outcome unknown, the other refused (412)
    with pytest.raises(OSError) as raised:
        create_object(root, path, b"second")
    assert not isinstance(raised.value, FileExistsError)
    assert get_object(root, path) == b"first"


def test_concurrent_appends_with_two_copies_acknowledge_every_record_once_in_order(proxy) -> None:
    """Four writers' pipelined appends while every commit PUT goes out twice, one copy of the first held back
    until the run ends: each version's file was created by one copy, and the log holds what was acknowledged."""
    root = copies_root(proxy)
    log = Log(root)
    log.create_topic("t", 2)  # version 0: delta-rs's commit, one PUT
    start = len(proxy.log)
    held = proxy.stall(lambda m, p: commit_put(m, p) and "/topics/t/_delta_log/" in p, 60.0, then="forward")
    acks, lock = [], threading.Lock()

    def writer(w: int) -> None:
        for i in range(10):
            values = tuple(value_of(w, i, 0, j) for j in range(3))
            res = log.append_pipelined("t", [PartitionBatch(w % 2, normalize_records(
                [{"value": v} for v in values]))])[0].result(timeout=60)[0]
            assert not isinstance(res, KafkaError), res
            with lock:
                acks.append(Ack(w % 2, res.base_offset, values))

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads) and len(acks) == 40
    assert len(held.hits) == 1 and not held.done.is_set()  # every commit landed without the held copy
    held.release.set()
    assert held.done.wait(30) and held.upstream_statuses == [412]
    def versions() -> list[str]:
        return [p for m, p, _ in proxy.log[start:] if commit_put(m, p) and "/topics/t/_delta_log/" in p]

    # the last commit's second copy may reach the proxy after its answer
    wait_for(lambda: len(versions()) >= 2 * len(set(versions())), "both copies of every commit PUT")
    assert len(versions()) == 2 * len(set(versions()))  # each version's commit PUT went out exactly twice
    records = check_log(root, "t", acks)
    assert sum(len(r) for r in records.values()) == 120
    assert find_orphan_files(root, "t") == []


def test_a_commit_whose_copies_both_lost_their_answers_is_found_by_its_commit_id(proxy) -> None:
    """Both copies reach the store, one creates the file, neither answer comes back: the writer does not know
    the outcome and finds its commit in the log by its id, once."""
    root = copies_root(proxy)
    log = Log(root)
    log.create_topic("t", 1)
    first = tuple(value_of(0, 0, 0, j) for j in range(2))
    res0 = log.append("t", [{"value": v} for v in first], partition=0)[0]
    commits = lambda m, p: commit_put(m, p) and "/topics/t/_delta_log/" in p  # noqa: E731
    # version 0 (delta-rs's, one PUT) and both copies of version 1 in before the fault is armed
    wait_for(lambda: sum(1 for m, p, _ in proxy.log if commits(m, p)) >= 3, "version 1's two commit PUTs")
    lost = proxy.lose_response(commits, times=2)
    values = tuple(value_of(1, 0, 0, j) for j in range(3))
    res = log.append_pipelined("t", [PartitionBatch(0, normalize_records([{"value": v} for v in values]))])[0]
    res = res.result(timeout=60)[0]
    assert sorted(lost.upstream_statuses) == [200, 412]  # one copy created the file, its twin found it there
    assert not isinstance(res, KafkaError), res
    assert (res.base_offset, res.record_count) == (2, 3)
    check_log(root, "t", [Ack(0, res0.base_offset, first), Ack(0, res.base_offset, values)])
