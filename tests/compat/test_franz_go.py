"""franz-go's own ``kgo`` test suite (github.com/twmb/franz-go v1.22.3, from the Go module proxy; built once by
``python -m reference peers``) against lakelog: ``KGO_SEEDS`` names an open front, ``KGO_TEST_SCRAM_SEEDS`` a
front that requires SASL with a SCRAM-SHA-256 user of its ``--sasl-file``.

Every top-level test must pass, except those in :data:`FAILING` (each names why: a deliberate difference of
docs/kafka-clients.md, or lakelog's bug) and :data:`SKIPPED` (franz-go skips them without their environment); a
listed failure that passes fails this test too, so the list and the counts in docs/kafka-clients.md stay true.

The CI run leaves out franz-go's long throughput tests (:data:`LONG`, each with what it costs here): the suite is
written against a broker that answers a produce in a millisecond, and the three of them alone took over 12 minutes
of CPU, against a 20-minute budget for the whole of ``make test`` on two cores. Every other test runs, among them
every test that found a lakelog bug. ``LAKELOG_KGO_FULL=1 .venv/bin/python -m pytest tests/compat/test_franz_go.py``
runs the whole suite (docs/kafka-clients.md records its last count). It is this file's only test, so that xdist
runs it beside the other files.
"""

from __future__ import annotations

import json
import os
import re
import subprocess

import pytest

from front_process import kafka_front_process
from reference import go

SCRAM_USER, SCRAM_PASSWORD = "kgo", "kgo-secret"
# kgo's own knobs: 5,000 records per ETL test (its default 500,000 takes an hour here); one replica per topic
# (Kafka refuses three on one broker, and so does lakelog)
ENV = {"KGO_TEST_RECORDS": "5000", "KGO_TEST_RF": "1", "KGO_LOG_LEVEL": "none"}
RUN_TIMEOUT_S = 1500

# Top-level tests the CI run leaves out (-test.skip), with their cost on this machine (KGO_TEST_RECORDS=5000)
LONG: dict[str, str] = {
    "TestClient_Produce": "20,000 synchronous produces of up to 1 KB from 50 goroutines to one partition: most of "
                          "the suite's 12 minutes of CPU",
    "TestGroupETL": "5,000 records through three chained consumer groups, six balancer variants: 1 to 3.5 minutes "
                    "each (70 s to 3 min 18 s measured), 10 to 15 minutes in all",
    "TestTxnEtl": "TestGroupETL with transactions: 53 to 257 s a variant, 364 s wall for the test",
}
FULL = os.environ.get("LAKELOG_KGO_FULL") == "1"

# Top-level tests that fail against lakelog, and why (docs/kafka-clients.md lists them)
FAILING: dict[str, str] = {
    "TestTxnEtl": "transactional-ack: a transactional produce is acknowledged with base offset -1 (its records get "
                  "offsets at commit), and the test checks each partition's acknowledged offsets are contiguous "
                  "(\"produced offsets out of order, got -1\")",
    "TestConsumeMaxDecompressBatchBytes": "batches: lakelog's Fetch answers carry uncompressed batches, so a client's "
                                          "decompression limit never applies",
    "TestGroupETL": "lakelog's bug, not fixed yet: at load 30 and more a classic JoinGroup (range, cooperative-sticky) "
                    "was answered later than franz-go's read deadline, the rebalance timeout (60 s) plus 10 s "
                    "(\"unable to join group session: i/o timeout\"), where Kafka's coordinator completes the join "
                    "at the rebalance timeout at the latest",
    "TestPooling": "batches: lakelog's Fetch answers carry uncompressed batches, so the client never takes a "
                   "decompression buffer from its pool (\"did not put decompress!\")",
}
# Tests franz-go skips here, and why: these are not counted as passes
SKIPPED = {
    "TestOAuthAuth": "KGO_TEST_OAUTH_SEEDS: lakelog has no OAUTHBEARER",
    "TestShareGroup": "share groups (KIP-932): lakelog does not advertise ShareFetch",
    "TestShareGroupETL": "share groups (KIP-932)",
    "TestShareGroupAckOnClose": "share groups (KIP-932)",
    "TestShareGroupOffsetsAdmin": "share groups (KIP-932)",
    "TestConsumeRegexShareSkipsInternal": "share groups (KIP-932)",
}
RESULT = re.compile(r"^--- (PASS|FAIL|SKIP): (\S+) \(")
HEADER = re.compile(r"^=== (?:RUN|CONT|NAME|PAUSE)\s+(\S+)")


