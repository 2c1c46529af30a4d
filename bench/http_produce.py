"""Produce over HTTP: the front (``lakelog serve``) against its two ceilings, like kafka-producer-perf-test.

Every system sends the same prebuilt request bodies (100-byte values, null keys
as kafka-producer-perf-test sends them, so the server's sticky partitioner
spreads them over an 8-partition topic) from closed-loop client threads, each
waiting for its answer before sending again:

* **JSON produce** -- ``POST /v1/topics/T/records``, simple JSON form, 1,000 records per
  request, 8 concurrent clients, acks=all (answered after the durable commit);
* **v3 JSON produce** -- Confluent REST v3's ``POST /v3/clusters/C/topics/T/records`` with the same
  1,000 records as concatenated v3 records (``{"value": {"type": "STRING", "data": ...}}``) in one body,
  answered with 1,000 delivery reports; it runs right after JSON produce in every repeat, and the goal
  compares the two (the v3 mapping layer over the same produce path);
* **Arrow produce** -- the same endpoint with an Arrow IPC stream of 10,000 records per request;
* **HTTP ceiling** -- the same bodies to ``POST /v1/bench/parse/T`` (mounted with
  ``LAKELOG_BENCH_ENDPOINTS=1``): the produce path (``api.produce_lane``) up to the queueing --
  read, authorize, parse, partition and validate -- and no commit;
* **storage ceiling** -- the library alone, in-process: the same record batches split by
  ``Log.split_by_partition`` with the front's sticky rule (KIP-794, ``switch_bytes`` = the
  accumulator's ``batch.size``) and appended through ``Log.accumulator()`` (linger.ms 5) by 8
  threads, no HTTP;
* **p99 at half rate** -- JSON produce paced at half the measured maximum rate (linger.ms 5); the
  run with the median p99 of ``repeats`` runs is reported;
* every produce run writes to a fresh 8-partition topic, so no run pays for another's files;
* **moto S3** -- JSON and Arrow produce against an ``s3://`` root on a moto server (its own process).

Latency is per request, from send to answer (for a whole batch, as the Java perf tool reports per
record); records/s counts acknowledged records; MB/s counts value bytes.  Each figure is the median
of ``repeats`` runs; the systems take turns within each repeat, so a noisy stretch of a shared machine
hits all of them alike.  The load generator shares the machine's CPUs with the front.
"""

from __future__ import annotations

import http.client
import io
import json
import contextlib
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pyarrow as pa

from bench import BenchContext, BenchResult, Goal, md_table, percentile

TITLE = "HTTP produce: the front vs its HTTP and storage ceilings"
REPO = Path(__file__).resolve().parent.parent
VALUE_BYTES = 100
PARTITIONS = 8
CLIENTS = 8
JSON_RECORDS = 1_000
ARROW_RECORDS = 10_000
ARROW = "application/vnd.apache.arrow.stream"
GOAL_JSON = 250_000
GOAL_ARROW = 1_000_000
GOAL_RATIO = 0.7
GOAL_P99_MS = 50.0
GOAL_V3_RATIO = 0.8


