"""The limits on files (docs/files.md, "Limits and bad input"): an empty
file is a 400; a file over CHATFORGE_MAX_FILE_BYTES a 413 naming the limit;
a file that would take the user past their quota (the admin's FileQuota,
else CHATFORGE_USER_FILE_BYTES) a 413 saying what is used and allowed, and
that holds when uploads race. A refusal stores nothing."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from chatforge.errors import FileQuotaExceeded
from chatforge.files.limits import human_size
from chatforge.files.models import FileQuota, StoredFile
from chatforge.files.services import file_create
from chatforge.files.storage import file_storage

from .conftest import upload, uploaded

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("own_files_dir")]


def stored_names(user) -> list[str]:
    """What the files storage holds under the user's prefix."""
    storage = file_storage()
    prefix = f"u/{user.pk}"
    if not storage.exists(prefix):
        return []
    return storage.listdir(prefix)[1]


def test_an_empty_file_is_refused(client):
    response = upload(client, "empty.txt", b"")
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "invalid_request" and "empty" in error["message"]
    assert not StoredFile.objects.exists() and stored_names(client.user) == []


def test_a_file_over_the_size_limit_is_refused_with_the_limit(client, settings):
    settings.CHATFORGE_MAX_FILE_BYTES = 1000
    assert uploaded(client, "exact.txt", b"a" * 1000)["size"] == 1000
    response = upload(client, "over.txt", b"a" * 1001)
    assert response.status_code == 413, response.content
    error = response.json()["error"]
    assert error["code"] == "file_too_large"
    assert error["details"] == {"limit_bytes": 1000}
    assert "1000 bytes" in error["message"]
    assert StoredFile.objects.count() == 1 and len(stored_names(client.user)) == 1


def test_the_users_quota_says_what_is_used_and_allowed(client, settings):
    settings.CHATFORGE_USER_FILE_BYTES = 2500
    first = uploaded(client, "one.txt", b"1" * 1000)
    uploaded(client, "two.txt", b"2" * 1000)
    response = upload(client, "three.txt", b"3" * 1000)
    assert response.status_code == 413, response.content
    error = response.json()["error"]
    assert error["code"] == "file_quota_exceeded"
    assert error["details"] == {"used_bytes": 2000, "allowed_bytes": 2500, "file_bytes": 1000}
    assert f"{human_size(2000)} of {human_size(2500)} is used" in error["message"]
    assert len(stored_names(client.user)) == 2
    # Deleting a file makes room again.
    assert client.delete(f"/api/files/{first['id']}/").status_code == 204
    uploaded(client, "three.txt", b"3" * 1000)


def test_the_admins_quota_overrides_the_default(client, other, settings):
    settings.CHATFORGE_USER_FILE_BYTES = 10_000
    FileQuota.objects.create(user=client.user, max_bytes=500)
    response = upload(client, "big.txt", b"x" * 501)
    assert response.status_code == 413
    assert response.json()["error"]["details"]["allowed_bytes"] == 500
    # Another user keeps the default.
    uploaded(other, "big.txt", b"x" * 501)
    FileQuota.objects.filter(user=client.user).update(max_bytes=0)
    assert upload(client, "tiny.txt", b"x").status_code == 413


@pytest.mark.django_db(transaction=True)
def test_the_quota_holds_when_uploads_race(make_user, idle_broker, settings):
    """Eight uploads of 1,000 bytes at once against a quota of 2,500: each
    fits alone, only two fit together, and exactly two are stored."""
    settings.CHATFORGE_USER_FILE_BYTES = 2500
    user, _ = make_user()
    uploads = 8
    start = threading.Barrier(uploads)
    stored: list[StoredFile] = []
    refused: list[FileQuotaExceeded] = []
    failed: list[BaseException] = []

    def one(n: int) -> None:
        try:
            start.wait()
            stored.append(file_create(user=user, source="upload", name=f"{n}.png",
                                      content=b"\x89PNG\r\n\x1a\n" + bytes([n]) * 992))
        except FileQuotaExceeded as exc:
            refused.append(exc)
        except BaseException as exc:  # reported below, not lost in the thread
            failed.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=one, args=(n,)) for n in range(uploads)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failed, failed
    assert (len(stored), len(refused)) == (2, 6)
    assert StoredFile.objects.filter(user=user).count() == 2
    # The refused uploads' bytes, written before the locked check, were deleted again.
    assert sorted(stored_names(user)) == sorted(str(file.pk) for file in stored)
