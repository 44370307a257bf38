"""An S3-compatible server on loopback: moto's server mode (``python -m
moto.server``) as a subprocess on a free port. It is a real HTTP server
speaking the S3 wire protocol, so django-storages and boto3 run their own
code paths (signatures, multipart uploads, 404s) against it; nothing of ours
is replaced.

Tests create their buckets through boto3 (``S3Server.create_bucket``), and
give ChatForge the bucket the way a deployment does: ``storage_env`` is the
environment of a process (web or worker) storing its files there.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import boto3
import httpx
import pytest

from .stack import Process, free_port, start_process, wait_for

# moto accepts any credentials; these are what every client of it is given.
ACCESS_KEY_ID = "chatforge-test-key"
SECRET_ACCESS_KEY = "chatforge-test-secret"
REGION = "us-east-1"


@dataclass
class S3Server:
    endpoint_url: str  # http://127.0.0.1:<port>
    process: Process

    def client(self):
        return boto3.client(
            "s3", endpoint_url=self.endpoint_url, region_name=REGION,
            aws_access_key_id=ACCESS_KEY_ID, aws_secret_access_key=SECRET_ACCESS_KEY,
        )

    def create_bucket(self, prefix: str = "chatforge-files") -> str:
        """A new, empty bucket with a name of its own (tests never share one)."""
        name = f"{prefix}-{uuid.uuid4().hex[:12]}"
        self.client().create_bucket(Bucket=name)
        return name

    def keys(self, bucket: str) -> list[str]:
        """Every object key in the bucket, as the S3 API lists them."""
        paginator = self.client().get_paginator("list_objects_v2")
        return sorted(obj["Key"] for page in paginator.paginate(Bucket=bucket) for obj in page.get("Contents", ()))

    def credentials_env(self) -> dict[str, str]:
        """boto3's standard variables, which django-storages reads too."""
        return {"AWS_ACCESS_KEY_ID": ACCESS_KEY_ID, "AWS_SECRET_ACCESS_KEY": SECRET_ACCESS_KEY}

    def storage_env(self, bucket: str) -> dict[str, str]:
        """The environment of a ChatForge process keeping its files in ``bucket``
        (the variables deploy/env.example documents)."""
        return {
            "CHATFORGE_FILES_STORAGE": "s3",
            "CHATFORGE_FILES_S3_BUCKET": bucket,
            "CHATFORGE_FILES_S3_ENDPOINT_URL": self.endpoint_url,
            "CHATFORGE_FILES_S3_REGION": REGION,
            **self.credentials_env(),
        }


@contextmanager
def s3_server() -> Iterator[S3Server]:
    port = free_port()
    log_dir = Path(tempfile.mkdtemp(prefix="chatforge-s3-"))
    process = start_process(
        "moto-s3", [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        env={"PATH": "/usr/bin:/bin", "PYTHONUNBUFFERED": "1"}, log_dir=log_dir,
    )
    endpoint_url = f"http://127.0.0.1:{port}"

    def answering() -> bool:
        try:
            # moto's own endpoint listing its state: answers once the server is up.
            return httpx.get(f"{endpoint_url}/moto-api/", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        wait_for(answering, timeout=60, what="the moto S3 server", process=process)
        yield S3Server(endpoint_url=endpoint_url, process=process)
    finally:
        process.stop()


@pytest.fixture(scope="session")
def s3() -> Iterator[S3Server]:
    """The session's S3 server (import this fixture into a test module)."""
    with s3_server() as server:
        yield server
