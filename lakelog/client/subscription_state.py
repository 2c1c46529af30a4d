"""What a consumer consumes (Kafka's ``SubscriptionState``): its subscription (topics or a pattern) or manual
assignment, the partitions assigned to it, each one's position, and which are paused.

Not thread-safe: owned by one consumer (its heartbeat thread reads none of it).
"""

from __future__ import annotations

import re
import time
from typing import Callable

from lakelog.group.assignors import TopicPartition

#: ``on_assign`` / ``on_revoke``: called with the partitions given or taken
Callback = Callable[[list[TopicPartition]], None]


class SubscriptionState:
    """``on_drop(tp)``: a partition stops being consumed here (its read-ahead goes)."""

    def __init__(self, on_drop: Callable[[TopicPartition], None]) -> None:
        self._on_drop = on_drop
        self.topics: tuple[str, ...] = ()
        self.pattern: re.Pattern | None = None
        self.pattern_checked = 0.0
        self.manual = False
        self.on_assign: Callback | None = None
        self.on_revoke: Callback | None = None
        self.assignment: set[TopicPartition] = set()
        self.positions: dict[TopicPartition, int] = {}
        self.paused: set[TopicPartition] = set()

    @property
    def subscribed(self) -> bool:
        """Whether it consumes anything: topics, a pattern or a manual assignment."""
        return self.manual or bool(self.topics) or self.pattern is not None

    def match(self, topics: list[str]) -> tuple[str, ...]:
        """The topics of ``topics`` the pattern matches (noting when it was last checked)."""
        self.pattern_checked = time.monotonic()
        return tuple(t for t in topics if self.pattern and self.pattern.fullmatch(t))

    def assign(self, partitions: set[TopicPartition]) -> None:
        """A manual assignment: positions and pauses of the partitions kept stay."""
        self.manual = True
        self.assignment = partitions
        self.positions = {tp: o for tp, o in self.positions.items() if tp in partitions}
        self.paused &= partitions

    def drop(self, partitions: set[TopicPartition]) -> None:
        for tp in partitions:
            self.assignment.discard(tp)
            self.positions.pop(tp, None)
            self.paused.discard(tp)
            self._on_drop(tp)

    def clear(self) -> None:
        """No subscription and no manual assignment any more (the partitions are dropped by the caller)."""
        self.topics, self.pattern, self.manual = (), None, False

    def assigned_positions(self) -> dict[TopicPartition, int]:
        """The position of every assigned partition that has one."""
        return {tp: o for tp, o in self.positions.items() if tp in self.assignment}
