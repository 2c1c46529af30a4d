"""The front's topic-metadata cache: fresh entries as they are, stale ones served while one refresh runs.

A refresh on object storage replays the commits since the cached version, one round trip each; the
produce path must not wait for it (it measured as the p99 of produce on the S3 Standard profile).
"""

from __future__ import annotations

import time

import pytest

from lakelog import Log
from lakelog.broker.topic_metadata import TopicMetadata
from lakelog.errors import UnknownTopicOrPartition


def wait_for(predicate, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return False


def test_a_stale_entry_is_served_at_once_and_refreshed_in_the_background(tmp_path):
    root = str(tmp_path / "root")
    Log(root).create_topic("t", 1)
    metadata = TopicMetadata(Log(root), max_age_ms=50, stale_ms=60_000)
    first = metadata.get("t")
    Log(root).append("t", [{"value": b"a"}])  # another process's commit
    time.sleep(0.06)
    assert metadata.get("t") is first  # stale: still served, without waiting for storage; a refresh starts
    assert wait_for(lambda: metadata.get("t").version > first.version)
    assert metadata.get("t").high_watermark(0) == 1


def test_an_entry_older_than_the_stale_limit_is_loaded_before_answering(tmp_path):
    root = str(tmp_path / "root")
    Log(root).create_topic("t", 1)
    metadata = TopicMetadata(Log(root), max_age_ms=10, stale_ms=20)
    first = metadata.get("t")
    Log(root).append("t", [{"value": b"a"}])
    time.sleep(0.05)
    assert metadata.get("t").version > first.version


def test_a_topic_deleted_elsewhere_is_dropped_by_the_background_refresh(tmp_path):
    root = str(tmp_path / "root")
    Log(root).create_topic("t", 1)
    metadata = TopicMetadata(Log(root), max_age_ms=10, stale_ms=60_000)
    metadata.get("t")
    Log(root).delete_topic("t")
    time.sleep(0.02)
    metadata.get("t")  # stale, served once; the refresh finds the topic gone and drops it

    def refused() -> bool:
        try:
            metadata.get("t")
        except UnknownTopicOrPartition:
            return True
        return False

    assert wait_for(refused)
