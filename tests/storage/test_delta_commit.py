"""put-if-absent, the primitive every commit of lakelog relies on, on a local root and on moto S3."""

from __future__ import annotations

import sys
import threading

import pytest

from lakelog.storage import delta_commit
from lakelog.storage.delta_commit import CommitConflict, put_if_absent


def _read(root, rel: str) -> bytes:
    with root.filesystem.open_input_stream(root.path_for(rel)) as f:
        return f.read()


def _leftovers(root, rel_dir: str) -> list[str]:
    from pyarrow.fs import FileSelector

    infos = root.filesystem.get_file_info(FileSelector(root.path_for(rel_dir), allow_not_found=True))
    return sorted(i.base_name for i in infos)


@pytest.mark.parametrize("fsync", [True, False])
def test_second_put_conflicts_and_keeps_the_first(root, fsync: bool) -> None:
    if root.is_local:
        root.filesystem.create_dir(root.path_for("_delta_log"), recursive=True)
    put_if_absent(root, "_delta_log/00000000000000000001.json", b"first", fsync=fsync)
    with pytest.raises(CommitConflict):
        put_if_absent(root, "_delta_log/00000000000000000001.json", b"second", fsync=fsync)
    assert _read(root, "_delta_log/00000000000000000001.json") == b"first"
    assert _leftovers(root, "_delta_log") == ["00000000000000000001.json"]  # no temporary file stays behind


def test_racing_writers_exactly_one_wins(root) -> None:
    """Eight writers race for each of 40 versions, threads switched every microsecond (on S3 the server's too:
    moto's own check-then-write let two win in 1-5 of 200 such rounds before tests/s3_server.py made it
    atomic): one wins each, and its body is the one stored."""
    root.filesystem.create_dir(root.path_for("_delta_log"), recursive=True)
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for version in range(40):
            path = f"_delta_log/{version:020d}.json"
            barrier, outcomes = threading.Barrier(8), []

            def writer(i: int) -> None:
                barrier.wait()
                try:
                    put_if_absent(root, path, b"writer-%d" % i, fsync=False)
                    outcomes.append(i)
                except CommitConflict:
                    outcomes.append(None)

            threads = [threading.Thread(target=writer, args=(i,)) for i in range(8)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            winners = [o for o in outcomes if o is not None]
            assert len(winners) == 1 and len(outcomes) == 8, (version, outcomes)
            assert _read(root, path) == b"writer-%d" % winners[0]
    finally:
        sys.setswitchinterval(switch)
    assert _leftovers(root, "_delta_log") == [f"{v:020d}.json" for v in range(40)]


@pytest.mark.parametrize("root", ["local"], indirect=True)
def test_without_renameat2_the_hard_link_path_is_put_if_absent_too(root, monkeypatch) -> None:
    monkeypatch.setattr(delta_commit, "_renameat2", lambda: None)  # a platform without renameat2
    root.filesystem.create_dir(root.path_for("_delta_log"), recursive=True)
    put_if_absent(root, "_delta_log/00000000000000000002.json", b"linked")
    with pytest.raises(CommitConflict):
        put_if_absent(root, "_delta_log/00000000000000000002.json", b"again")
    assert _read(root, "_delta_log/00000000000000000002.json") == b"linked"
    assert _leftovers(root, "_delta_log") == ["00000000000000000002.json"]


@pytest.mark.parametrize("root", ["local"], indirect=True)
def test_a_failed_rename_leaves_no_temporary_file(root) -> None:
    """Any rename error other than "exists" (here ENAMETOOLONG) propagates, and the temporary file is removed."""
    root.filesystem.create_dir(root.path_for("_delta_log"), recursive=True)
    with pytest.raises(OSError) as e:
        put_if_absent(root, "_delta_log/" + "9" * 300 + ".json", b"x", fsync=False)
    assert not isinstance(e.value, CommitConflict)
    assert _leftovers(root, "_delta_log") == []


def test_the_first_file_of_a_directory_needs_no_directory_made_first(root) -> None:
    """Callers (job leases, transaction state, staging, the cluster secret) no longer create directories: a
    missing parent is made on a local root, and on S3 there are none."""
    rel = "a/b/c/00000000000000000000.json"
    put_if_absent(root, rel, b"first", fsync=False)
    with pytest.raises(CommitConflict):
        put_if_absent(root, rel, b"second", fsync=False)
    assert _read(root, rel) == b"first"
    assert _leftovers(root, "a/b/c") == ["00000000000000000000.json"]


def test_a_commit_is_one_conditional_put_sent_without_waiting_for_100_continue(s3_endpoint) -> None:
    """A commit is a few KB and a wait for the store's "100 Continue" a round trip on the serial commit path
    (botocore asks for one before every PutObject body): lakelog's client sends the body at once, in one PUT
    that the store refuses when the version exists. Counted on the wire, by a proxy in front of moto."""
    import uuid

    from bench.s3_proxy import S3FaultProxy
    from lakelog.storage.storage_root import StorageRoot
    from s3_server import BUCKET, s3_options

    proxy = S3FaultProxy(s3_endpoint).start()
    try:
        root = StorageRoot.resolve(f"s3://{BUCKET}/{uuid.uuid4().hex}", s3_options(proxy.url))
        proxy.reset_stats()
        put_if_absent(root, "_delta_log/00000000000000000000.json", b'{"commitInfo":{}}', fsync=False)
        with pytest.raises(CommitConflict):
            put_if_absent(root, "_delta_log/00000000000000000000.json", b"other", fsync=False)
        stats = proxy.reset_stats()
        assert _read(root, "_delta_log/00000000000000000000.json") == b'{"commitInfo":{}}'
    finally:
        proxy.stop()
    assert stats.describe() == "PUT 2" and stats.expect_continue == 0, (stats.describe(), stats.expect_continue)
