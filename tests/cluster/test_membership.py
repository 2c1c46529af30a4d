"""What fronts on one root read of each other, table-driven on a local root: heartbeat objects
(lakelog/cluster/membership.py) that are not a front's own -- malformed, mistyped, out of range, under another
front's name, with an HTTP URL no one could connect to -- are ignored, and the live fronts are still seen; an
advertised URL is one others can connect to; a cluster secret (lakelog/cluster/cluster_secret.py) that is not 64
hex digits is refused, not used."""

from __future__ import annotations

import json
import os
import time

import pytest

from lakelog.cluster.cluster_secret import SECRET_PATH, cluster_secret
from lakelog.cluster.membership import FRONTS_DIR, FrontInfo, Membership, is_advertisable_url
from lakelog.storage.storage_root import StorageRoot

SESSION_MS = 60_000


def beat(node_id, **changes) -> bytes:
    record = {"node_id": node_id, "http_url": f"http://127.0.0.1:{node_id}", "kafka_host": "127.0.0.1",
              "kafka_port": 9092, "heartbeat_ms": int(time.time() * 1000)}
    return json.dumps(record | changes).encode()


CASES = [
    ("not JSON", "7.json", b"{\"node_id\": 7,"),
    ("a list", "7.json", b"[7, \"http://x\"]"),
    ("empty", "7.json", b""),
    ("node id a string", "7.json", beat("7")),
    ("heartbeat a string", "7.json", beat(7, heartbeat_ms="now")),
    ("heartbeat a float", "7.json", beat(7, heartbeat_ms=time.time() * 1000)),
    ("port a string", "7.json", beat(7, kafka_port="9092")),
    ("no address", "7.json", json.dumps({"node_id": 7, "heartbeat_ms": int(time.time() * 1000)}).encode()),
    ("another front's node id", "7.json", beat(1)),
    ("node id out of range", "70000.json", beat(70000)),
    ("negative node id", "-1.json", beat(-1)),
    ("too old", "7.json", beat(7, heartbeat_ms=int(time.time() * 1000) - 2 * SESSION_MS)),
    # an address no front or client could use: commits would be handed there
    ("address every interface", "7.json", beat(7, http_url="http://0.0.0.0:8080")),
    ("address not http", "7.json", beat(7, http_url="file:///etc/passwd")),
    ("address with a path", "7.json", beat(7, http_url="http://127.0.0.1:7/x?y=1")),
    ("address with a bad port", "7.json", beat(7, http_url="http://127.0.0.1:99999")),
]


@pytest.mark.parametrize("name, data", [(n, d) for _, n, d in CASES], ids=[c[0] for c in CASES])
def test_a_heartbeat_that_is_not_a_fronts_own_is_ignored(tmp_path, name, data):
    root = StorageRoot.resolve(str(tmp_path))
    me, other = (Membership(root, FrontInfo(n, f"http://127.0.0.1:{n}"), SESSION_MS) for n in (1, 2))
    me.heartbeat()
    other.heartbeat()
    with open(os.path.join(root.path_for(FRONTS_DIR), name), "wb") as f:
        f.write(data)
    assert [f.node_id for f in me.live()] == [1, 2]


def test_a_well_formed_heartbeat_counts(tmp_path):
    root = StorageRoot.resolve(str(tmp_path))
    me = Membership(root, FrontInfo(1, "http://127.0.0.1:1"), SESSION_MS)
    me.heartbeat()
    with open(os.path.join(root.path_for(FRONTS_DIR), "7.json"), "wb") as f:
        f.write(beat(7, extra_field_of_a_later_version=1))
    live = me.live()
    assert [f.node_id for f in live] == [1, 7]
    assert live[1].http_url == "http://127.0.0.1:7" and live[1].kafka_port == 9092


@pytest.mark.parametrize("url, ok", [
    ("http://10.0.0.1:8080", True), ("https://front-1.example:443/", True), ("http://[::1]:8080", True),
    ("http://front-1", True),
    ("http://0.0.0.0:8080", False), ("http://[::]:8080", False), ("ftp://front-1:8080", False),
    ("front-1:8080", False), ("http://front-1:8080/v1", False), ("http://front-1:8080?x=1", False),
    ("http://front-1:8080#x", False), ("http://:8080", False), ("http://front-1:http", False),
    ("http://front-1:65536", False), ("http://[::1", False), ("", False),
])
def test_an_advertised_url_is_one_others_can_connect_to(url, ok):
    assert is_advertisable_url(url) is ok


@pytest.mark.parametrize("data", [b"", b"\n", b"abc", b"0" * 63, b"0" * 65, b"g" * 64, b"A" * 64, b"\xff" * 64],
                         ids=["empty", "newline", "short", "63 digits", "65 digits", "not hex", "upper case",
                              "not UTF-8"])
def test_a_cluster_secret_that_is_not_64_hex_digits_is_refused(tmp_path, data):
    root = StorageRoot.resolve(str(tmp_path))
    os.makedirs(os.path.dirname(root.path_for(SECRET_PATH)))
    with open(root.path_for(SECRET_PATH), "wb") as f:
        f.write(data)
    with pytest.raises(ValueError, match="not 64 lower-case hex digits"):
        cluster_secret(root)


def test_the_cluster_secret_is_created_once(tmp_path):
    root = StorageRoot.resolve(str(tmp_path))
    first = cluster_secret(root)
    assert len(first) == 64 and int(first, 16) >= 0
    assert cluster_secret(root) == first
