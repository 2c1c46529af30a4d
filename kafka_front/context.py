"""What every Kafka request handler may use: the process's shared objects (the broker layer's, the same ones the
HTTP front uses)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from lakelog.cluster.broker_config import BrokerSettings

if TYPE_CHECKING:
    from lakelog import Log
    from lakelog.broker.authorizer import Authorizer
    from lakelog.broker.metrics import Metrics
    from lakelog.broker.produce import ProducePipeline
    from lakelog.broker.topic_metadata import TopicMetadata
    from lakelog.cluster.cluster_metadata import ClusterMetadata
    from lakelog.cluster.lease_keeper import LeaseKeeper
    from lakelog.group.consumer_offsets import OffsetStore
    from lakelog.group.group_coordinator import GroupCoordinator
    from lakelog.quota.quota_manager import QuotaManager
    from lakelog.transaction.transaction_coordinator import TransactionCoordinator

    from kafka_front.commit_waiter import CommitWaiter
    from kafka_front.fetch_ahead import FetchAhead
    from kafka_front.sasl import Credentials

NODE_ID = 1  # a single front leads every partition (docs/kafka-clients.md); several fronts: their --node-id
CLUSTER_ID = "lakelog"


@dataclass
class FrontContext:
    """Shared, long-lived objects (owned by the app's lifespan) plus the listener's settings.

    ``host``/``port`` are what Metadata and FindCoordinator advertise; ``max_frame_bytes`` bounds a request
    frame (and what a compressed batch may decompress to), ``sasl_max_receive_bytes`` a frame before SASL
    authentication (Kafka's ``sasl.server.max.receive.size``); ``fetch_max_bytes`` caps every Fetch answer
    (Kafka's ``fetch.max.bytes``)."""

    log: "Log"
    metadata: "TopicMetadata"
    produce: "ProducePipeline"  # the broker's produce stages, shared with the HTTP front
    coordinator: "GroupCoordinator"
    offsets: "OffsetStore"
    authorizer: "Authorizer"
    metrics: "Metrics"
    waiter: "CommitWaiter"
    credentials: "Credentials"
    host: str
    port: int
    max_frame_bytes: int = 100 << 20
    sasl_max_receive_bytes: int = 524_288  # Kafka's default
    fetch_max_bytes: int = 57_671_680  # Kafka's default (55 MiB)
    fetch_ahead: "FetchAhead | None" = None  # None: every Fetch reads on demand
    leases: "LeaseKeeper | None" = None  # several fronts on one root: who leads which partition
    transactions: "TransactionCoordinator | None" = None
    cluster_metadata: "ClusterMetadata | None" = None  # the root's ACLs, SCRAM credentials, quotas, broker configs
    broker: BrokerSettings = field(default_factory=BrokerSettings)  # this front's static broker configs
    quotas: "QuotaManager | None" = None  # None: no client quotas enforced

    @property
    def node_id(self) -> int:
        return self.leases.log.node_id if self.leases is not None else NODE_ID
