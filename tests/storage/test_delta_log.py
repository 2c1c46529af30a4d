"""Reading Delta commit files (lakelog/storage/delta_log.py): what other writers put in them parses as written."""

from __future__ import annotations

import json

import pytest

from lakelog import Log
from lakelog.storage.delta_log import parse_commit


@pytest.mark.parametrize("app", [
    "plain",
    "line\u2028separator",  # JSON allows these unescaped, and delta-rs (serde_json) writes them so;
    "paragraph\u2029separator",  # str.splitlines() splits on each of them
    "next\x85line",
    "all\u2028\u2029\x85three",
])
@pytest.mark.parametrize("ending", ["\n", "\r\n"])
def test_a_string_with_a_unicode_line_break_stays_one_action(app: str, ending: str) -> None:
    actions = [{"commitInfo": {"operation": "WRITE", "note": app}}, {"txn": {"appId": app, "version": 7}}]
    text = "".join(json.dumps(a, ensure_ascii=False) + ending for a in actions)
    commit = parse_commit(3, text)
    assert commit.txns == {app: 7}
    assert commit.commit_info["note"] == app


def test_a_transactional_id_with_a_line_separator_is_initialised_again(tmp_path) -> None:
    """Found by schemathesis over HTTP (POST /v1/transactions/{id}/init answered 500): the producers table's
    commit of such an id was read back split in two."""
    log = Log(str(tmp_path / "root"))
    tid = "tx\u2028\x85\u2029"
    first = log.init_producer(tid)
    second = log.init_producer(tid)
    assert (second.producer_id, second.producer_epoch) == (first.producer_id, first.producer_epoch + 1)
    assert Log(str(tmp_path / "root")).init_producer(tid).producer_epoch == first.producer_epoch + 2