# -- bodies ------------------------------------------------------------------------------------
def _values(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
    base = "".join(rng.choice(alphabet) for _ in range(VALUE_BYTES + 64))
    return [base[i % 64:i % 64 + VALUE_BYTES] for i in range(n)]


def json_body(n: int, seed: int = 0) -> bytes:
    return json.dumps({"records": [{"value": v} for v in _values(n, seed)]}).encode()


def v3_body(n: int, seed: int = 0) -> bytes:
    """The same records as :func:`json_body`, as Confluent v3 produce records, concatenated."""
    return b"\n".join(json.dumps({"value": {"type": "STRING", "data": v}}).encode() for v in _values(n, seed))


def arrow_table(n: int, seed: int = 0) -> pa.Table:
    return pa.table({"value": pa.array(_values(n, seed), pa.string()).cast(pa.binary())})


def arrow_body(n: int, seed: int = 0) -> bytes:
    table = arrow_table(n, seed)
    sink = io.BytesIO()
    with pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    return sink.getvalue()


# -- processes ---------------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_http(url: str, proc: subprocess.Popen, timeout: float = 300.0) -> None:
    """Until ``url`` answers; fails at once if ``proc`` exits, else after ``timeout`` s (a front imports for minutes
    on a heavily loaded machine)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args} exited with {proc.returncode}")
        try:
            httpx.get(url, timeout=2.0)
            return
        except httpx.HTTPError:
            time.sleep(0.1)
    raise RuntimeError(f"{url} did not answer in {timeout}s")


STAGES = "lakelog_produce_stage_seconds"  # the front's histogram of where group commits spend their time
STAGE_NAMES = ("queue", "upload", "commit_wait", "commit", "handoff")


def stage_means(before: dict, after: dict) -> dict[str, float]:
    """Mean ms per group commit in each stage between two readings of a front's :data:`STAGES` histogram."""
    out = {}
    for stage, (count, total) in after.items():
        n0, s0 = before.get(stage, (0.0, 0.0))
        if count > n0:
            out[stage] = 1000 * (total - s0) / (count - n0)
    return out


class FrontProcess:
    """``lakelog serve`` in a child process with the bench endpoints on."""

    def __init__(self, root: str, workdir: Path, env: dict[str, str] | None = None, linger_ms: float = 5,
                 args: tuple[str, ...] = (), repo: Path = REPO) -> None:
        """``repo``: the checkout whose code the front runs (another one's, to compare two versions)."""
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        child_env = {**os.environ, **(env or {}), "LAKELOG_BENCH_ENDPOINTS": "1", "PYTHONPATH": str(repo),
                     "LAKELOG_LINGER_MS": str(linger_ms)}
        self.log = open(workdir / f"front-{self.port}.log", "wb")
        self.proc = subprocess.Popen([sys.executable, "-m", "lakelog.cli", "serve", "--root", root,
                                      "--port", str(self.port), *args], cwd=str(repo), env=child_env,
                                     stdout=self.log, stderr=subprocess.STDOUT)
        try:
            _wait_http(f"{self.url}/v1/health", self.proc)
        except BaseException:  # a front that never answered is not left behind
            self.close()
            raise

    def _samples(self, http: httpx.Client | None = None) -> list:
        """Every sample of the front's ``/metrics``, read through *http* (a client kept open by a caller that reads
        often) or a request of its own."""
        from prometheus_client.parser import text_string_to_metric_families

        url = f"{self.url}/metrics"
        text = (http.get(url) if http is not None else httpx.get(url, timeout=30)).text
        return [sample for metric in text_string_to_metric_families(text) for sample in metric.samples]

    def histogram(self, family: str, label: str) -> dict[str, tuple[float, float]]:
        """A histogram of the front's ``/metrics``: label value -> (observations, their sum)."""
        out: dict[str, list[float]] = {}
        for sample in self._samples():
            if label in sample.labels and sample.name in (f"{family}_count", f"{family}_sum"):
                out.setdefault(sample.labels[label], [0.0, 0.0])[sample.name.endswith("_sum")] += sample.value
        return {k: (v[0], v[1]) for k, v in out.items()}

    def counter(self, http: httpx.Client, family: str, **labels: str) -> float:
        """A counter of the front's ``/metrics`` (``<family>_total``), summed over the samples with *labels*."""
        return sum(sample.value for sample in self._samples(http)
                   if sample.name == f"{family}_total" and labels.items() <= sample.labels.items())

    def close(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


class MotoProcess:
    """A moto S3 server in its own process (so the load generator does not slow it) with one bucket."""

    BUCKET = "lakelog-bench"

    def __init__(self) -> None:
        self.port = _free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen([sys.executable, "-m", "bench.moto_server", "--port", str(self.port)],
                                     cwd=Path(__file__).resolve().parents[1],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            _wait_http(self.endpoint, self.proc)
        except BaseException:  # a server that never answered is not left behind
            self.proc.kill()
            self.proc.wait()
            raise
        self.client().create_bucket(Bucket=self.BUCKET)
        self.env = {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench", "AWS_REGION": "us-east-1",
                    "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL": self.endpoint, "AWS_ALLOW_HTTP": "true"}

    def client(self):
        """A boto3 S3 client straight to this server (no proxy)."""
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id="bench", aws_secret_access_key="bench",
                            region_name="us-east-1")

    def clear(self, prefix: str) -> int:
        """Delete every object under ``prefix`` (straight to moto, not through a latency proxy); how many.

        moto answers a LIST by scanning every key of the bucket, so each run's leftovers would slow the LISTs of
        the runs after it (several times over beside tens of thousands of keys); S3's LIST reads only its prefix.
        A benchmark that runs many loads on one server clears each run's root.
        """
        s3 = self.client()
        deleted = 0
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=self.BUCKET, Prefix=prefix):
            keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
            if keys:
                s3.delete_objects(Bucket=self.BUCKET, Delete={"Objects": keys, "Quiet": True})
                deleted += len(keys)
        return deleted

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)

    @contextlib.contextmanager
    def environment(self):
        """``os.environ`` set to reach this server (for a benchmark's own ``Log`` and Spark), restored after."""
        saved = {k: os.environ.get(k) for k in self.env}
        os.environ.update(self.env)
        try:
            yield
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


