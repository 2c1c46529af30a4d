"""ACLs stored in the root's cluster metadata: Kafka's CreateAcls and DeleteAcls over the stored bindings. Pure.

ACLs of a front's auth file are in force next to these but are not stored here: DeleteAcls reports a file ACL
its filter matches with ``INVALID_REQUEST`` (remove it from the file), and creating one that the file already
holds changes nothing, as creating an ACL that exists changes nothing in Kafka.
"""

from __future__ import annotations

from typing import Sequence

from lakelog.errors import InvalidRequest, KafkaError
from lakelog.security.acl import AclBinding, AclFilter

IN_FILE = "this ACL is defined in the front's auth file (--auth-file); remove it there"


def create(stored: tuple[AclBinding, ...], bindings: Sequence[AclBinding],
           file_acls: Sequence[AclBinding] = ()) -> tuple[AclBinding, ...]:
    """``stored`` with ``bindings`` added (those it or the auth file already holds: no change)."""
    present = set(stored) | set(file_acls)
    return stored + tuple(b for b in dict.fromkeys(bindings) if b not in present)


def delete(stored: tuple[AclBinding, ...], filters: Sequence[AclFilter], file_acls: Sequence[AclBinding] = ()
           ) -> tuple[tuple[AclBinding, ...], list[list[tuple[AclBinding, KafkaError | None]]]]:
    """``stored`` without the ACLs any filter matches; per filter, the ACLs it matched (stored ones deleted: no
    error; the auth file's: an ``INVALID_REQUEST`` each). An ACL two filters match is reported by both, as Kafka
    reports it."""
    results = []
    doomed: set[AclBinding] = set()
    for f in filters:
        matched: list[tuple[AclBinding, KafkaError | None]] = []
        for b in stored:
            if f.matches(b):
                matched.append((b, None))
                doomed.add(b)
        matched.extend((b, InvalidRequest(IN_FILE)) for b in file_acls if f.matches(b))
        results.append(matched)
    return tuple(b for b in stored if b not in doomed), results
