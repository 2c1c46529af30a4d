"""Fixtures of the HTTP tests: real ``lakelog serve`` processes over a local root and a moto S3 root.

* ``front_root`` -- (root URI, child environment, storage options), parametrised local / s3, per session;
* ``front`` -- one shared front per root for the whole session (tests use their own topics);
* ``http`` -- an httpx client of ``front``; ``topic`` -- a fresh 2-partition topic on it;
* ``front_log`` -- a :class:`lakelog.Log` in the test process on the same root (an independent reader);
* ``start_front`` -- a factory for dedicated fronts (restarts, crashes, special settings), stopped at teardown.
"""

from __future__ import annotations

import uuid

import pytest

from front_process import MAX_REQUEST_BYTES, Front, new_topic

BUCKET = "lakelog-test"


def child_s3_env(endpoint: str) -> dict[str, str]:
    return {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1",
            "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL": endpoint, "AWS_ALLOW_HTTP": "true"}


@pytest.fixture(scope="session", params=["local", "s3"])
def front_root(request, tmp_path_factory):
    if request.param == "local":
        return str(tmp_path_factory.mktemp("front-root") / "root"), {}, {}
    endpoint = request.getfixturevalue("s3_endpoint")
    options = {"aws_endpoint_url": endpoint, "aws_access_key_id": "testing", "aws_secret_access_key": "testing",
               "aws_region": "us-east-1", "aws_allow_http": "true"}
    return f"s3://{BUCKET}/front-{uuid.uuid4().hex[:12]}", child_s3_env(endpoint), options


@pytest.fixture(scope="session")
def front(front_root, tmp_path_factory):
    root, env, _ = front_root
    f = Front(root, tmp_path_factory.mktemp("front-logs"),
              env={**env, "LAKELOG_MAX_REQUEST_BYTES": str(MAX_REQUEST_BYTES)})
    f.start()
    yield f
    f.stop()


@pytest.fixture
def http(front):
    with front.client() as c:
        yield c


@pytest.fixture
def topic(http) -> str:
    return new_topic(http)


@pytest.fixture
def front_log(front_root):
    from lakelog import Log

    root, _, options = front_root
    return Log(root, storage_options=options or None)


@pytest.fixture
def start_front(front_root, tmp_path):
    """``start_front(env=..., auth_file=..., root=...)`` → a started :class:`Front` (stopped at teardown)."""
    started: list[Front] = []

    def start(*, env: dict | None = None, auth_file: str | None = None, root: str | None = None) -> Front:
        base_root, base_env, _ = front_root
        r = root or (f"{base_root}-{uuid.uuid4().hex[:8]}" if base_root.startswith("s3://")
                     else str(tmp_path / f"root-{len(started)}"))
        f = Front(r, tmp_path / "logs", env={**base_env, **(env or {})}, auth_file=auth_file)
        started.append(f)
        return f.start()

    yield start
    for f in started:
        f.kill()
