"""The root's cluster metadata: versions written put-if-absent, concurrent updates from several stores (fronts)
serialised without losing one, followers catching up, old versions cleaned, on a local and an S3 root."""

from __future__ import annotations

import dataclasses
import threading
import time

import pytest

from lakelog.cluster import cluster_metadata as cm
from lakelog.cluster.cluster_metadata import ClusterMetadata, MetadataImage
from lakelog.errors import InvalidRequest
from lakelog.security.acl import AclBinding


def add_acl(name: str):
    def change(image: MetadataImage) -> MetadataImage:
        return dataclasses.replace(image, acls=image.acls + (AclBinding("Topic", name, "Literal", "User:a", "*",
                                                                        "Read", "Allow"),))
    return change


def test_concurrent_updates_from_two_fronts_all_land(root):
    a, b = ClusterMetadata(root), ClusterMetadata(root)
    errors = []

    def update(store, name):
        try:
            store.update(add_acl(name))
        except Exception as e:  # noqa: BLE001 -- reported below: an update that raised is one not made
            errors.append(e)

    threads = [threading.Thread(target=update, args=(s, f"t{i}")) for i, s in enumerate([a, b] * 4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []  # e.g. the first listing racing another front's creation of the directory
    assert {x.resource_name for x in a.catch_up().acls} == {f"t{i}" for i in range(8)}
    assert b.catch_up().version == a.image.version == 7


def test_a_follower_sees_a_change_within_its_poll(root):
    writer, follower = ClusterMetadata(root), ClusterMetadata(root, poll_s=0.1).start()
    try:
        writer.update(lambda img: dataclasses.replace(img, quotas={(("user", "x"),): {"request_percentage": 5.0}}))
        deadline = time.monotonic() + 10
        while not follower.quotas() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert follower.quotas() == {(("user", "x"),): {"request_percentage": 5.0}}
    finally:
        follower.stop()


def test_an_unchanged_image_writes_nothing_and_a_refused_change_raises(root):
    s = ClusterMetadata(root)
    assert s.update(lambda img: img).version == -1

    def refuse(img):
        raise InvalidRequest("no")
    with pytest.raises(InvalidRequest):
        s.update(refuse)
    assert s.catch_up().version == -1


def test_old_versions_are_cleaned_and_a_far_behind_follower_relists(root, monkeypatch):
    monkeypatch.setattr(cm, "KEEP", 3)
    behind = ClusterMetadata(root)
    behind.catch_up()
    writer = ClusterMetadata(root)
    for i in range(8):
        writer.update(add_acl(f"t{i}"))
    monkeypatch.setattr(cm, "LIST_EVERY", 1)
    assert behind.catch_up().version == 7 and len(behind.image.acls) == 8


def test_images_round_trip_through_json():
    from lakelog.security.scram import derive

    image = MetadataImage(3, (AclBinding("Group", "g", "Prefixed", "User:*", "10.0.0.1", "Read", "Deny"),),
                          {("u", "SCRAM-SHA-512"): derive("SCRAM-SHA-512", "p", b"salt")}, frozenset({("u", "x")}),
                          {(("client-id", None), ("user", "u")): {"producer_byte_rate": 1024.0}},
                          {"": {"background.threads": "9"}})
    again = MetadataImage.from_json(3, image.to_json())
    assert again.to_json() == image.to_json() and again.scram == image.scram and again.acls == image.acls
