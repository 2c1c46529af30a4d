"""What validating Arrow produce bodies costs: the front's parse path with and without the validation.

The front reads an Arrow body with :func:`api.arrow_body.read_arrow_body` (bound from the headers, shape
check, ``validate(full=True)``); before it, it read the body with ``pa.ipc.open_stream(...).read_all()``
alone. Both readers run here in one process on the same bodies (the HTTP benchmark's: 10,000 records of
100-byte values, plain and LZ4-compressed), taking turns, ``repeats`` x 5 rounds; each figure is the median.

* **reader**: the two readers alone, per request body;
* **parse path**: ``ProduceService.parse`` of the same request (read, shape, partition, validate the
  records against the topic) -- everything the front does with a body before queueing it. The rate
  without validation is the parse path minus the measured difference of the readers.

The ratio is the parse path's request rate with validation over the rate without (goal >= 0.9x).
"""

from __future__ import annotations

import time
from pathlib import Path

import pyarrow as pa

from bench import BenchContext, BenchResult, Goal, md_table, median

TITLE = "Arrow produce bodies: the cost of full validation"
RECORDS = 10_000
ROUNDS = 5
GOAL_RATIO = 0.9


def _time(fn, n: int) -> float:
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n


def run(ctx: BenchContext) -> BenchResult:
    from api.arrow_body import read_arrow_body
    from api.produce_request import ArrowParams, ProduceService
    from bench.http_produce import arrow_table
    from lakelog import Log
    from lakelog.broker.authorizer import Authorizer
    from lakelog.broker.produce import ProducePipeline

    records = max(100, int(RECORDS * ctx.scale)) if not ctx.quick else 500
    table = arrow_table(records)
    bodies = {}
    for codec in (None, "lz4"):
        import io

        sink = io.BytesIO()
        options = pa.ipc.IpcWriteOptions(compression=codec) if codec else None
        with pa.ipc.new_stream(sink, table.schema, options=options) as w:
            w.write_table(table)
        bodies[codec or "plain"] = sink.getvalue()

    log = Log(str(Path(ctx.workdir) / "root"))
    log.create_topic("t", 8)
    service = ProduceService(ProducePipeline(log, log.accumulator(), _Metadata(log), Authorizer.open(), None))
    snap = log.snapshot("t")
    limit = 64 << 20
    per_call = 5 if ctx.quick else 40
    rounds = 1 if ctx.quick else ctx.repeats * ROUNDS
    times: dict[tuple[str, str], list[float]] = {}
    for _ in range(rounds):
        for name, body in bodies.items():
            for label, fn in (
                ("unvalidated reader", lambda b=body: pa.ipc.open_stream(pa.py_buffer(b)).read_all()),
                ("validating reader", lambda b=body: read_arrow_body(b, max_decoded_bytes=limit)),
                ("parse path", lambda b=body: service.parse("t", b, "application/vnd.apache.arrow.stream",
                                                             ArrowParams(), snap)),
            ):
                times.setdefault((name, label), []).append(_time(fn, per_call))
    log.close()

    rows, ratios = [], {}
    for name in bodies:
        plain = median(times[(name, "unvalidated reader")])
        checked = median(times[(name, "validating reader")])
        parse = median(times[(name, "parse path")])
        without = parse - (checked - plain)
        ratios[name] = without / parse
        rows.append([name, f"{len(bodies[name]):,}", f"{plain * 1e3:.3f}", f"{checked * 1e3:.3f}",
                     f"{parse * 1e3:.3f}", f"{records / parse:,.0f}", f"{records / without:,.0f}",
                     f"{ratios[name]:.3f}x"])
    header = ["body", "bytes", "unvalidated reader (ms)", "validating reader (ms)", "parse path (ms)",
              "records/s with validation", "records/s without", "ratio"]
    text = (f"{records:,} records of 100-byte values per body; medians of {rounds} interleaved rounds of "
            f"{per_call} calls each.\n\n" + md_table(header, rows))
    goals = [Goal(f"Arrow parse path with full validation >= {GOAL_RATIO}x of without ({name} body)",
                  ratio >= GOAL_RATIO, f"{ratio:.3f}x") for name, ratio in ratios.items()]
    return BenchResult(markdown=text, summary=[f"{n}: {r:.3f}x" for n, r in ratios.items()],
                       metrics={f"ratio_{n}": r for n, r in ratios.items()}, goals=goals)


class _Metadata:
    """The front's topic metadata cache, reduced to what ``ProduceService`` asks of it here."""

    def __init__(self, log) -> None:
        self.log = log

    def get(self, topic: str, fresh: bool = False):
        return self.log.snapshot(topic)
