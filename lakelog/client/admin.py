"""``Admin``: topics, producer ids, fetch and consumer-group offsets over the HTTP front.

Methods return the front's JSON answers as dicts and raise :class:`~lakelog.errors.KafkaError`
subclasses on failure.  Thread-safe.
"""

from __future__ import annotations

from typing import Iterable, Mapping
from urllib.parse import quote

from lakelog.client.transport import Transport


def _q(name: str) -> str:
    return quote(name, safe="")


class Admin:
    """An admin client for one front (``bootstrap`` = its base URL)."""

    def __init__(self, bootstrap: str, *, token: str | None = None, timeout: float = 30.0,
                 transport: Transport | None = None) -> None:
        self.transport = transport or Transport(bootstrap, token=token, timeout=timeout)
        self._owns_transport = transport is None

    # -- topics ---------------------------------------------------------------------------
    def create_topic(self, name: str, partitions: int = 1, configs: Mapping[str, object] | None = None) -> dict:
        return self.transport.json("POST", "/v1/topics",
                                   json={"name": name, "partitions": partitions, "configs": dict(configs or {})})

    def list_topics(self, *, internal: bool = False) -> list[str]:
        return self.transport.json("GET", "/v1/topics", params={"internal": str(internal).lower()})["topics"]

    def describe_topic(self, name: str) -> dict:
        return self.transport.json("GET", f"/v1/topics/{_q(name)}")

    def alter_topic(self, name: str, configs: Mapping[str, object] | None = None,
                    partitions: int | None = None) -> dict:
        body: dict = {}
        if configs is not None:
            body["configs"] = dict(configs)
        if partitions is not None:
            body["partitions"] = partitions
        return self.transport.json("PATCH", f"/v1/topics/{_q(name)}", json=body)

    def delete_topic(self, name: str) -> None:
        self.transport.request("DELETE", f"/v1/topics/{_q(name)}")

    def delete_records(self, name: str, partition: int, before_offset: int) -> int:
        """Move the partition's log start offset; returns the new one."""
        return self.transport.json("POST", f"/v1/topics/{_q(name)}/partitions/{partition}/delete-records",
                                   json={"before_offset": before_offset})["log_start_offset"]

    def init_producer(self, transactional_id: str | None = None) -> tuple[int, int]:
        """(producer id, epoch) from Kafka's InitProducerId."""
        body = {"transactional_id": transactional_id} if transactional_id is not None else {}
        out = self.transport.json("POST", "/v1/producers", json=body)
        return out["producer_id"], out["producer_epoch"]

    def fetch(self, topic: str, partition: int, offset: int, *, max_records: int | None = None,
              encoding: str = "base64") -> dict:
        """Records of one partition from ``offset`` (base64 keys/values unless ``encoding='utf8'``)."""
        params: dict = {"offset": offset, "encoding": encoding}
        if max_records is not None:
            params["max_records"] = max_records
        return self.transport.json("GET", f"/v1/topics/{_q(topic)}/partitions/{partition}/records", params=params)

    # -- consumer groups ------------------------------------------------------------------
    def commit_offsets(self, group: str, offsets: Iterable[tuple]) -> list[dict]:
        """Commit ``(topic, partition, offset[, metadata])`` tuples for ``group`` atomically."""
        entries = []
        for o in offsets:
            topic, partition, offset = o[0], o[1], o[2]
            entry = {"topic": topic, "partition": partition, "offset": offset}
            if len(o) > 3 and o[3] is not None:
                entry["metadata"] = o[3]
            entries.append(entry)
        return self.transport.json("POST", f"/v1/groups/{_q(group)}/offsets", json={"offsets": entries})["offsets"]

    def fetch_offsets(self, group: str, topic: str | None = None) -> list[dict]:
        """Committed offset, metadata, commit time, high watermark and lag per partition."""
        params = {"topic": topic} if topic is not None else {}
        return self.transport.json("GET", f"/v1/groups/{_q(group)}/offsets", params=params)["offsets"]

    def list_groups(self) -> list[str]:
        return self.transport.json("GET", "/v1/groups")["groups"]

    def describe_group(self, group: str) -> dict:
        """Kafka's DescribeGroups: state, protocol, generation, members with assignments, committed offsets."""
        return self.transport.json("GET", f"/v1/groups/{_q(group)}")

    def delete_group(self, group: str) -> int:
        return self.transport.json("DELETE", f"/v1/groups/{_q(group)}")["deleted_offsets"]

    def close(self) -> None:
        if self._owns_transport:
            self.transport.close()

    def __enter__(self) -> "Admin":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