# -- load --------------------------------------------------------------------------------------
class Run:
    """One load run's per-request latencies (seconds) and its wall time."""

    def __init__(self, records_per_request: int, latencies: list[float], elapsed: float, errors: int) -> None:
        self.records_per_request = records_per_request
        self.latencies = latencies
        self.elapsed = elapsed
        self.errors = errors

    @property
    def records_per_s(self) -> float:
        return len(self.latencies) * self.records_per_request / self.elapsed

    @property
    def mb_per_s(self) -> float:
        return self.records_per_s * VALUE_BYTES / 1e6

    def latency_ms(self) -> dict[str, float]:
        ms = [x * 1000 for x in self.latencies]
        return {"avg": sum(ms) / len(ms), "max": max(ms), "p50": percentile(ms, 50), "p95": percentile(ms, 95),
                "p99": percentile(ms, 99), "p99.9": percentile(ms, 99.9)}


def _run_clients(clients: int, warm_up, request) -> tuple[list[float], float]:
    """Start ``clients`` threads; each runs ``warm_up(i)`` then, once all are warm, ``request(i)`` which
    returns that client's per-request latencies.  Returns all latencies and the wall time after the gate."""
    latencies: list[float] = []
    lock = threading.Lock()
    gate = threading.Barrier(clients + 1)

    def client(i: int) -> None:
        state = warm_up(i)
        gate.wait()
        mine = request(i, state)
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    gate.wait()
    started = time.perf_counter()
    for t in threads:
        t.join()
    return latencies, time.perf_counter() - started


def http_load(url: str, body: bytes, content_type: str, records: int, requests_per_client: int,
              clients: int = CLIENTS, interval_s: float | None = None, ok=None) -> Run:
    """``clients`` threads each POST ``body`` ``requests_per_client`` times (paced at ``interval_s`` if given).

    Each client holds one keep-alive connection of the standard library's ``http.client``: the load generator
    shares the 2 CPUs with the front, and it costs about a quarter of httpx's CPU per request.  ``ok``, if
    given, must also accept the answer's body for the request to count (v3: every record's report is a success).
    """
    errors = [0]
    lock = threading.Lock()
    target = urlsplit(url)
    headers = {"content-type": content_type}
    conns: list[http.client.HTTPConnection] = []

    def post(conn: http.client.HTTPConnection) -> int:
        conn.request("POST", target.path, body=body, headers=headers)
        resp = conn.getresponse()
        answer = resp.read()
        return resp.status if ok is None or ok(answer) else -1

    def warm_up(i: int) -> http.client.HTTPConnection:
        conn = http.client.HTTPConnection(target.hostname, target.port, timeout=120.0)
        conns.append(conn)
        post(conn)  # warm the connection
        return conn

    def requests(i: int, conn: http.client.HTTPConnection) -> list[float]:
        mine = []
        next_at = time.perf_counter() + (random.random() * interval_s if interval_s else 0.0)
        for _ in range(requests_per_client):
            if interval_s:
                delay = next_at - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
                next_at += interval_s
            t0 = time.perf_counter()
            if post(conn) != 200:
                with lock:
                    errors[0] += 1
                continue
            mine.append(time.perf_counter() - t0)
        return mine

    try:
        latencies, elapsed = _run_clients(clients, warm_up, requests)
    finally:
        for conn in conns:
            conn.close()
    return Run(records, latencies, elapsed, errors[0])


def library_load(root: str, table: pa.Table, requests_per_client: int, clients: int = CLIENTS) -> Run:
    """The storage ceiling: the front's append path (accumulator, linger.ms 5) without HTTP, in-process."""
    from lakelog import Log
    from lakelog.writer.records import normalize_records

    log = Log(root)
    topic = f"lib-{random.randrange(1 << 30):x}"
    log.create_topic(topic, PARTITIONS)
    acc = log.accumulator(linger_ms=5)
    records = normalize_records(table)

    def append() -> None:
        acc.append(topic, log.split_by_partition(topic, records, num_partitions=PARTITIONS,
                                                 switch_bytes=acc.batch_size)).result()

    def requests(i: int, _) -> list[float]:
        mine = []
        for _ in range(requests_per_client):
            t0 = time.perf_counter()
            append()
            mine.append(time.perf_counter() - t0)
        return mine

    latencies, elapsed = _run_clients(clients, lambda i: append(), requests)
    run = Run(records.num_rows, latencies, elapsed, 0)
    acc.close()
    log.close()
    return run


