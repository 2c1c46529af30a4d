"""Consumer groups over the shared group coordinator."""

from __future__ import annotations

from lakelog.errors import UnsupportedVersion


async def _todo(ctx, conn, rq) -> dict:
    raise UnsupportedVersion("not served yet")


offset_commit = offset_fetch = find_coordinator = join_group = heartbeat = leave_group = sync_group = _todo
describe_groups = list_groups = offset_delete = _todo
