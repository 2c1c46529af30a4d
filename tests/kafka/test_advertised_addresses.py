"""The addresses a front gives out: a front may bind every interface (``0.0.0.0``), but the address other fronts
hand their commits to and clients are sent to must be one they can connect to -- ``--advertised-url`` for HTTP,
``--kafka-advertised`` for the Kafka listener (Kafka refuses to advertise the meta-address too). Without one,
``lakelog serve`` refuses to start instead of publishing an address nobody can reach."""

from __future__ import annotations

import subprocess
import sys

import pytest

from lakelog.cluster.membership import is_unspecified_address

from front_process import REPO, Front, free_port, wait_for


@pytest.mark.parametrize("host, unspecified", [
    ("0.0.0.0", True), ("::", True), ("[::]", True), ("", True), ("0:0:0:0:0:0:0:0", True),
    ("127.0.0.1", False), ("::1", False), ("[::1]", False), ("10.0.0.1", False), ("front-1.internal", False),
    ("localhost", False),
])
def test_unspecified_addresses(host, unspecified):
    assert is_unspecified_address(host) is unspecified


def serve(tmp_path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lakelog.cli", "serve", "--root", str(tmp_path / "root"),
                           "--port", str(free_port()), *args], cwd=str(REPO), capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("args, names", [
    (("--node-id", "1", "--host", "0.0.0.0"), "--advertised-url"),
    (("--node-id", "1", "--host", "::"), "--advertised-url"),
    (("--kafka-listener", "0.0.0.0:0"), "--kafka-advertised"),
    (("--kafka-listener", "127.0.0.1:0", "--kafka-advertised", "0.0.0.0:9092"), "--kafka-advertised"),
], ids=["http-ipv4", "http-ipv6", "kafka-listener", "kafka-advertised"])
def test_serve_refuses_to_give_out_an_address_that_binds_every_interface(tmp_path, args, names):
    done = serve(tmp_path, *args)
    assert done.returncode == 2, done.stderr
    assert "error:" in done.stderr and names in done.stderr and "every interface" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "root").exists()  # refused before anything was written


@pytest.mark.parametrize("url", ["http://0.0.0.0:8080", "http://[::]:8080", "ftp://front-1:8080", "front-1:8080",
                                 "http://front-1:8080/v1?x=1", "http://:8080", "http://front-1:99999", ""])
def test_serve_refuses_an_advertised_url_nobody_can_connect_to(tmp_path, url):
    done = serve(tmp_path, "--node-id", "1", "--advertised-url", url)
    assert done.returncode == 2, done.stderr
    assert "error: --advertised-url" in done.stderr and "can connect to" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "root").exists()


def test_a_front_bound_to_every_interface_gives_out_its_advertised_url(tmp_path):
    port, kafka_port = free_port(), free_port()
    advertised = f"http://127.0.0.1:{port}"
    front = Front(str(tmp_path / "root"), tmp_path / "front",
                  args=("--host", "0.0.0.0", "--node-id", "7", "--advertised-url", advertised,
                        "--kafka-listener", f"0.0.0.0:{kafka_port}", "--kafka-advertised", f"127.0.0.1:{kafka_port}"))
    front.port, front.url = port, advertised
    front.start()
    try:
        with front.client() as http:
            cluster = wait_for(lambda: (c := http.get("/v1/cluster").json())["fronts"] and c, 30, "the first heartbeat")
        assert cluster["node_id"] == 7
        assert cluster["fronts"] == [{"node_id": 7, "http_url": advertised, "kafka": f"127.0.0.1:{kafka_port}"}]
    finally:
        front.stop()
