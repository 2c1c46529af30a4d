"""find_orphan_files: unreferenced segment files are reported; live files and tombstones are not."""

from __future__ import annotations

import pytest
from deltalake import DeltaTable

from lakelog.errors import UnknownTopicOrPartition
from lakelog.storage.orphan_files import find_orphan_files


def test_orphans_are_reported_and_never_read(log, root):
    log.create_topic("t", 2)
    for i in range(3):
        log.append("t", [{"key": "k", "value": f"v{i}"}], partition=0)
    log.append("t", [{"key": "k", "value": "p1"}], partition=1)
    assert find_orphan_files(root, "t") == []

    live = log.segments("t", 0)
    fs = root.filesystem
    orphan = "partition=1/00000000000000000042-failedcommit.parquet"  # as a failed commit would leave it
    fs.copy_file(root.path_for("topics", "t", live[0].path), root.path_for("topics", "t", orphan))
    # a tombstone: a file removed from the table (awaiting vacuum) is not an orphan
    dt = DeltaTable(root.uri_for("topics", "t"), storage_options=root.storage_options)
    dt.delete("\"offset\" = 1 AND \"partition\" = 0")
    assert live[1].path not in {a for a in dt.get_add_actions(flatten=False).column("path").to_pylist()}

    found = find_orphan_files(root, "t")
    assert [(o.path, o.partition, o.size) for o in found] == [(orphan, 1, live[0].bytes)]
    assert found[0].modification_time > 0
    assert find_orphan_files(root.uri if root.is_local else root, "t", partition=0) == []
    assert [r["value"] for r in log.read("t", 1).to_pylist()] == [b"p1"]  # the orphan is never read

    with pytest.raises(UnknownTopicOrPartition):
        find_orphan_files(root, "missing")
