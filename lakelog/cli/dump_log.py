"""``lakelog dump-log TOPIC [--partition P] [--records]``: a partition's segments, like kafka-dump-log.

Per partition: the Delta version, log start offset and high watermark, then
one line per live segment (base offset, last offset, record count, bytes,
min/max timestamp, file) and, with ``--records``, the records of each segment
as they are in the file (including any below the log start offset that
delete-records or retention has not removed yet).  Last come the orphan
files -- Parquet files under ``partition=P/`` that no commit made live (left
by failed commits; never read) -- see :mod:`lakelog.storage.orphan_files`.
"""

from __future__ import annotations

import argparse
import sys

from lakelog.cli.global_options import add_topic_argument, open_log
from lakelog.cli.output import bytes_to_json, bytes_to_text, headers_to_json, print_json

READ_BATCH_ROWS = 10_000


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "dump-log", help="segments (and records) of a partition (kafka-dump-log)",
        description="Print a partition's segments (base/last offset, count, bytes, min/max timestamp, file), "
                    "with --records their records, and orphan files left by failed commits.")
    add_topic_argument(p)
    p.add_argument("--partition", type=int, metavar="P", help="the partition to dump (default: all)")
    p.add_argument("--records", action="store_true",
                   help="also print every record (offset, timestamp, key, value, headers, producer fields)")
    p.set_defaults(func=run)


def segment_to_dict(seg) -> dict:
    return {"base_offset": seg.base_offset, "last_offset": seg.last_offset, "count": seg.records,
            "bytes": seg.bytes, "min_timestamp": seg.min_timestamp // 1000,
            "max_timestamp": seg.max_timestamp // 1000, "file": seg.path}


def iter_segment_records(root, topic: str, seg):
    """The records of one segment file, in offset order, in bounded batches (timestamps as epoch ms)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    with root.filesystem.open_input_file(root.path_for("topics", topic, seg.path)) as f:
        for batch in pq.ParquetFile(f).iter_batches(batch_size=READ_BATCH_ROWS):
            i = batch.schema.get_field_index("timestamp")
            ms = batch.column(i).cast(pa.int64()).to_pylist()
            for rec, ts in zip(batch.to_pylist(), ms):
                rec["timestamp"] = ts // 1000
                yield rec


def record_line(rec: dict) -> str:
    """A record in kafka-dump-log's ``--print-data-log`` style (null key/value: size -1, no field)."""
    ts_type = "LogAppendTime" if rec["timestampType"] == 1 else "CreateTime"
    key, value = rec["key"], rec["value"]
    parts = [f"| offset: {rec['offset']}", f"{ts_type}: {rec['timestamp']}",
             f"keySize: {-1 if key is None else len(key)}", f"valueSize: {-1 if value is None else len(value)}",
             f"producerId: {rec['producerId']}", f"producerEpoch: {rec['producerEpoch']}",
             f"sequence: {rec['sequence']}"]
    headers = rec["headers"] or []
    parts.append("headers: [" + ", ".join(
        f"{h['key']}:{'null' if h['value'] is None else bytes_to_text(h['value'])}" for h in headers) + "]")
    if key is not None:
        parts.append(f"key: {bytes_to_text(key)}")
    if value is not None:
        parts.append(f"payload: {bytes_to_text(value)}")
    return " ".join(parts)


def record_to_json(rec: dict) -> dict:
    return {"offset": rec["offset"], "timestamp": rec["timestamp"], "timestampType": rec["timestampType"],
            "key": bytes_to_json(rec["key"]), "value": bytes_to_json(rec["value"]),
            "headers": headers_to_json(rec["headers"]), "producerId": rec["producerId"],
            "producerEpoch": rec["producerEpoch"], "sequence": rec["sequence"]}


def run(args: argparse.Namespace) -> int:
    from lakelog.storage.orphan_files import find_orphan_files
    from lakelog.reader.log_reader import check_partition

    log = open_log(args)
    snap = log.snapshot(args.topic)
    if args.partition is not None:
        check_partition(snap, args.partition)
    partitions = [args.partition] if args.partition is not None else list(range(snap.partition_count))
    orphans = find_orphan_files(log.root, args.topic, partition=args.partition)
    dumps = []
    for p in partitions:
        segments = snap.index.segments(p)
        dump = {"partition": p, "version": snap.version, "log_start_offset": snap.log_start_offset(p),
                "high_watermark": snap.high_watermark(p), "segments": [],
                "orphan_files": [o.to_dict() for o in orphans if o.partition == p]}
        if not args.json:
            print(f"Dumping topic {args.topic} partition {p} at Delta version {snap.version}: "
                  f"log start offset {dump['log_start_offset']}, high watermark {dump['high_watermark']}, "
                  f"{len(segments)} segment(s)")
        for seg in segments:
            entry = segment_to_dict(seg)
            if not args.json:
                print(f"baseOffset: {seg.base_offset} lastOffset: {seg.last_offset} count: {seg.records} "
                      f"size: {seg.bytes} minTimestamp: {entry['min_timestamp']} "
                      f"maxTimestamp: {entry['max_timestamp']} file: {seg.path}")
            if args.records:
                if args.json:
                    entry["records"] = [record_to_json(r) for r in iter_segment_records(log.root, args.topic, seg)]
                else:
                    for rec in iter_segment_records(log.root, args.topic, seg):
                        sys.stdout.write(record_line(rec) + "\n")
            dump["segments"].append(entry)
        if not args.json:
            files = dump["orphan_files"]
            print(f"Orphan files (not referenced by the Delta log; never read): {len(files) or 'none'}")
            for o in files:
                print(f"  {o['path']} size: {o['size']} modified: {o['modification_time']}")
        dumps.append(dump)
    if args.json:
        print_json({"topic": args.topic, "partitions": dumps})
    return 0
