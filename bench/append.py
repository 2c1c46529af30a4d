"""Append throughput: lakelog's append path versus plain ``deltalake.write_deltalake``.

Every system appends the same Arrow batch (16-byte keys, 100-byte values,
CreateTime timestamps) to a fresh table on local disk, one partition:

* **lakelog, one commit per batch** -- ``Log.append_batches(topic, [PartitionBatch(0, batch)])``
  in a loop: validation, offset assignment, one Parquet segment, one fenced
  Delta commit, index update.  The batch is normalised to lakelog's input
  schema once, outside the timing (as a producer hands it over).
* **write_deltalake** -- ``write_deltalake(target, table, mode="append",
  partition_by=["partition"])`` of the same records already in the topic's
  table schema (offsets precomputed), through a ``DeltaTable`` handle (the
  handle keeps its snapshot; no re-open per call) and through the URI (re-opens
  the table per call).  The faster of the two is the baseline of the ratio.
* **lakelog, delta-rs commit** -- the same, with every commit through delta-rs's
  ``create_write_transaction`` + ``update_incremental`` (the S3 path), for comparison.
* **lakelog, group commit** -- several producer threads append batches through
  one ``RecordAccumulator`` (``linger.ms`` 5), each with a few futures in
  flight, to a 4-partition topic: commits cover many batches.

Records/s count records committed; MB/s counts key + value payload bytes.
Each figure is the median of ``repeats`` runs, systems interleaved per run.
Also measured: where one commit's time goes, and Parquet codecs.
"""

from __future__ import annotations

import random
import threading
import time
from collections import deque
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from bench import BenchContext, BenchResult, Goal, md_table, median

