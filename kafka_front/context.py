"""What every Kafka request handler may use: the process's shared objects, the same ones the HTTP front uses."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lakelog import Log
    from lakelog.group.consumer_offsets import OffsetStore
    from lakelog.group.group_coordinator import GroupCoordinator
    from lakelog.transaction.transaction_coordinator import TransactionCoordinator
    from lakelog.writer.accumulator import RecordAccumulator

    from api.auth import Authorizer
    from api.metrics import Metrics
    from api.services.produce import ProduceService
    from api.services.topic_metadata import TopicMetadata

    from lakelog.cluster.lease_keeper import LeaseKeeper

    from kafka_front.commit_waiter import CommitWaiter
    from kafka_front.fetch_ahead import FetchAhead
    from kafka_front.sasl import Credentials

NODE_ID = 1  # a single front leads every partition (docs/kafka-clients.md); several fronts: their --node-id
CLUSTER_ID = "lakelog"


@dataclass
class FrontContext:
    """Shared, long-lived objects (owned by the app's lifespan) plus the listener's settings.

    ``host``/``port`` are what Metadata and FindCoordinator advertise; ``max_frame_bytes`` bounds a request
    frame (and what a compressed batch may decompress to)."""

    log: "Log"
    accumulator: "RecordAccumulator"
    metadata: "TopicMetadata"
    produce: "ProduceService"
    coordinator: "GroupCoordinator"
    offsets: "OffsetStore"
    authorizer: "Authorizer"
    metrics: "Metrics"
    waiter: "CommitWaiter"
    credentials: "Credentials"
    host: str
    port: int
    max_frame_bytes: int = 100 << 20
    fetch_ahead: "FetchAhead | None" = None  # None: every Fetch reads on demand
    leases: "LeaseKeeper | None" = None  # several fronts on one root: who leads which partition
    transactions: "TransactionCoordinator | None" = None

    @property
    def node_id(self) -> int:
        return self.leases.log.node_id if self.leases is not None else NODE_ID
