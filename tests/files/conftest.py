"""Clients of the files API: a user with a token, and a second user."""

from __future__ import annotations

import copy

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.test import APIClient

from tests.support.api_clients import api_client


@pytest.fixture
def own_files_dir(settings, tmp_path):
    """A files storage directory of this test's own, so that what a test
    finds stored is what it stored (user ids repeat from run to run)."""
    storages = copy.deepcopy(settings.STORAGES)
    storages["chatforge_files"]["OPTIONS"]["location"] = str(tmp_path / "files")
    settings.STORAGES = storages
    return tmp_path / "files"


@pytest.fixture
def client(make_user, idle_broker) -> APIClient:
    return api_client(*make_user())


@pytest.fixture
def other(make_user, idle_broker) -> APIClient:
    return api_client(*make_user())


def upload(client: APIClient, name: str, data: bytes, *, content_type: str = "application/octet-stream",
           **fields):
    """``POST /api/files/`` with the file in the form field ``file``."""
    return client.post("/api/files/", {"file": SimpleUploadedFile(name, data, content_type=content_type), **fields},
                       format="multipart")


def uploaded(client: APIClient, name: str, data: bytes, **fields) -> dict:
    response = upload(client, name, data, **fields)
    assert response.status_code == 201, response.content
    return response.json()


BOUNDARY = "chatforge-test-boundary"


def raw_upload(client: APIClient, filename: str, data: bytes):
    """An upload whose part header carries ``filename`` exactly as given
    (Django's test client would take its basename before sending)."""
    quoted = filename.replace('"', '\\"')
    body = (f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="{quoted}"\r\n'
            "Content-Type: application/octet-stream\r\n\r\n").encode() + data + f"\r\n--{BOUNDARY}--\r\n".encode()
    return client.generic("POST", "/api/files/", body, content_type=f"multipart/form-data; boundary={BOUNDARY}")