def _all_delivered(answer: bytes) -> bool:
    """Every record of a v3 request has a successful delivery report."""
    return answer.count(b'"error_code":200') == JSON_RECORDS


def _best(runs: list[Run]) -> Run:
    """The median run by throughput (its latencies are reported with it)."""
    return sorted(runs, key=lambda r: r.records_per_s)[len(runs) // 2]


def _create_topic(url: str) -> str:
    from lakelog.client import Admin

    name = f"perf-{random.randrange(1 << 40):x}"
    with Admin(url, timeout=60) as admin:
        admin.create_topic(name, PARTITIONS)
    return name


def _row(name: str, run: Run) -> list[str]:
    lat = run.latency_ms()
    return [name, f"{run.records_per_s:,.0f}", f"{run.mb_per_s:.1f}", f"{lat['avg']:.1f}", f"{lat['max']:.1f}",
            f"{lat['p50']:.1f}", f"{lat['p95']:.1f}", f"{lat['p99']:.1f}", f"{lat['p99.9']:.1f}",
            str(len(run.latencies)), str(run.errors)]


def run(ctx: BenchContext) -> BenchResult:
    json_requests = ctx.size(60, 3)
    arrow_requests = ctx.size(12, 2)
    jbody, abody, vbody = json_body(JSON_RECORDS), arrow_body(ARROW_RECORDS), v3_body(JSON_RECORDS)
    results: dict[str, Run] = {}

    root = str(ctx.workdir / "front-root")
    ctx.progress(f"local front on {root}")
    front = FrontProcess(root, ctx.workdir)
    try:
        def produce_url() -> str:  # a fresh topic per run: results do not depend on what ran before
            return f"{front.url}/v1/topics/{_create_topic(front.url)}/records"

        cluster = httpx.get(f"{front.url}/v3/clusters", timeout=60).json()["data"][0]["cluster_id"]

        def v3_url() -> str:
            return f"{front.url}/v3/clusters/{cluster}/topics/{_create_topic(front.url)}/records"

        parse_url = f"{front.url}/v1/bench/parse/{_create_topic(front.url)}"
        series: dict[str, list[Run]] = {k: [] for k in ("json", "v3_json", "json_parse", "json_lib", "arrow",
                                                         "arrow_parse", "arrow_lib")}
        # Every system once per repeat, interleaved, so a noisy stretch of the machine hits all of them alike.
        for i in range(ctx.repeats):
            ctx.progress(f"repeat {i + 1}/{ctx.repeats}")
            series["json"].append(http_load(produce_url(), jbody, "application/json", JSON_RECORDS, json_requests))
            series["v3_json"].append(http_load(v3_url(), vbody, "application/json", JSON_RECORDS, json_requests,
                                               ok=_all_delivered))
            series["json_parse"].append(http_load(parse_url, jbody, "application/json", JSON_RECORDS, json_requests))
            series["json_lib"].append(library_load(str(ctx.workdir / f"lib-json-{i}"), arrow_table(JSON_RECORDS),
                                                   json_requests))
            series["arrow"].append(http_load(produce_url(), abody, ARROW, ARROW_RECORDS, arrow_requests))
            series["arrow_parse"].append(http_load(parse_url, abody, ARROW, ARROW_RECORDS, arrow_requests))
            series["arrow_lib"].append(library_load(str(ctx.workdir / f"lib-arrow-{i}"), arrow_table(ARROW_RECORDS),
                                                    arrow_requests))
        for k, runs in series.items():
            results[k] = _best(runs)
        half_rate = results["json"].records_per_s / 2
        interval = CLIENTS * JSON_RECORDS / half_rate
        ctx.progress(f"JSON at half rate ({half_rate:,.0f} records/s), {ctx.repeats} runs")
        half = [http_load(produce_url(), jbody, "application/json", JSON_RECORDS,
                          ctx.size(max(30, int(10 / interval)), 3), interval_s=interval) for _ in range(ctx.repeats)]
        results["json_half"] = sorted(half, key=lambda r: r.latency_ms()["p99"])[len(half) // 2]  # median p99
    finally:
        front.close()

    ctx.progress("moto S3 root")
    moto = MotoProcess()
    try:
        s3front = FrontProcess(f"s3://{MotoProcess.BUCKET}/bench", ctx.workdir, env=moto.env)
        try:
            url = f"{s3front.url}/v1/topics/{_create_topic(s3front.url)}/records"
            results["s3_json"] = http_load(url, jbody, "application/json", JSON_RECORDS, ctx.size(20, 2))
            url = f"{s3front.url}/v1/topics/{_create_topic(s3front.url)}/records"
            results["s3_arrow"] = http_load(url, abody, ARROW, ARROW_RECORDS, ctx.size(6, 1))
        finally:
            s3front.close()
    finally:
        moto.close()

    return _report(results)


def _report(r: dict[str, Run]) -> BenchResult:
    names = [("json", "JSON produce (1,000/request, 8 clients)"),
             ("v3_json", "v3 JSON produce (Confluent REST v3, 1,000/request, 8 clients)"),
             ("json_parse", "JSON, HTTP ceiling (parse only)"),
             ("json_lib", "JSON-sized batches, storage ceiling (library)"),
             ("arrow", "Arrow produce (10,000/request, 8 clients)"),
             ("arrow_parse", "Arrow, HTTP ceiling (parse only)"),
             ("arrow_lib", "Arrow-sized batches, storage ceiling (library)"),
             ("json_half", "JSON at half the max rate, linger.ms=5"),
             ("s3_json", "moto S3: JSON produce"),
             ("s3_arrow", "moto S3: Arrow produce")]
    headers = ["system", "records/s", "MB/s", "avg ms", "max ms", "p50", "p95", "p99", "p99.9", "requests", "errors"]
    table = md_table(headers, [_row(label, r[k]) for k, label in names])
    rps = {k: v.records_per_s for k, v in r.items()}
    json_ceiling = min(rps["json_parse"], rps["json_lib"])
    arrow_ceiling = min(rps["arrow_parse"], rps["arrow_lib"])
    p99_half = r["json_half"].latency_ms()["p99"]
    goals = [
        Goal("JSON produce >= 250,000 records/s", rps["json"] >= GOAL_JSON, f"{rps['json']:,.0f} records/s"),
        Goal("Arrow produce >= 1,000,000 records/s", rps["arrow"] >= GOAL_ARROW, f"{rps['arrow']:,.0f} records/s"),
        Goal("JSON >= 0.7x the lower of its ceilings", rps["json"] >= GOAL_RATIO * json_ceiling,
             f"{rps['json'] / json_ceiling:.2f}x of {json_ceiling:,.0f} records/s"),
        Goal("Arrow >= 0.7x the lower of its ceilings", rps["arrow"] >= GOAL_RATIO * arrow_ceiling,
             f"{rps['arrow'] / arrow_ceiling:.2f}x of {arrow_ceiling:,.0f} records/s"),
        Goal("p99 <= 50 ms at half the max rate (linger.ms=5)", p99_half <= GOAL_P99_MS, f"p99 {p99_half:.1f} ms"),
        Goal("v3 JSON produce >= 0.8x /v1 JSON produce (same run)", rps["v3_json"] >= GOAL_V3_RATIO * rps["json"],
             f"{rps['v3_json'] / rps['json']:.2f}x ({rps['v3_json']:,.0f} vs {rps['json']:,.0f} records/s)"),
    ]
    summary = [f"{label}: {rps[k]:,.0f} records/s, p99 {r[k].latency_ms()['p99']:.1f} ms" for k, label in names]
    serial = {k: 1 / (1 / rps[f"{k}_parse"] + 1 / rps[f"{k}_lib"]) for k in ("json", "arrow")}
    markdown = "\n".join([
        table, "", "Latency is per request (send → answer), in ms; a request's records share it.",
        "Ceilings: *HTTP* = the same bodies to the parse-only endpoint (no commit); "
        "*storage* = the library's accumulator path in-process, no HTTP.", "",
        "**Where the time goes.** Each client waits for its answer before sending again, so a run's rate "
        "is 8 / (a request's latency), and a produce request's latency is its parse latency (HTTP, parsing, "
        "queueing behind the other clients' requests) *plus* its commit latency (linger.ms, the commit in "
        "flight, its own commit), all under the front's one GIL. The two ceilings measure those two latencies "
        f"alone; composed in series they give {serial['json']:,.0f} records/s for JSON and "
        f"{serial['arrow']:,.0f} for Arrow, and the front reached {rps['json'] / serial['json']:.2f}x and "
        f"{rps['arrow'] / serial['arrow']:.2f}x of that."])
    return BenchResult(markdown=markdown, summary=summary,
                       metrics={f"{k}_records_per_s": v for k, v in rps.items()} | {"json_half_p99_ms": p99_half},
                       goals=goals)
