"""lakelog's one-request S3 calls (lakelog/storage/s3_objects.py) against a real moto server.

Their client is obstore's, whose runtime has no threads in a process forked after it started: a request there
would wait for ever. Such a process gets an ``OSError`` instead, and the process it was forked from goes on.
"""

from __future__ import annotations

import os
import time
import uuid

import pyarrow as pa
import pytest

from s3_server import BUCKET, s3_options
from lakelog.storage.s3_objects import create_object, get_object, object_exists, put_object
from lakelog.storage.storage_root import StorageRoot


def test_put_get_head_and_create_and_their_outcomes(s3_endpoint) -> None:
    root = StorageRoot.resolve(f"s3://{BUCKET}/{uuid.uuid4().hex}", s3_options(s3_endpoint))
    path = root.path_for("a", "object")
    assert get_object(root, path) is None and not object_exists(root, path)
    put_object(root, path, pa.py_buffer(b"arrow bytes"))  # an Arrow buffer goes as it is
    assert get_object(root, path) == b"arrow bytes" and object_exists(root, path)
    put_object(root, path, b"overwritten")
    assert get_object(root, path) == b"overwritten"
    with pytest.raises(FileExistsError):
        create_object(root, path, b"refused")
    assert get_object(root, path) == b"overwritten"
    create_object(root, root.path_for("a", "new"), b"created")
    assert get_object(root, root.path_for("a", "new")) == b"created"


def test_an_option_obstore_cannot_parse_is_a_value_error_naming_no_value(s3_endpoint) -> None:
    options = dict(s3_options(s3_endpoint), aws_virtual_hosted_style_request="maybe")
    root = StorageRoot.resolve(f"s3://{BUCKET}/{uuid.uuid4().hex}", options)
    with pytest.raises(ValueError) as raised:
        get_object(root, root.path_for("object"))
    message = str(raised.value)
    assert "not valid" in message and "maybe" not in message and s3_endpoint not in message


@pytest.mark.parametrize("copies", ["1", "2"])  # two copies of a conditional PUT go through a thread pool
def test_a_process_forked_after_the_client_started_gets_an_error_not_a_hang(s3_endpoint, copies) -> None:
    root = StorageRoot.resolve(f"s3://{BUCKET}/{uuid.uuid4().hex}", dict(s3_options(s3_endpoint),
                                                                         commit_put_copies=copies))
    path = root.path_for("object")
    put_object(root, path, b"before the fork")
    create_object(root, root.path_for("created"), b"before the fork")  # the copies' pool started, if any
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report what a GET and a conditional PUT did, and leave without pytest's exit handlers
        outcomes = []
        for call in (lambda: get_object(root, path), lambda: create_object(root, root.path_for("child"), b"x")):
            try:
                call()
                outcomes.append("no error")
            except OSError as e:
                outcomes.append(str(e))
        os.write(write, "\n".join(outcomes).encode())
        os._exit(0)
    os.close(write)
    deadline = time.monotonic() + 30
    while os.waitpid(pid, os.WNOHANG) == (0, 0):
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            raise AssertionError("a call in the forked process hung")
        time.sleep(0.05)
    with os.fdopen(read, "rb") as f:
        outcome = f.read().decode()
    assert len(outcome.split("\n")) == 2 and all("forked" in o and "spawn" in o for o in outcome.split("\n")), outcome
    assert get_object(root, path) == b"before the fork"  # this process's client still works