TITLE = "Append throughput: lakelog vs write_deltalake"
KEY_BYTES = 16
VALUE_BYTES = 100
BATCH_SIZES = (1_000, 10_000, 100_000)
GOAL_RATIO = 0.8
GOAL_RECORDS_PER_S = 1_000_000
_ALPHABET = np.frombuffer(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/", dtype=np.uint8)


# -- data ------------------------------------------------------------------------------------
def make_batch(n: int, seed: int = 0) -> pa.Table:
    """``n`` records: 16-byte keys, 100-byte base64-alphabet values, epoch-ms timestamps."""
    rng = np.random.default_rng(seed)
    keys = np.frombuffer(b"".join(b"key-%012d" % i for i in range(n)), dtype=np.uint8)
    values = _ALPHABET[rng.integers(0, len(_ALPHABET), size=n * VALUE_BYTES)]
    now_ms = int(time.time() * 1000)

    def binary(data: np.ndarray, width: int) -> pa.Array:
        offsets = pa.array(np.arange(0, (n + 1) * width, width, dtype=np.int32))
        return pa.Array.from_buffers(pa.binary(), n, [None, offsets.buffers()[1], pa.py_buffer(data.tobytes())])

    return pa.table({
        "key": binary(keys, KEY_BYTES),
        "value": binary(values, VALUE_BYTES),
        "timestamp": pa.array(now_ms - n + np.arange(n, dtype=np.int64)),
    })


def as_table_rows(batch: pa.Table) -> pa.Table:
    """``batch`` in the topic table's schema (what lakelog would store), for write_deltalake."""
    from lakelog.storage.record_schema import TABLE_SCHEMA, TIMESTAMP_TYPE

    n = batch.num_rows
    return pa.table({
        "partition": pa.array(np.zeros(n, np.int32)),
        "offset": pa.array(np.arange(n, dtype=np.int64)),
        "timestamp": pa.array(batch.column("timestamp").to_numpy() * 1000).view(TIMESTAMP_TYPE),
        "timestampType": pa.array(np.zeros(n, np.int32)),
        "key": batch.column("key"),
        "value": batch.column("value"),
        "headers": pa.nulls(n, TABLE_SCHEMA.field("headers").type),
        "producerId": pa.array(np.full(n, -1, np.int64)),
        "producerEpoch": pa.array(np.full(n, -1, np.int16)),
        "sequence": pa.array(np.full(n, -1, np.int32)),
    }, schema=TABLE_SCHEMA)


def _now() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def _since(started: tuple[float, float]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process -- all its threads, delta-rs's included) since ``started``."""
    return time.perf_counter() - started[0], time.process_time() - started[1]


def _check(results) -> None:
    from lakelog import AppendResult

    for r in results:
        if not isinstance(r, AppendResult):
            raise RuntimeError(f"append failed during the benchmark: {r!r}")


# -- systems -----------------------------------------------------------------------------------
def lakelog_per_commit(workdir: Path, records: pa.Table, commits: int, *,
                       direct: bool = True) -> tuple[float, float]:
    """(wall, CPU) seconds for ``commits`` appends of ``records``, one commit each (after one warm-up append).

    ``direct=False`` forces every commit through delta-rs (the path of a table whose protocol asks more of a
    writer), for comparison.
    """
    from lakelog import Log, PartitionBatch
    from lakelog.writer import table_commit

    saved, table_commit.DIRECT_COMMITS = table_commit.DIRECT_COMMITS, direct
    try:
        log = Log(str(workdir))
        log.create_topic("bench", 1)
        batch = [PartitionBatch(0, records)]
        _check(log.append_batches("bench", batch))
        started = _now()
        for _ in range(commits):
            _check(log.append_batches("bench", batch))
        return _since(started)
    finally:
        table_commit.DIRECT_COMMITS = saved


def write_deltalake_per_commit(workdir: Path, table: pa.Table, commits: int, *,
                               handle: bool) -> tuple[float, float]:
    """(wall, CPU) seconds for ``commits`` plain ``write_deltalake`` appends (after creating the table and one warm-up)."""
    from deltalake import DeltaTable, write_deltalake

    uri = str(workdir)
    write_deltalake(uri, table, mode="append", partition_by=["partition"])
    target = DeltaTable(uri) if handle else uri
    write_deltalake(target, table, mode="append", partition_by=["partition"])
    started = _now()
    for _ in range(commits):
        write_deltalake(target, table, mode="append", partition_by=["partition"])
    return _since(started)


def lakelog_group_commit(workdir: Path, records: pa.Table, batches: int, *, producers: int = 4,
                         partitions: int = 4, in_flight: int = 4) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds, commits) for ``producers`` threads appending ``batches`` batches in total via the accumulator."""
    from lakelog import Log, PartitionBatch
    from lakelog.errors import ThrottlingQuotaExceeded

    log = Log(str(workdir))
    log.create_topic("bench", partitions)
    commits: list[int] = []
    acc = log.accumulator(linger_ms=5, on_commit=lambda topic, recs, nbytes, secs: commits.append(recs))
    _check(acc.append("bench", [PartitionBatch(p, records) for p in range(partitions)]).result())
    commits.clear()
    errors: list[BaseException] = []

    def produce(i: int, count: int) -> None:
        pending: deque = deque()
        try:
            for _ in range(count):
                while True:
                    try:
                        pending.append(acc.append("bench", [PartitionBatch(i % partitions, records)]))
                        break
                    except ThrottlingQuotaExceeded:  # buffer.memory full: wait for our oldest, or back off
                        if pending:
                            _check(pending.popleft().result())
                        else:
                            time.sleep(0.001)
                if len(pending) >= in_flight:
                    _check(pending.popleft().result())
            while pending:
                _check(pending.popleft().result())
        except BaseException as e:  # surfaced after join
            errors.append(e)

    share = [batches // producers + (1 if i < batches % producers else 0) for i in range(producers)]
    threads = [threading.Thread(target=produce, args=(i, share[i])) for i in range(producers)]
    started = _now()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    acc.flush()
    wall, cpu = _since(started)
    acc.close()
    if errors:
        raise errors[0]
    return wall, cpu, len(commits)


# -- where one commit's time goes ----------------------------------------------------------------
# (label, module, owner attribute path, function): each is wrapped with a timer for the measurement;
# a piece that no longer exists is skipped.  Indented pieces run inside the piece above.
_PIECES = [
    ("validate records", "lakelog.writer.append_plan", "", "validate_records"),
    ("build segment columns", "lakelog.writer.committer", "", "segment_table"),
    ("write segment (Parquet + stats)", "lakelog.writer.segment_writer", "", "write_segment"),
    ("  Parquet write (pyarrow)", "pyarrow.parquet", "", "write_table"),
    ("  add-action stats", "lakelog.writer.segment_writer", "", "segment_stats"),
    ("commit (total)", "lakelog.writer.committer", "Committer", "_commit"),
    ("  delta-rs create_write_transaction", "deltalake", "DeltaTable", "create_write_transaction"),
    ("  delta-rs update_incremental (direct: in the background checkpoint)", "deltalake", "DeltaTable",
     "update_incremental"),
    ("  our Delta log tail replay", "lakelog.writer.table_commit", "", "advance"),
    ("  direct commit (encode, put-if-absent, apply)", "lakelog.writer.table_commit", "TopicTable",
     "commit_direct"),
    ("    put-if-absent of the commit file", "lakelog.writer.table_commit", "", "put_if_absent"),
    ("  index/snapshot update", "lakelog.storage.topic_snapshot", "TopicSnapshot", "apply"),
    ("serialise the Arrow index (every 64 commits)", "lakelog.storage.topic_snapshot", "TopicSnapshot", "to_ipc_bytes"),
    ("store the Arrow index (background thread)", "lakelog.writer.checkpointer", "", "store_index"),
    ("delta-rs checkpoint every 100 versions (direct: background thread)", "deltalake", "DeltaTable",
     "create_checkpoint"),
]


@contextmanager
def timed_pieces():
    """Wrap the functions of :data:`_PIECES` with timers; yields {label: seconds}, restores them after."""
    import importlib

    totals: dict[str, float] = {}
    restore = []
    for label, module, owner_name, attr in _PIECES:
        owner = importlib.import_module(module)
        if owner_name:
            owner = getattr(owner, owner_name, None)
        original = getattr(owner, attr, None) if owner is not None else None
        if original is None:
            continue
        totals[label] = 0.0

        def timed(*args, _original=original, _label=label, **kwargs):
            started = time.perf_counter()
            try:
                return _original(*args, **kwargs)
            finally:
                totals[_label] += time.perf_counter() - started

        setattr(owner, attr, timed)
        restore.append((owner, attr, original))
    try:
        yield totals
    finally:
        for owner, attr, original in reversed(restore):
            setattr(owner, attr, original)


def time_breakdown(workdir: Path, records: pa.Table, commits: int, *,
                   direct: bool = True) -> tuple[float, dict[str, float]]:
    """(ms per commit, {piece: ms per commit}) over ``commits`` lakelog appends on a fresh topic."""
    from lakelog import Log, PartitionBatch
    from lakelog.writer import table_commit

    saved, table_commit.DIRECT_COMMITS = table_commit.DIRECT_COMMITS, direct
    try:
        log = Log(str(workdir))
        log.create_topic("bench", 1)
        batch = [PartitionBatch(0, records)]
        _check(log.append_batches("bench", batch))
        with timed_pieces() as totals:
            started = time.perf_counter()
            for _ in range(commits):
                _check(log.append_batches("bench", batch))
            total = time.perf_counter() - started
    finally:
        table_commit.DIRECT_COMMITS = saved
    return total / commits * 1000, {k: v / commits * 1000 for k, v in totals.items() if v > 0}


# -- Parquet codecs ----------------------------------------------------------------------------
CODECS = ("none", "snappy", "lz4", "zstd")


def json_like_batch(n: int, seed: int = 0) -> pa.Table:
    """Like :func:`make_batch` but with compressible 100-byte JSON-ish values (small vocabularies)."""
    rng = random.Random(seed)
    events = ["click", "view", "purchase", "signup", "logout"]
    values = []
    for i in range(n):
        v = (b'{"user":%06d,"event":"%s","page":"/p/%04d","amount":%8.2f,"ok":true}'
             % (rng.randrange(10**6), events[i % 5].encode(), rng.randrange(10**4), rng.random() * 1000))
        values.append(v.ljust(VALUE_BYTES, b" ")[:VALUE_BYTES])
    batch = make_batch(n, seed)
    return batch.set_column(1, "value", pa.array(values, pa.binary()))


def codec_comparison(workdir: Path, batches: dict[str, pa.Table], repeats: int) -> list[list[object]]:
    """Write/read speed and size of one segment per payload kind and compression codec (new file per write)."""
    from lakelog.storage.record_schema import FILE_SCHEMA
    from lakelog.writer.segment_writer import ROW_GROUP_SIZE, STATS_COLUMNS

    rows = []
    for kind, batch in batches.items():
        table = as_table_rows(batch).drop(["partition"]).cast(FILE_SCHEMA)
        payload = batch.num_rows * (KEY_BYTES + VALUE_BYTES)
        writes: dict[str, list[float]] = {c: [] for c in CODECS}
        reads: dict[str, list[float]] = {c: [] for c in CODECS}
        sizes: dict[str, int] = {}
        for rep in range(max(3 * repeats, 3)):
            for codec in CODECS:  # interleaved, so noise spreads over all codecs
                path = str(workdir / f"codec-{kind.split()[0]}-{codec}-{rep}.parquet")
                started = time.perf_counter()
                pq.write_table(table, path, compression=codec, use_dictionary=False,
                               write_statistics=STATS_COLUMNS, row_group_size=ROW_GROUP_SIZE)
                writes[codec].append(time.perf_counter() - started)
                started = time.perf_counter()
                pq.read_table(path)
                reads[codec].append(time.perf_counter() - started)
                sizes[codec] = Path(path).stat().st_size
        for codec in CODECS:
            w, r = writes[codec], reads[codec]
            rows.append([kind, codec, f"{payload / min(w) / 1e6:.0f} / {payload / median(w) / 1e6:.0f}",
                         f"{payload / min(r) / 1e6:.0f} / {payload / median(r) / 1e6:.0f}",
                         f"{sizes[codec] / 1e6:.2f}", f"{sizes[codec] / payload:.2f}"])
    return rows


# -- the benchmark ----------------------------------------------------------------------------
def run(ctx: BenchContext) -> BenchResult:
    from lakelog.writer.records import normalize_records

    sizes = [ctx.size(n, max(n // 100, 10)) for n in BATCH_SIZES]
    # commits per measurement: enough to amortise noise, ~1-3 s of work per system and size
    commit_counts = {s: c for s, c in zip(sizes, (ctx.size(100, 3), ctx.size(60, 3), ctx.size(20, 2)))}
    group_batches = {s: c for s, c in zip(sizes, (ctx.size(400, 8), ctx.size(200, 8), ctx.size(24, 4)))}
    per_commit: dict[tuple[str, int], list[tuple[float, float]]] = {}  # records/s (wall, CPU)
    group: dict[int, list[tuple[float, float, int]]] = {}
    data = {}
    for n in sizes:
        batch = make_batch(n)
        data[n] = (batch, normalize_records(batch), as_table_rows(batch))
    run_id = 0
    for rep in range(ctx.repeats):
        for n in sizes:
            batch, records, rows = data[n]
            commits = commit_counts[n]
            systems = [
                ("lakelog", lambda d: lakelog_per_commit(d, records, commits)),
                ("lakelog, delta-rs commit", lambda d: lakelog_per_commit(d, records, commits, direct=False)),
                ("write_deltalake(DeltaTable)", lambda d: write_deltalake_per_commit(d, rows, commits, handle=True)),
                ("write_deltalake(uri)", lambda d: write_deltalake_per_commit(d, rows, commits, handle=False)),
            ]
            systems = systems[rep % len(systems):] + systems[:rep % len(systems)]  # rotate the order per run
            for name, measure in systems:
                run_id += 1
                wall, cpu = measure(ctx.workdir / f"r{run_id}")
                per_commit.setdefault((name, n), []).append((n * commits / wall, n * commits / cpu))
            run_id += 1
            wall, cpu, ncommits = lakelog_group_commit(ctx.workdir / f"r{run_id}", records, group_batches[n])
            group.setdefault(n, []).append((n * group_batches[n] / wall, n * group_batches[n] / cpu, ncommits))
            ctx.progress(f"run {rep + 1}/{ctx.repeats}, batch {n}: lakelog {per_commit[('lakelog', n)][-1][0]:,.0f} "
                         f"rec/s, write_deltalake(DeltaTable) "
                         f"{per_commit[('write_deltalake(DeltaTable)', n)][-1][0]:,.0f} rec/s, group commit "
                         f"{group[n][-1][0]:,.0f} rec/s")

    def med(name: str, n: int, i: int = 0) -> float:
        return median([m[i] for m in per_commit[(name, n)]])

    mb = (KEY_BYTES + VALUE_BYTES) / 1e6
    rows, group_rows, metrics, summary = [], [], {}, []
    ratios = {}
    for n in sizes:
        ll, lr = med("lakelog", n), med("lakelog, delta-rs commit", n)
        dh, du = med("write_deltalake(DeltaTable)", n), med("write_deltalake(uri)", n)
        base = max(dh, du)
        ll_cpu = med("lakelog", n, 1)
        base_cpu = max(med("write_deltalake(DeltaTable)", n, 1), med("write_deltalake(uri)", n, 1))
        gc, gc_cpu = median([g[0] for g in group[n]]), median([g[1] for g in group[n]])
        gc_commits = median([g[2] for g in group[n]])
        ratios[n] = ll / base
        metrics.update({f"lakelog_{n}": ll, f"lakelog_delta_rs_commit_{n}": lr, f"write_deltalake_handle_{n}": dh,
                        f"write_deltalake_uri_{n}": du, f"ratio_{n}": ll / base, f"lakelog_cpu_{n}": ll_cpu,
                        f"write_deltalake_cpu_{n}": base_cpu, f"group_commit_{n}": gc,
                        f"group_commit_cpu_{n}": gc_cpu, f"ratio_group_{n}": gc / base})
        rows.append([f"{n:,}", f"{ll:,.0f}", f"{ll * mb:.0f}", f"{lr:,.0f}", f"{dh:,.0f}", f"{du:,.0f}",
                     f"{base * mb:.0f}", f"**{ll / base:.2f}**", f"{ll_cpu:,.0f}", f"{base_cpu:,.0f}",
                     f"{ll_cpu / base_cpu:.2f}"])
        group_rows.append([f"{n:,}", f"{gc:,.0f}", f"{gc * mb:.0f}", f"{gc_commits:.0f}",
                           f"{group_batches[n] / max(gc_commits, 1):.1f}", f"**{gc / base:.2f}**", f"{gc_cpu:,.0f}"])
        summary.append(f"batch {n:>7,}: lakelog {ll:>11,.0f} rec/s ({ll * mb:5.0f} MB/s) | delta-rs commit "
                       f"{lr:>11,.0f} | write_deltalake handle {dh:>11,.0f} uri {du:>11,.0f} | ratio "
                       f"{ll / base:.2f} | group commit {gc:>11,.0f} rec/s, ratio {gc / base:.2f}")

    prof_n = sizes[1]
    prof_commits = max(commit_counts[prof_n], ctx.size(150, 3))  # past a checkpoint (every 100 versions)
    ms, pieces = time_breakdown(ctx.workdir / "profile", data[prof_n][1], prof_commits)
    ms_rs, pieces_rs = time_breakdown(ctx.workdir / "profile-rs", data[prof_n][1], prof_commits, direct=False)
    prof_rows = []
    for label, _, _, _ in _PIECES:
        if label in pieces or label in pieces_rs:
            cells = [f"{p[label]:.2f} ({100 * p[label] / total:.0f}%)" if label in p else "-"
                     for p, total in ((pieces, ms), (pieces_rs, ms_rs))]
            prof_rows.append([label.replace("  ", "&nbsp;&nbsp;"), *cells])
    prof_rows.append(["**total per commit**", f"**{ms:.2f}**", f"**{ms_rs:.2f}**"])
    metrics.update({"breakdown_direct_ms": ms, "breakdown_delta_rs_ms": ms_rs})
    codecs = codec_comparison(ctx.workdir, {"random base64": data[sizes[-1]][0],
                                            "JSON-like": json_like_batch(sizes[-1])}, 1 if ctx.quick else ctx.repeats)

    ten_k = sizes[1]
    goals = [
        Goal(f"append >= {GOAL_RATIO}x of plain write_deltalake at every batch size (one commit per batch)",
             all(r >= GOAL_RATIO for r in ratios.values()),
             ", ".join(f"{n:,}: {r:.2f}x" for n, r in ratios.items())),
        Goal(f">= {GOAL_RECORDS_PER_S:,} records/s at {ten_k:,}-record batches, one commit per batch",
             metrics[f"lakelog_{ten_k}"] >= GOAL_RECORDS_PER_S,
             f"{metrics[f'lakelog_{ten_k}']:,.0f} records/s (per CPU-second: {metrics[f'lakelog_cpu_{ten_k}']:,.0f})"),
        Goal(f">= {GOAL_RECORDS_PER_S:,} records/s at {ten_k:,}-record batches, group commit",
             metrics[f"group_commit_{ten_k}"] >= GOAL_RECORDS_PER_S,
             f"{metrics[f'group_commit_{ten_k}']:,.0f} records/s (per CPU-second: "
             f"{metrics[f'group_commit_cpu_{ten_k}']:,.0f})"),
    ]
    markdown = "\n\n".join([
        f"Medians of {ctx.repeats} interleaved runs (fresh table each); commits per measurement: "
        + ", ".join(f"{commit_counts[n]} at {n:,}" for n in sizes)
        + ". Ratio = lakelog / the faster write_deltalake usage. MB/s = key + value payload bytes. "
        "*rec/CPU-s* = records per second of this process's CPU time (all threads, delta-rs's included): "
        "less sensitive to other load on the machine than wall-clock rates.",
        "**One commit per batch** (`Log.append_batches` vs `write_deltalake`):",
        md_table(["batch records", "lakelog rec/s", "lakelog MB/s", "lakelog, delta-rs commit rec/s",
                  "write_deltalake(DeltaTable) rec/s", "write_deltalake(uri) rec/s", "baseline MB/s", "ratio",
                  "lakelog rec/CPU-s", "write_deltalake rec/CPU-s", "CPU ratio"], rows),
        "**Group commit** (4 producer threads, 4 partitions, linger.ms 5, batch.size 1 MiB, up to 4 futures in "
        "flight per producer; " + ", ".join(f"{group_batches[n]} batches at {n:,}" for n in sizes)
        + "; ratio against the same write_deltalake baseline):",
        md_table(["batch records", "rec/s", "MB/s", "commits", "batches/commit", "ratio", "rec/CPU-s"], group_rows),
        f"**Where one commit's time goes** (lakelog, {prof_n:,}-record batches, {prof_commits} commits on a fresh "
        "topic, each piece timed by a wrapper, ms per commit; indented rows are inside the row above). Direct commit "
        "is lakelog's path (put-if-absent locally, a conditional PUT on object stores); delta-rs commit is "
        "`create_write_transaction` + `update_incremental`, the path for a table whose protocol asks more of a "
        "writer (writer version 3 or later, writer features) and the only one before this benchmark.",
        md_table(["piece", "direct commit ms (share)", "delta-rs commit ms (share)"], prof_rows),
        f"**Parquet codecs** for one {sizes[-1]:,}-record segment, the benchmark's random values and compressible "
        "JSON-like ones (payload MB/s, best / median of the repetitions -- the best is the least disturbed by "
        "other load; size relative to the key + value payload; statistics on offset/timestamp, no dictionary, "
        "as the segment writer does):",
        md_table(["values", "codec", "write MB/s best / median", "read MB/s best / median", "file MB",
                  "size/payload"], codecs),
    ])
    return BenchResult(markdown=markdown, summary=summary, metrics=metrics, goals=goals)
