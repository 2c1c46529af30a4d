"""The group coordinator's broker-side settings (Kafka's ``GroupCoordinatorConfig``), with Kafka's names and
defaults."""

from __future__ import annotations

from dataclasses import dataclass

from lakelog.group.server_assignors import SERVER_ASSIGNORS

INT32_MAX = 2**31 - 1


@dataclass(frozen=True)
class CoordinatorConfig:
    """Broker-side group settings, with Kafka's names and defaults."""

    group_min_session_timeout_ms: int = 6_000
    group_max_session_timeout_ms: int = 1_800_000
    group_initial_rebalance_delay_ms: int = 3_000
    group_max_size: int = INT32_MAX  # group.max.size (classic)
    group_new_member_join_timeout_ms: int = 300_000  # group.classic.new.member.join.timeout.ms (Kafka's internal)
    group_consumer_session_timeout_ms: int = 45_000
    group_consumer_heartbeat_interval_ms: int = 5_000
    group_consumer_max_size: int = 200
    group_consumer_assignors: tuple[str, ...] = SERVER_ASSIGNORS
    group_consumer_migration_policy: str = "bidirectional"  # group.consumer.migration.policy
    metadata_check_interval_ms: int = 1_000  # how often consumer groups' partition counts and regexes are re-read
