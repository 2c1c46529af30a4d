"""Constants and options of the test S3 server (moto on loopback, bench/moto_server.py), importable from any test
module."""

from __future__ import annotations

BUCKET = "lakelog-test"
CREDS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1",
         "AWS_DEFAULT_REGION": "us-east-1"}


def s3_options(endpoint: str) -> dict[str, str]:
    return {"aws_endpoint_url": endpoint, "aws_access_key_id": "testing", "aws_secret_access_key": "testing",
            "aws_region": "us-east-1", "aws_allow_http": "true"}
