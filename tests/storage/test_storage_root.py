"""Where an S3 root's options come from: explicit storage options, then the ``AWS_*`` environment, each key from
the first variable set in the AWS CLI's and SDKs' order (``AWS_REGION`` before ``AWS_DEFAULT_REGION``,
``AWS_ENDPOINT_URL_S3`` before ``AWS_ENDPOINT_URL``)."""

from __future__ import annotations

import os
import threading

import pytest

from lakelog.storage.storage_root import InvalidStorageRoot, StorageRoot, duration_seconds, list_dir

AWS_VARS = ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_ALLOW_HTTP",
            "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")


@pytest.mark.parametrize("env, options, expected", [
    ({"AWS_REGION": "eu-west-1", "AWS_DEFAULT_REGION": "us-west-2"}, {}, {"aws_region": "eu-west-1"}),
    ({"AWS_DEFAULT_REGION": "us-west-2"}, {}, {"aws_region": "us-west-2"}),
    ({"AWS_REGION": "eu-west-1"}, {"region": "ap-south-1"}, {"aws_region": "ap-south-1"}),
    ({"AWS_ENDPOINT_URL": "https://a.example", "AWS_ENDPOINT_URL_S3": "https://s3.example"}, {},
     {"aws_endpoint_url": "https://s3.example"}),
    ({"AWS_ENDPOINT_URL": "http://127.0.0.1:9000"}, {},
     {"aws_endpoint_url": "http://127.0.0.1:9000", "aws_allow_http": "true"}),
    ({}, {"endpoint": "https://s3.example", "access_key_id": "k"},
     {"aws_endpoint_url": "https://s3.example", "aws_access_key_id": "k"}),
], ids=["region-first", "default-region", "option-beats-env", "s3-endpoint-first", "http-endpoint", "aliases"])
def test_s3_root_options(monkeypatch, env, options, expected):
    for name in AWS_VARS:
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert dict(StorageRoot.resolve("s3://bucket/lake", options).options) == expected


def test_a_local_root_takes_nothing_from_the_aws_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    root = StorageRoot.resolve(tmp_path / "root")
    assert root.is_local and root.options == () and root.uri == str(tmp_path / "root")


@pytest.mark.parametrize("text, seconds", [("500ms", 0.5), ("5s", 5.0), ("2m", 120.0), ("30", 30.0), (" 5S ", 5.0),
                                           ("86400s", 86400.0)])
def test_a_duration_option_in_seconds(text, seconds):
    assert duration_seconds(text) == seconds


# A timeout or retry count the root cannot use is refused when the root is resolved, naming the option (the command
# answers it as a usage error), not left to fail at the first request
BAD_OPTIONS = [({"timeout": "abc"}, "timeout must be a positive duration"),
               ({"connect_timeout": "0s"}, "connect_timeout must be a positive duration"),
               ({"timeout": "-5s"}, "timeout must be a positive duration"),
               ({"timeout": "nan"}, "timeout must be a positive duration"),
               ({"timeout": "1e999"}, "timeout must be a positive duration"),
               ({"max_retries": "three"}, "max_retries must be a whole number"),
               ({"max_retries": "-1"}, "max_retries must be a whole number"),
               # past what the S3 clients convert: they would overflow at the first request
               ({"timeout": "1e15s"}, "timeout must be a positive duration"),
               ({"connect_timeout": "1441m"}, "connect_timeout must be a positive duration"),
               ({"max_retries": str(2**70)}, "max_retries must be a whole number"),
               ({"max_retries": "101"}, "max_retries must be a whole number"),
               ({"max_retries": "\u00b2"}, "max_retries must be a whole number")]


@pytest.mark.parametrize("options, message", BAD_OPTIONS)
def test_an_unusable_timeout_or_retry_count_is_refused(options, message):
    with pytest.raises(InvalidStorageRoot, match=message):
        StorageRoot.resolve("s3://bucket/x", options)


def test_the_largest_timeout_and_retry_count_reach_both_s3_clients():
    """The bounds are ones both clients take: obstore's store and pyarrow's filesystem build at them."""
    from lakelog.storage.s3_objects import s3_store

    root = StorageRoot.resolve("s3://bucket/x", {"timeout": "86400s", "connect_timeout": "1440m", "max_retries": "100",
                                                 "aws_region": "us-east-1"})
    s3_store("bucket", root.options)
    assert root.filesystem is not None


def test_list_dir_lists_entries_and_a_missing_directory_as_empty(tmp_path):
    root = StorageRoot.resolve(str(tmp_path))
    assert list_dir(root, "a/b") == []
    os.makedirs(tmp_path / "a" / "b")
    (tmp_path / "a" / "b" / "x.json").write_text("{}")
    assert [i.base_name for i in list_dir(root, "a/b")] == ["x.json"]


def test_list_dir_while_another_process_creates_the_directory(tmp_path):
    """pyarrow's listing raises when the directory appears between its failed listing and its existence check;
    list_dir answers an empty listing then, or the directory's entries, and never raises."""
    root, target = StorageRoot.resolve(str(tmp_path)), tmp_path / "d"
    stop, seen = threading.Event(), set()

    def churn():
        while not stop.is_set():
            os.makedirs(target, exist_ok=True)
            os.rmdir(target)

    t = threading.Thread(target=churn)
    t.start()
    try:
        for _ in range(20_000):
            seen.add(len(list_dir(root, "d")))
    finally:
        stop.set()
        t.join()
    assert seen == {0}  # the directory is always empty: present or not, no entries and no exception
