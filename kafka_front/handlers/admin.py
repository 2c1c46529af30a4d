"""Topic administration."""

from __future__ import annotations

from lakelog.errors import UnsupportedVersion


async def _todo(ctx, conn, rq) -> dict:
    raise UnsupportedVersion("not served yet")


create_topics = delete_topics = delete_records = describe_configs = create_partitions = _todo
incremental_alter_configs = _todo
