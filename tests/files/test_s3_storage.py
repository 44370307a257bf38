"""The files storage on S3: the STORAGES entry chatforge/settings/files.py
builds for CHATFORGE_FILES_STORAGE=s3, through django-storages and boto3,
against a real S3-compatible server on loopback (moto's server mode,
tests/support/s3_server.py).

The settings module itself is loaded with the environment a deployment
gives it (not a copy of its dict), so what is tested is what runs."""

from __future__ import annotations

import hashlib
import importlib.util
import tempfile
import tracemalloc
from pathlib import Path
from types import ModuleType
from typing import BinaryIO

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.files import File
from django.core.files.base import ContentFile
from django.test import override_settings
from storages.backends.s3 import S3Storage

from chatforge.files.storage import file_storage
from tests.support.s3_server import S3Server, s3  # noqa: F401 - the session's S3 server fixture

FILES_SETTINGS = Path(__file__).resolve().parents[2] / "chatforge" / "settings" / "files.py"
MIB = 1024 * 1024
# Files up to this go as one PUT, bigger ones in parts of PART (chatforge/settings/files.py).
MULTIPART_THRESHOLD = 64 * MIB
PART = 8 * MIB


def load_files_settings(monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> ModuleType:
    """chatforge/settings/files.py run afresh with ``env`` in the environment."""
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    spec = importlib.util.spec_from_file_location("chatforge.settings._files_under_test", FILES_SETTINGS)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def bucket(s3: S3Server) -> str:  # noqa: F811
    return s3.create_bucket()


@pytest.fixture
def storage(s3: S3Server, bucket: str, monkeypatch: pytest.MonkeyPatch) -> S3Storage:  # noqa: F811
    """``file_storage()`` as a process configured for the bucket sees it
    (override_settings resets Django's cache of storages, and again after)."""
    files_settings = load_files_settings(monkeypatch, s3.storage_env(bucket))
    with override_settings(STORAGES=files_settings.STORAGES):
        yield file_storage()


def big_file(size: int) -> tuple[BinaryIO, str]:
    """A temporary file of ``size`` bytes that differ from MiB to MiB (a part
    sent twice or out of order shows), made a MiB at a time, and its SHA-256."""
    handle = tempfile.TemporaryFile()
    digest = hashlib.sha256()
    block = hashlib.sha256(b"chatforge").digest() * (MIB // 32)
    for i in range(0, size, MIB):
        piece = (i.to_bytes(8, "big") + block[8:])[: min(MIB, size - i)]
        handle.write(piece)
        digest.update(piece)
    handle.seek(0)
    return handle, digest.hexdigest()


def sha256_read_back(storage: S3Storage, name: str) -> str:
    digest = hashlib.sha256()
    with storage.open(name, "rb") as handle:
        for piece in iter(lambda: handle.read(MIB), b""):
            digest.update(piece)
    return digest.hexdigest()


def read_back(storage: S3Storage, name: str) -> bytes:
    with storage.open(name, "rb") as handle:
        return b"".join(iter(lambda: handle.read(MIB), b""))


def saved_with_peak_memory(storage: S3Storage, name: str, handle: BinaryIO) -> tuple[str, int]:
    """Save, and the most memory Python objects held meanwhile above what they held before (every thread's)."""
    storage.exists(name)  # the thread's client made first: botocore's service models are not the upload's
    tracemalloc.start()
    try:
        base, _ = tracemalloc.get_traced_memory()
        saved = storage.save(name, File(handle, name="upload"))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return saved, peak - base


def test_the_s3_setting_builds_django_storages_s3_storage(s3: S3Server, storage: S3Storage, bucket: str):  # noqa: F811
    assert isinstance(storage, S3Storage)
    assert storage.bucket_name == bucket
    assert storage.endpoint_url == s3.endpoint_url
    assert storage.region_name == "us-east-1"
    assert storage.file_overwrite is False and storage.default_acl is None
    assert storage.max_memory_size == MIB
    assert storage.transfer_config.multipart_threshold == MULTIPART_THRESHOLD
    assert storage.transfer_config.multipart_chunksize == PART
    assert storage.transfer_config.max_request_concurrency == 4
    assert storage.transfer_config.max_in_memory_upload_chunks == 4
    # Credentials come from boto3's standard variables, not from settings of ours.
    assert storage.access_key == s3.credentials_env()["AWS_ACCESS_KEY_ID"]


def test_s3_needs_a_bucket(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("CHATFORGE_FILES_S3_BUCKET", raising=False)
    with pytest.raises(ImproperlyConfigured, match="CHATFORGE_FILES_S3_BUCKET"):
        load_files_settings(monkeypatch, {"CHATFORGE_FILES_STORAGE": "s3"})


def test_a_file_up_to_64_mib_is_one_put_streamed_from_disk(s3: S3Server, storage: S3Storage, bucket: str):  # noqa: F811
    """What an upload hands the storage: a file on disk. Sent as it is read,
    it never is in memory whole."""
    size = 20 * MIB
    handle, sha256 = big_file(size)
    with handle:
        name, peak = saved_with_peak_memory(storage, "u/1/0b6c3f5e-one-put", handle)
    assert name == "u/1/0b6c3f5e-one-put"
    assert s3.keys(bucket) == [name]
    head = s3.client().head_object(Bucket=bucket, Key=name)
    assert "-" not in head["ETag"].strip('"'), head["ETag"]  # one PUT's ETag is the MD5: no part count
    assert head["ContentLength"] == size
    assert peak < PART, f"saving {size} bytes held {peak} bytes of Python objects at once"

    assert storage.exists(name)
    assert storage.size(name) == size
    with storage.open(name, "rb") as opened:
        assert opened.size == size
        first = opened.read(MIB)
        # Spooled to disk past 1 MiB, not held whole in the process's memory.
        assert opened.file._rolled
        assert len(first) == MIB
    assert sha256_read_back(storage, name) == sha256

    storage.delete(name)
    assert not storage.exists(name)
    assert s3.keys(bucket) == []


def test_a_bigger_file_goes_in_parts_with_at_most_four_in_memory(s3: S3Server, storage: S3Storage, bucket: str):  # noqa: F811
    size = MULTIPART_THRESHOLD + PART + 123  # ten parts, the last one short
    handle, sha256 = big_file(size)
    with handle:
        name, peak = saved_with_peak_memory(storage, "u/1/parts", handle)
    # A multipart upload's ETag is "<MD5 of the parts' MD5s>-<number of parts>".
    head = s3.client().head_object(Bucket=bucket, Key=name)
    assert head["ETag"].strip('"').endswith("-10"), head["ETag"]
    assert head["ContentLength"] == size
    # s3transfer copies each part into memory: four waiting or in flight and
    # the one being read (45 MiB with botocore's own buffers, measured), never
    # the ten (boto3's defaults held 82 MiB).
    assert peak < 7 * PART, f"saving {size} bytes held {peak} bytes of Python objects at once"
    assert sha256_read_back(storage, name) == sha256
    storage.delete(name)
    assert s3.keys(bucket) == []


def test_a_small_file_is_one_put(s3: S3Server, storage: S3Storage, bucket: str):  # noqa: F811
    name = storage.save("user-1/notes.txt", ContentFile(b"Some notes.\n"))
    head = s3.client().head_object(Bucket=bucket, Key=name)
    assert "-" not in head["ETag"].strip('"')
    assert read_back(storage, name) == b"Some notes.\n"
    assert storage.size(name) == len(b"Some notes.\n")


def test_a_zero_byte_file(storage: S3Storage):
    name = storage.save("user-1/empty", ContentFile(b""))
    assert storage.size(name) == 0
    assert read_back(storage, name) == b""


def test_a_saved_name_is_never_overwritten(s3: S3Server, storage: S3Storage, bucket: str):  # noqa: F811
    first = storage.save("user-1/same", ContentFile(b"first"))
    second = storage.save("user-1/same", ContentFile(b"second"))
    assert first == "user-1/same" and second != first
    assert read_back(storage, first) == b"first" and read_back(storage, second) == b"second"
    assert s3.keys(bucket) == sorted([first, second])


def test_a_missing_key(storage: S3Storage):
    assert not storage.exists("user-1/missing")
    with pytest.raises(FileNotFoundError):
        storage.open("user-1/missing", "rb")
    with pytest.raises(FileNotFoundError):
        storage.size("user-1/missing")
    # Deleting what is gone is not an error: a retried delete finishes.
    storage.delete("user-1/missing")


def test_keys_cannot_leave_the_storage(storage: S3Storage):
    from django.core.exceptions import SuspiciousOperation

    with pytest.raises(SuspiciousOperation):
        storage.save("../outside", ContentFile(b"x"))
