"""What a maintenance job did: the summary it prints (text or JSON) and returns.

Per topic: partitions examined and changed, segments removed and written,
records and bytes of the examined partitions before and after, log start
offsets that moved, the Delta versions before and after, and (for
``--dry-run``) the plan's lines.  Per job: the topics, the duration, the error.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field


@dataclass
class TopicReport:
    """One topic's outcome."""

    topic: str
    version_before: int = -1
    version_after: int | None = None  # None: nothing committed
    partitions_examined: int = 0
    partitions_changed: int = 0
    segments_removed: int = 0
    segments_written: int = 0
    records_before: int = 0
    records_after: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    log_start_offsets: dict[int, tuple[int, int]] = field(default_factory=dict)  # partition -> (old, new)
    files_deleted: int = 0  # vacuum
    plan: list[str] = field(default_factory=list)
    note: str = ""

    def record_removed(self, segments) -> None:
        for s in segments:
            self.segments_removed += 1
            self.records_after -= s.records
            self.bytes_after -= s.bytes

    def record_written(self, records: int, size: int) -> None:
        self.segments_written += 1
        self.records_after += records
        self.bytes_after += size


@dataclass
class JobReport:
    """A job run: ``job`` is retention, compaction, merge or vacuum."""

    job: str
    root: str
    dry_run: bool = False
    topics: list[TopicReport] = field(default_factory=list)
    duration_s: float = 0.0
    error: str | None = None
    spark_master: str | None = None  # where the Spark work ran (None: driver only)

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_dict(self) -> dict:
        d = asdict(self)
        for t in d["topics"]:
            t["log_start_offsets"] = {str(p): list(v) for p, v in t["log_start_offsets"].items()}
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    def format_text(self) -> str:
        head = f"{self.job}{' (dry run)' if self.dry_run else ''} on {self.root}: "
        lines = [head + (f"FAILED: {self.error}" if self.error else
                         f"{len(self.topics)} topic(s) in {self.duration_s:.2f} s"
                         + (f" on Spark master {self.spark_master}" if self.spark_master else ""))]
        for t in self.topics:
            lines.append(
                f"  {t.topic}: partitions examined {t.partitions_examined}, changed {t.partitions_changed}; "
                f"segments removed {t.segments_removed}, written {t.segments_written}; "
                f"records {t.records_before} -> {t.records_after}; bytes {t.bytes_before} -> {t.bytes_after}"
                + (f"; files deleted {t.files_deleted}" if self.job == "vacuum" else "")
                + (f"; version {t.version_before} -> {t.version_after}" if t.version_after is not None else ""))
            if t.log_start_offsets:
                moved = ", ".join(f"{p}: {a} -> {b}" for p, (a, b) in sorted(t.log_start_offsets.items()))
                lines.append(f"    log start offsets: {moved}")
            if t.note:
                lines.append(f"    {t.note}")
            lines.extend(f"    {line}" for line in t.plan)
        return "\n".join(lines)
