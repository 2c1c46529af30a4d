"""Prometheus metrics of one front process (a private registry per app, exposed at ``/metrics``), counted by
both fronts and the broker layer; the HTTP front's request timer is ``api.request_timer``.

* ``lakelog_records_in_total{topic}`` / ``lakelog_bytes_in_total{topic}`` -- committed records and
  bytes (Kafka's RecordsInPerSec / BytesInPerSec), counted when their commit succeeded;
* ``lakelog_request_duration_seconds{method,route,status}`` -- request latency histogram;
* ``lakelog_commit_duration_seconds{topic}`` -- latency of the accumulator's Delta commits;
* ``lakelog_produce_stage_seconds{stage}`` -- where a group commit's time goes, as Kafka's request metrics
  (RequestQueueTimeMs, RemoteTimeMs, ...) split a request's: ``queue`` (its oldest append waiting to be taken:
  ``linger.ms``, or the group ahead), and on object stores ``upload`` (its segments), ``commit_wait`` (the
  commit ahead of it) and ``commit`` (its commit PUT) or ``handoff`` (the round trip to the committer front);
* ``lakelog_accumulator_buffered_bytes`` / ``lakelog_accumulator_buffer_memory_bytes`` -- the
  accumulator's fill and its limit (``buffer.memory``);
* ``lakelog_kafka_request_duration_seconds{api}`` -- Kafka protocol request latency (the Kafka listener);
* ``lakelog_errors_total{error_code,error_name}`` -- errors answered, whole-request or per partition.

Thread-safe (prometheus-client's metrics are).
"""

from __future__ import annotations

from typing import Callable

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from lakelog.errors import KafkaError

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class Metrics:
    """The front's metric families."""

    content_type = CONTENT_TYPE_LATEST

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.records_in = Counter("lakelog_records_in", "Records committed, per topic.", ["topic"], registry=r)
        self.bytes_in = Counter("lakelog_bytes_in", "Record bytes committed, per topic.", ["topic"], registry=r)
        self.request_duration = Histogram("lakelog_request_duration_seconds", "HTTP request latency.",
                                          ["method", "route", "status"], buckets=LATENCY_BUCKETS, registry=r)
        self.commit_duration = Histogram("lakelog_commit_duration_seconds", "Latency of one group commit.",
                                         ["topic"], buckets=LATENCY_BUCKETS, registry=r)
        self.produce_stage = Histogram("lakelog_produce_stage_seconds",
                                       "Time a group commit spends in each stage of produce.", ["stage"],
                                       buckets=LATENCY_BUCKETS, registry=r)
        self.accumulator_fill = Gauge("lakelog_accumulator_buffered_bytes",
                                      "Bytes accepted but not yet committed.", registry=r)
        self.accumulator_limit = Gauge("lakelog_accumulator_buffer_memory_bytes",
                                       "The accumulator's buffer.memory.", registry=r)
        self.kafka_request_duration = Histogram("lakelog_kafka_request_duration_seconds",
                                                "Kafka protocol request latency, per API.", ["api"],
                                                buckets=LATENCY_BUCKETS, registry=r)
        self.errors = Counter("lakelog_errors", "Errors answered, by Kafka error code.",
                              ["error_code", "error_name"], registry=r)
        self.kafka_connections = Gauge("lakelog_kafka_connections", "Open Kafka protocol connections.",
                                       registry=r)
        self.kafka_held_bytes = Gauge("lakelog_kafka_held_bytes", "Bytes the Kafka connections hold: request "
                                      "frames, answers not yet written, Fetch reservations.", registry=r)

    def watch_accumulator(self, buffered: Callable[[], float], limit: int) -> None:
        self.accumulator_fill.set_function(buffered)
        self.accumulator_limit.set(limit)

    def watch_kafka(self, connections: Callable[[], float], held_bytes: Callable[[], float]) -> None:
        self.kafka_connections.set_function(connections)
        self.kafka_held_bytes.set_function(held_bytes)

    def on_commit(self, topic: str, records: int, nbytes: int, seconds: float) -> None:
        """The accumulator's callback after each commit."""
        self.records_in.labels(topic).inc(records)
        self.bytes_in.labels(topic).inc(nbytes)
        self.commit_duration.labels(topic).observe(seconds)

    def on_stages(self, topic: str, stages: dict[str, float]) -> None:
        """The log's callback with a group commit's stage times (``Log.on_commit_stages``)."""
        for stage, seconds in stages.items():
            self.produce_stage.labels(stage).observe(seconds)

    def observe_kafka(self, api: str, seconds: float) -> None:
        self.kafka_request_duration.labels(api).observe(seconds)

    def count_error(self, error: KafkaError) -> None:
        self.errors.labels(str(error.code), error.name).inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)
