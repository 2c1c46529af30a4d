"""Fixtures of the consumer-group tests: real ``lakelog serve`` fronts whose coordinator accepts short sessions.

* ``group_front`` -- one front for the whole session on a local root, with
  ``group.min.session.timeout.ms`` = 1000 so members can use 2 s sessions (tests use their own topics and groups);
* ``http`` -- an httpx client of it;
* ``start_group_front`` -- a factory for dedicated fronts (restarts), killed at teardown.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "api"))

from front_process import Front  # noqa: E402

GROUP_ENV = {"LAKELOG_GROUP_MIN_SESSION_TIMEOUT_MS": "1000"}


@pytest.fixture(scope="session")
def group_front(tmp_path_factory):
    f = Front(str(tmp_path_factory.mktemp("group-root") / "root"), tmp_path_factory.mktemp("group-logs"),
              env=GROUP_ENV)
    f.start()
    yield f
    f.stop()


@pytest.fixture
def http(group_front):
    with group_front.client() as c:
        yield c


@pytest.fixture
def start_group_front(tmp_path):
    started: list[Front] = []

    def start(env: dict | None = None, root: str | None = None) -> Front:
        f = Front(root or str(tmp_path / f"root-{len(started)}"), tmp_path / "logs", env={**GROUP_ENV, **(env or {})})
        started.append(f)
        return f.start()

    yield start
    for f in started:
        f.kill()
