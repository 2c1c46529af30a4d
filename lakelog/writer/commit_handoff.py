"""A group commit handed to the front that commits a topic's log, when several fronts share a root.

A topic is one Delta table: fronts that each PUT their own commits race for every version, and a loser learns of
the winner only by losing (a 412, a GET of the winner, another PUT).  So one front commits for the topic -- the
holder of partition 0's lease, its *committer front* -- and the others upload their segments themselves and hand
it the rest of their commit: the add actions, the Delta ``txn`` app ids they set, the producer state rows and a
commit id.  The committer front puts every handoff that arrived during its last PUT into its next commit, beside
its own groups, and answers each with the version it landed in and the commits since the sender's snapshot.

Safety does not rest on who commits: a handoff states what it was planned on (``expect``: the value of each of
its app ids in the sender's snapshot, so ``lakelog.leo.<P>`` is where its first segment starts and
``lakelog.lease.<P>`` is the sender's lease) and is committed only if the committer front's log says the same;
otherwise it is rejected (:class:`HandoffRejected`, nothing of it committed) and the sender re-plans on what
landed, as after a lost version.  An answer that never comes is an unknown outcome: the sender looks for its
commit id (listed under ``lakelog.commitIds`` in the commitInfo that carried it) and keeps its files.

Wire format (JSON): :class:`Handoff` in, :class:`HandoffAnswer` out.  Every field is checked by
:func:`decode_handoff` before anything is committed; pure functions, no I/O.
"""

from __future__ import annotations

import re
from typing import Annotated

import msgspec

from lakelog.errors import InvalidRequest, KafkaError
from lakelog.storage.partition_lease import LEASE_APP, lease_app
from lakelog.storage.producer_ids import MAX_EPOCH
from lakelog.storage.producer_state import INT32_MAX
from lakelog.storage.record_schema import PARTITION_COLUMN
from lakelog.storage.segment_index import SEGMENT_NAME
from lakelog.storage.topic_config import LONG_MAX
from lakelog.storage.topic_snapshot import LEO_APP, leo_app, segment_from_add

MAX_HANDOFF_BYTES = 8 * 1024 * 1024
MAX_ADDS = 4096  # segments in one handoff (a group has at most one per partition; several groups ride together)
MAX_STATS_CHARS = 16 * 1024
MAX_PRODUCER_ROWS = 65536
PRODUCER_ROW_FIELDS = 8  # storage/producer_state.py BatchMetadata.to_row()
_COMMIT_ID = re.compile(r"[0-9a-f]{32}")
_APP = re.compile(f"({re.escape(LEO_APP)}|{re.escape(LEASE_APP)})(\\d{{1,9}})")  # a partition's log end or lease
# Whatever lands in a commit file must fit the Delta protocol's longs (msgspec decodes integers of any size), or no
# reader could parse the table again.
Long = Annotated[int, msgspec.Meta(ge=-(2**63), le=LONG_MAX)]
NonNegativeLong = Annotated[int, msgspec.Meta(ge=0, le=LONG_MAX)]


class HandoffRejected(KafkaError):
    """The committer front did not commit a handoff, and never will: the sender re-plans on what landed."""

    def __init__(self, cause: KafkaError) -> None:
        super().__init__(cause.message)
        self.cause = cause
        self.code, self.name, self.retriable = cause.code, cause.name, cause.retriable


class AddAction(msgspec.Struct, forbid_unknown_fields=True):
    """A Delta add action, as written in the commit file."""

    path: str
    partitionValues: dict[str, str]
    size: Annotated[int, msgspec.Meta(ge=1, le=LONG_MAX)]
    modificationTime: NonNegativeLong
    dataChange: bool
    stats: str


class Handoff(msgspec.Struct, forbid_unknown_fields=True):
    topic_id: str | None  # the incarnation the sender appends to
    commit_id: str
    # the sender's snapshot: the answer carries the commits after it
    known_version: Annotated[int, msgspec.Meta(ge=-1, le=LONG_MAX)]
    adds: list[AddAction]
    txns: dict[str, NonNegativeLong]
    expect: dict[str, NonNegativeLong | None]  # each app id's value in the sender's snapshot
    producer_rows: list[list[Long]]  # BatchMetadata.to_row()


class HandoffAnswer(msgspec.Struct):
    version: int  # the commit the handoff landed in
    commits: list[tuple[int, str]]  # (version, commit file) after known_version up to version, those held


def carries(txns: dict[str, int]) -> bool:
    """Whether a commit setting ``txns`` can be handed over: it sets only partitions' log ends and leases (a
    committing transaction's marker, ``lakelog.tx.<producer id>.<P>``, is committed by its own front)."""
    return all(_APP.fullmatch(app) for app in txns)


def encode(message: Handoff | HandoffAnswer) -> bytes:
    return msgspec.json.encode(message)


def decode_answer(data: bytes) -> HandoffAnswer:
    return msgspec.json.decode(data, type=HandoffAnswer)


