"""The files storage on S3: the STORAGES entry chatforge/settings/files.py
builds for CHATFORGE_FILES_STORAGE=s3, through django-storages and boto3,
against a real S3-compatible server on loopback (moto's server mode,
tests/support/s3_server.py).

The settings module itself is loaded with the environment a deployment
gives it (not a copy of its dict), so what is tested is what runs."""

from __future__ import annotations

import hashlib
import importlib.util
import io
import tempfile
from pathlib import Path
from types import ModuleType

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
# Three parts of 8 MiB (settings' multipart threshold and part size), the last one short.
BIG = 20 * MIB


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


def pattern(size: int) -> bytes:
    """Bytes that differ from part to part, so a part sent twice or out of order shows."""
    block = hashlib.sha256(b"chatforge").digest() * (MIB // 32)
    return b"".join(i.to_bytes(4, "big") + block[4:] for i in range(size // MIB)) + block[: size % MIB]


class OnlyRead(io.RawIOBase):
    """A stream that can only be read forward, like a buffered pipe: not
    seekable, no size; a read returns all it was asked for until the end.
    (s3transfer decides on a multipart upload from its first read of 8 MiB:
    a stream that answers with less is sent as one PUT, read whole into
    memory. ``file_create`` spools such streams to a temporary file first.)"""

    def __init__(self, data: bytes) -> None:
        super().__init__()
        self._data, self._pos = data, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        piece = self._data[self._pos:self._pos + len(buffer)]
        buffer[:len(piece)] = piece
        self._pos += len(piece)
        return len(piece)


def read_back(storage: S3Storage, name: str) -> bytes:
    with storage.open(name, "rb") as handle:
        return b"".join(iter(lambda: handle.read(MIB), b""))


def test_the_s3_setting_builds_django_storages_s3_storage(s3: S3Server, storage: S3Storage, bucket: str):  # noqa: F811
    assert isinstance(storage, S3Storage)
    assert storage.bucket_name == bucket
    assert storage.endpoint_url == s3.endpoint_url
    assert storage.region_name == "us-east-1"
    assert storage.file_overwrite is False and storage.default_acl is None
    assert storage.max_memory_size == MIB
    assert storage.transfer_config.multipart_threshold == 8 * MIB
    assert storage.transfer_config.max_request_concurrency == 4
    # Credentials come from boto3's standard variables, not from settings of ours.
    assert storage.access_key == s3.credentials_env()["AWS_ACCESS_KEY_ID"]


def test_s3_needs_a_bucket(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("CHATFORGE_FILES_S3_BUCKET", raising=False)
    with pytest.raises(ImproperlyConfigured, match="CHATFORGE_FILES_S3_BUCKET"):
        load_files_settings(monkeypatch, {"CHATFORGE_FILES_STORAGE": "s3"})


def test_a_big_file_is_saved_in_parts_read_back_sized_and_deleted(s3: S3Server, storage: S3Storage, bucket: str):  # noqa: F811
    data = pattern(BIG)
    with tempfile.TemporaryFile() as spooled:  # what an upload handler hands over: a file on disk
        spooled.write(data)
        spooled.seek(0)
        name = storage.save("user-1/0b6c3f5e-big.bin", File(spooled, name="big.bin"))
    assert name == "user-1/0b6c3f5e-big.bin"
    assert s3.keys(bucket) == [name]
    # A multipart upload's ETag is "<md5 of the parts' md5s>-<parts>": three parts of at most 8 MiB.
    head = s3.client().head_object(Bucket=bucket, Key=name)
    assert head["ETag"].strip('"').endswith("-3"), head["ETag"]
    assert head["ContentLength"] == BIG

    assert storage.exists(name)
    assert storage.size(name) == BIG
    with storage.open(name, "rb") as handle:
        assert handle.size == BIG
        first = handle.read(MIB)
        # Spooled to disk past 1 MiB, not held whole in the process's memory.
        assert handle.file._rolled
        rest = b"".join(iter(lambda: handle.read(MIB), b""))
    assert hashlib.sha256(first + rest).hexdigest() == hashlib.sha256(data).hexdigest()

    storage.delete(name)
    assert not storage.exists(name)
    assert s3.keys(bucket) == []


def test_a_stream_that_cannot_seek_is_uploaded_in_parts(s3: S3Server, storage: S3Storage, bucket: str):  # noqa: F811
    data = pattern(BIG)
    name = storage.save("user-1/stream.bin", File(OnlyRead(data), name="stream.bin"))
    head = s3.client().head_object(Bucket=bucket, Key=name)
    assert head["ETag"].strip('"').endswith("-3"), head["ETag"]
    assert read_back(storage, name) == data


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
