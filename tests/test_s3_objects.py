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


def test_a_process_forked_after_the_client_started_gets_an_error_not_a_hang(s3_endpoint) -> None:
    root = StorageRoot.resolve(f"s3://{BUCKET}/{uuid.uuid4().hex}", s3_options(s3_endpoint))
    path = root.path_for("object")
    put_object(root, path, b"before the fork")
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report what the GET did, and leave without running pytest's exit handlers
        try:
            get_object(root, path)
            outcome = b"no error"
        except OSError as e:
            outcome = str(e).encode()
        os.write(write, outcome)
        os._exit(0)
    os.close(write)
    deadline = time.monotonic() + 30
    while os.waitpid(pid, os.WNOHANG) == (0, 0):
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            raise AssertionError("the forked process's GET hung")
        time.sleep(0.05)
    with os.fdopen(read, "rb") as f:
        outcome = f.read().decode()
    assert "forked" in outcome and "spawn" in outcome, outcome
    assert get_object(root, path) == b"before the fork"  # this process's client still works
