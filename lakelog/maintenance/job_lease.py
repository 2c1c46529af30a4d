"""A lease on (topic, job): at most one run of a maintenance job per topic at a time, across processes and hosts.

Leases live in the storage root, so every scheduler sharing a root sees them::

    <root>/_lakelog/maintenance/<topic>/<job>/<20-digit generation>.json

The newest generation is the current lease: ``{"owner", "acquired_ms",
"expires_ms", "released_ms", "status", "summary"}``.  To acquire, a scheduler
reads the newest generation; if it is released or expired it creates the next
generation with a put-if-absent (``If-None-Match: *`` on S3, an exclusive link
locally), so of two schedulers racing exactly one wins.  The holder renews
``expires_ms`` while its job runs and marks the file released (with the run's
status) when it ends; a holder that dies leaves a lease that expires.

The released file doubles as the job's last-run record, which the scheduler
uses to space runs (:mod:`lakelog.maintenance.scheduler`).  An expired holder that is in
fact still running cannot corrupt anything: the jobs' Delta commits are fenced
(:mod:`lakelog.maintenance.rewrite`).  Thread-safe per instance only under the
caller's lock (one scheduler thread uses one lease).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
import uuid
from dataclasses import asdict, dataclass

from lakelog.storage.delta_commit import CommitConflict, put_if_absent
from lakelog.storage.storage_root import StorageRoot, list_dir

log = logging.getLogger(__name__)

LEASE_DIR = "_lakelog/maintenance"
GENERATIONS_KEPT = 5


@dataclass(frozen=True)
class LeaseRecord:
    """One generation of a lease."""

    generation: int
    owner: str
    acquired_ms: int
    expires_ms: int
    released_ms: int | None = None
    status: str | None = None  # "ok" | "failed" once released
    summary: str = ""

    def held(self, now_ms: int) -> bool:
        return self.released_ms is None and self.expires_ms > now_ms


def default_owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class JobLease:
    """The lease of one job on one topic."""

    def __init__(self, root: StorageRoot, topic: str, job: str, *, owner: str | None = None,
                 ttl_ms: int = 600_000) -> None:
        self.root = root
        self.topic = topic
        self.job = job
        self.owner = owner or default_owner()
        self.ttl_ms = ttl_ms
        self.record: LeaseRecord | None = None  # ours, while held

    @property
    def _dir(self) -> str:
        return f"{LEASE_DIR}/{self.topic}/{self.job}"

    def _generations(self) -> list[int]:
        gens = []
        for info in list_dir(self.root, self._dir):
            name = info.base_name
            if name.endswith(".json") and name[:-5].isdigit():
                gens.append(int(name[:-5]))
        return sorted(gens)

    def _read(self, gen: int) -> LeaseRecord | None:
        try:
            with self.root.filesystem.open_input_stream(self.root.path_for(self._dir, f"{gen:020d}.json")) as f:
                doc = json.loads(f.read().decode())
            return LeaseRecord(**doc)
        except (OSError, ValueError, TypeError):
            return None

    def current(self) -> LeaseRecord | None:
        """The newest generation (held, released or expired), or None if the job never ran."""
        for gen in reversed(self._generations()):
            rec = self._read(gen)
            if rec is not None:
                return rec
        return None

    def acquire(self, now_ms: int | None = None) -> bool:
        """Take the lease unless someone holds it; True if we hold it now."""
        now = now_ms if now_ms is not None else int(time.time() * 1000)
        gens = self._generations()
        latest = self._read(gens[-1]) if gens else None
        if latest is not None and latest.held(now):
            return False
        gen = gens[-1] + 1 if gens else 0
        rec = LeaseRecord(gen, self.owner, now, now + self.ttl_ms)
        try:
            put_if_absent(self.root, f"{self._dir}/{gen:020d}.json", json.dumps(asdict(rec)).encode())
        except CommitConflict:
            return False
        self.record = rec
        for old in gens[:-GENERATIONS_KEPT]:
            try:
                self.root.filesystem.delete_file(self.root.path_for(self._dir, f"{old:020d}.json"))
            except OSError:
                pass
        return True

    def _write(self, rec: LeaseRecord) -> None:
        with self.root.filesystem.open_output_stream(
                self.root.path_for(self._dir, f"{rec.generation:020d}.json")) as f:
            f.write(json.dumps(asdict(rec)).encode())
        self.record = rec

    def renew(self) -> bool:
        """Push our expiry forward; False if another owner has taken a newer generation meanwhile."""
        if self.record is None:
            return False
        now = int(time.time() * 1000)
        self._write(LeaseRecord(**{**asdict(self.record), "expires_ms": now + self.ttl_ms}))
        gens = self._generations()
        if gens and gens[-1] != self.record.generation:
            log.warning("lease on %s/%s was taken over by a newer holder", self.topic, self.job)
            return False
        return True

    def release(self, status: str, summary: str = "") -> None:
        """Mark our generation released with the run's ``status``."""
        if self.record is None:
            return
        now = int(time.time() * 1000)
        self._write(LeaseRecord(**{**asdict(self.record), "released_ms": now, "status": status,
                                   "summary": summary[:2000]}))
        self.record = None