def decode_handoff(data: bytes) -> Handoff:
    """Parse and check a handoff; ``INVALID_REQUEST`` naming the first thing wrong.

    Checked: the shapes and bounds (every number a Delta long; a producer row's epoch an int16, its sequences
    int32s); every add is a segment of this layout whose stats parse; per partition the
    segments are contiguous from ``expect[lakelog.leo.<P>]`` to ``txns[lakelog.leo.<P>]``; a lease is set to
    the value expected (a handoff never moves a lease); producer rows lie in the offsets appended.
    """
    if len(data) > MAX_HANDOFF_BYTES:
        raise InvalidRequest(f"handoff of {len(data)} bytes is over the limit of {MAX_HANDOFF_BYTES}")
    try:
        h = msgspec.json.decode(data, type=Handoff)
    except msgspec.DecodeError as e:  # a msgspec.ValidationError too
        raise InvalidRequest(f"malformed handoff: {e}") from None
    except UnicodeDecodeError:  # msgspec raises it, not a DecodeError, for a string that is not UTF-8
        raise InvalidRequest("malformed handoff: the body is not UTF-8") from None
    except RecursionError:
        raise InvalidRequest("malformed handoff: nested too deeply") from None
    except (ValueError, OverflowError):
        raise InvalidRequest("malformed handoff: a value that cannot be decoded") from None
    if not _COMMIT_ID.fullmatch(h.commit_id):
        raise InvalidRequest("commit_id must be 32 lower-case hex digits")
    if h.topic_id is not None and len(h.topic_id) > 64:
        raise InvalidRequest("topic_id is too long")
    if not 1 <= len(h.adds) <= MAX_ADDS:
        raise InvalidRequest(f"a handoff carries 1 to {MAX_ADDS} segments")
    if len(h.producer_rows) > MAX_PRODUCER_ROWS:
        raise InvalidRequest(f"a handoff carries at most {MAX_PRODUCER_ROWS} producer rows")
    spans: dict[int, list[tuple[int, int]]] = {}
    for add in h.adds:
        m = SEGMENT_NAME.fullmatch(add.path)
        if m is None:
            raise InvalidRequest(f"add path {add.path[:200]!r} is not a segment of this layout")
        p = int(m.group(1))
        if add.partitionValues != {PARTITION_COLUMN: str(p)} or not add.dataChange:
            raise InvalidRequest(f"add {add.path} has bad partition values or dataChange")
        if len(add.stats) > MAX_STATS_CHARS:
            raise InvalidRequest(f"add {add.path} has stats over {MAX_STATS_CHARS} characters")
        try:
            seg = segment_from_add(msgspec.structs.asdict(add))
        # json.JSONDecodeError is a ValueError; stats nested deeper than the parser's recursion limit are a
        # RecursionError, and a number beyond a float (1e400, infinity) an OverflowError in int()
        except (ValueError, TypeError, AttributeError, KeyError, OverflowError, RecursionError):
            seg = None
        if seg is None or seg.records < 1 or seg.base_offset != int(m.group(2)) \
                or seg.last_offset != seg.base_offset + seg.records - 1:
            raise InvalidRequest(f"add {add.path} has stats that do not describe its records")
        spans.setdefault(p, []).append((seg.base_offset, seg.last_offset + 1))
    apps: dict[str, set[int]] = {LEO_APP: set(), LEASE_APP: set()}
    for app, value in h.txns.items():
        m = _APP.fullmatch(app)
        if m is None:
            raise InvalidRequest(f"txn {app[:100]!r} is not a log end or lease of a partition")
        apps[m.group(1)].add(int(m.group(2)))
    if h.expect.keys() != h.txns.keys():
        raise InvalidRequest("expect must name exactly the txn app ids")
    if apps[LEO_APP] != spans.keys() or not apps[LEASE_APP] <= spans.keys():
        raise InvalidRequest("the log ends set must be those of the partitions appended to")
    for p in apps[LEASE_APP]:
        if h.expect[lease_app(p)] != h.txns[lease_app(p)]:
            raise InvalidRequest(f"a handoff cannot move the lease of partition {p}")
    for p, ranges in spans.items():
        end = h.expect[leo_app(p)] or 0
        for start, stop in sorted(ranges):
            if start != end:
                raise InvalidRequest(f"partition {p}: segments are not contiguous from the expected log end")
            end = stop
        if end != h.txns[leo_app(p)]:
            raise InvalidRequest(f"partition {p}: the log end set is not where its segments end")
    for row in h.producer_rows:
        if len(row) != PRODUCER_ROW_FIELDS or row[0] not in spans:
            raise InvalidRequest("producer rows must describe batches of the partitions appended to")
        _, producer_id, epoch, first_seq, last_seq, first, last, _ = row
        kafka_ranges = 0 <= epoch <= MAX_EPOCH and 0 <= first_seq <= INT32_MAX and 0 <= last_seq <= INT32_MAX
        if producer_id < 0 or not kafka_ranges:
            raise InvalidRequest("producer rows must carry a producer id, an epoch and sequences in Kafka's ranges")
        if not (h.expect[leo_app(row[0])] or 0) <= first <= last < h.txns[leo_app(row[0])]:
            raise InvalidRequest("producer rows must lie in the offsets appended")
    return h