@pytest.fixture(scope="module")
def fronts(tmp_path_factory):
    d = tmp_path_factory.mktemp("kgo")
    (d / "sasl.json").write_text(json.dumps({"users": [{"name": SCRAM_USER, "password": SCRAM_PASSWORD}]}))
    (d / "auth.json").write_text(json.dumps({"tokens": [], "super_users": [f"User:{SCRAM_USER}"], "acls": []}))
    plain = kafka_front_process(str(d / "root"), d / "logs")
    secure = kafka_front_process(str(d / "secure-root"), d / "secure-logs", args=("--sasl-file", str(d / "sasl.json")))
    secure.auth_file = str(d / "auth.json")
    plain.start()
    secure.start()
    yield plain, secure
    plain.stop()
    secure.stop()


def results(output: str) -> dict[str, str]:
    """Top-level test name -> PASS, FAIL or SKIP, from ``-test.v`` output (subtests are indented)."""
    return {m.group(2): m.group(1) for line in output.splitlines() if (m := RESULT.match(line))}


def logged(output: str, lines: int = 6) -> dict[str, list[str]]:
    """What each top-level test logged (``file_test.go:N: ...`` lines; ``-test.v`` prints a parallel test's
    lines after ``=== CONT``/``=== NAME`` headers naming it), the first ``lines`` of each."""
    out: dict[str, list[str]] = {}
    current = None
    for line in output.splitlines():
        if m := HEADER.match(line):
            current = m.group(1).split("/")[0]
        elif current and "_test.go:" in line and len(out.setdefault(current, [])) < lines:
            out[current].append(line.strip())
    return out


@pytest.mark.timeout(RUN_TIMEOUT_S + 60)
def test_kgo_suite(fronts, tmp_path):
    plain, secure = fronts
    binary = go.require_kgo_tests()
    env = {**os.environ, **ENV, "KGO_SEEDS": plain.bootstrap, "KGO_TEST_SCRAM_SEEDS": secure.bootstrap,
           "KGO_TEST_SCRAM": f"{SCRAM_USER}:{SCRAM_PASSWORD}:256"}
    only = [] if FULL else ["-test.skip", f"^({'|'.join(LONG)})$"]
    proc = subprocess.run([str(binary), "-test.v", "-test.timeout", f"{RUN_TIMEOUT_S - 60}s", *only],
                          cwd=go.kgo_package_dir(), env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    output = proc.stdout + proc.stderr
    (tmp_path / "kgo.out").write_text(output)
    got = results(output)
    assert len(got) > 140, f"franz-go ran {len(got)} tests (exit {proc.returncode}):\n{output[-3000:]}"
    assert FULL or not set(got) & set(LONG), sorted(set(got) & set(LONG))
    failed = {n for n, r in got.items() if r == "FAIL"}
    skipped = {n for n, r in got.items() if r == "SKIP"}
    passed = len(got) - len(failed) - len(skipped)
    print(f"franz-go {go.VERSION} kgo ({'full' if FULL else 'without ' + ', '.join(LONG)}) against lakelog: {passed} passed, {len(failed)} failed, {len(skipped)} skipped")
    unexpected = sorted(failed - set(FAILING))
    logs = logged(output)
    assert not unexpected, "franz-go tests failed against lakelog:\n" + "\n".join(
        f"{n}:\n  " + "\n  ".join(logs.get(n, ["(nothing logged)"])) for n in unexpected)
    fixed = sorted(set(FAILING) & set(got) - failed)
    assert not fixed, f"now passing, remove from FAILING (and docs/kafka-clients.md): {fixed}"
    assert skipped == set(SKIPPED), f"skips changed: {sorted(skipped ^ set(SKIPPED))}"
    assert got.get("TestSCRAMAuth") == "PASS" and got.get("TestSCRAMAuthBadCredentials") == "PASS"
