"""bench/moto_server.py, the S3 endpoint of the tests and the benchmarks: every S3 request goes straight to moto's S3
app, moto's own API (``/moto-api``) still to moto's dispatcher. That its conditional writes stay atomic is
tests/storage/test_delta_commit.py::test_racing_writers_exactly_one_wins (on the ``s3`` root, through this server)."""

from __future__ import annotations

import boto3
import httpx
import pytest
from botocore.exceptions import ClientError

from bench.http_produce import MotoProcess


@pytest.fixture
def moto():
    server = MotoProcess()  # a process of its own: /moto-api/reset empties every bucket of the process it reaches
    yield server
    server.close()


def _client(moto):
    return boto3.client("s3", endpoint_url=moto.endpoint, aws_access_key_id="bench", aws_secret_access_key="bench",
                        region_name="us-east-1")


def test_s3_operations_and_moto_api(moto):
    s3 = _client(moto)
    s3.put_object(Bucket=moto.BUCKET, Key="t/_delta_log/00000000000000000000.json", Body=b'{"commitInfo":{}}\n')
    s3.put_object(Bucket=moto.BUCKET, Key="t/part-0.parquet", Body=b"0123456789")
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=moto.BUCKET, Key="t/_delta_log/00000000000000000000.json", Body=b"{}", IfNoneMatch="*")
    assert e.value.response["Error"]["Code"] == "PreconditionFailed"
    assert s3.get_object(Bucket=moto.BUCKET, Key="t/part-0.parquet", Range="bytes=2-4")["Body"].read() == b"234"
    assert s3.head_object(Bucket=moto.BUCKET, Key="t/part-0.parquet")["ContentLength"] == 10
    listed = s3.list_objects_v2(Bucket=moto.BUCKET, Prefix="t/_delta_log/")
    assert [o["Key"] for o in listed["Contents"]] == ["t/_delta_log/00000000000000000000.json"]
    s3.delete_object(Bucket=moto.BUCKET, Key="t/part-0.parquet")
    assert s3.list_objects_v2(Bucket=moto.BUCKET, Prefix="t/part-").get("KeyCount") == 0
    assert httpx.post(f"{moto.endpoint}/moto-api/reset").status_code == 200
    assert s3.list_buckets()["Buckets"] == []


def test_s3_requests_skip_motos_service_lookup(monkeypatch):
    """moto's dispatcher looks each request's service up among moto's modules on disk, under a process-wide lock;
    an S3 request here never reaches it (the server's process: this one, so the lookup can be counted)."""
    from moto import backends

    from bench.moto_server import S3Server

    lookups = []
    real = backends.list_of_moto_modules
    monkeypatch.setattr(backends, "list_of_moto_modules", lambda: lookups.append(1) or real())
    server = S3Server().start()
    try:
        s3 = boto3.client("s3", endpoint_url=server.endpoint, aws_access_key_id="bench",
                          aws_secret_access_key="bench", region_name="us-east-1")
        s3.create_bucket(Bucket="lookup-count")
        s3.put_object(Bucket="lookup-count", Key="k", Body=b"v")
        assert s3.get_object(Bucket="lookup-count", Key="k")["Body"].read() == b"v"
        assert lookups == []
        s3.delete_object(Bucket="lookup-count", Key="k")
        s3.delete_bucket(Bucket="lookup-count")
    finally:
        server.stop()
