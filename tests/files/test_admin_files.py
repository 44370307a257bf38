"""Files in the admin (chatforge/adminsite/files.py): each user's files
with sizes and totals, searchable and filtered, read-only; deleting one or
several deletes their bytes; file quotas are edited there."""

from __future__ import annotations

import pytest

from chatforge.files.limits import human_size
from chatforge.files.models import FileQuota, StoredFile
from chatforge.files.storage import file_storage
from tests.support.files import PNG_BYTES, image_file, stored_file

# Real commits: a deletion's bytes go when it commits.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("own_files_dir")]

LIST = "/admin/files/storedfile/"


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create_user(username="alice", password="pw")


def test_the_list_shows_sizes_and_each_users_total(admin_client, alice):
    stored_file(alice, name="notes.txt", data=b"n" * 1536)
    image_file(alice)
    page = admin_client.get(LIST).content.decode()
    assert "notes.txt" in page and "pixel.png" in page and "alice" in page
    assert "1.5 KiB" in page  # the file's size
    assert human_size(1536 + len(PNG_BYTES)) in page  # alice's total, on each of her rows
    # The bytes of the files listed, in the page's title (with the search applied).
    assert f"Files ({human_size(1536)} in the files listed)" in admin_client.get(f"{LIST}?q=notes").content.decode()


def test_search_and_filters(admin_client, alice):
    stored_file(alice, name="notes.txt")
    image_file(alice)
    by_name = admin_client.get(f"{LIST}?q=notes").content.decode()
    assert "notes.txt" in by_name and "pixel.png" not in by_name
    by_user = admin_client.get(f"{LIST}?q=alice").content.decode()
    assert "notes.txt" in by_user and "pixel.png" in by_user
    documents = admin_client.get(f"{LIST}?kind__exact=document").content.decode()
    assert "notes.txt" in documents and "pixel.png" not in documents
    for query in ("text_status__exact=ready", "source__exact=upload", "source__exact=tool"):
        assert admin_client.get(f"{LIST}?{query}").status_code == 200, query


def test_a_file_is_read_only_with_a_preview_of_its_text(admin_client, alice):
    file = stored_file(alice, name="long.txt", data=b"word " * 1000)
    page = admin_client.get(f"{LIST}{file.pk}/change/")
    assert page.status_code == 200
    text = page.content.decode()
    assert "long.txt" in text and "5000 characters in all" in text
    assert 'name="_save"' not in text  # nothing to save: read-only
    assert admin_client.get(f"{LIST}add/").status_code == 403


def test_deleting_one_file_deletes_its_bytes(admin_client, alice):
    file = image_file(alice)
    assert file_storage().exists(file.storage_name)
    response = admin_client.post(f"{LIST}{file.pk}/delete/", {"post": "yes"})
    assert response.status_code == 302
    assert not StoredFile.objects.filter(pk=file.pk).exists()
    assert not file_storage().exists(file.storage_name)


def test_deleting_several_files_deletes_their_bytes(admin_client, alice):
    files = [image_file(alice), stored_file(alice, name="a.txt"), stored_file(alice, name="b.txt")]
    kept = stored_file(alice, name="kept.txt")
    response = admin_client.post(LIST, {"action": "delete_selected", "_selected_action": [f.pk for f in files],
                                        "post": "yes"})
    assert response.status_code == 302
    assert list(StoredFile.objects.all()) == [kept]
    assert not any(file_storage().exists(f.storage_name) for f in files)
    assert file_storage().exists(kept.storage_name)


def test_a_users_file_quota_is_set_and_changed_in_the_admin(admin_client, alice):
    image_file(alice)
    added = admin_client.post("/admin/files/filequota/add/", {"user": alice.pk, "max_bytes": 5000})
    assert added.status_code == 302, added.content.decode()[:2000]
    quota = FileQuota.objects.get(user=alice)
    assert quota.max_bytes == 5000
    listing = admin_client.get("/admin/files/filequota/").content.decode()
    assert human_size(5000) in listing and human_size(len(PNG_BYTES)) in listing  # the limit and what is stored
    changed = admin_client.post(f"/admin/files/filequota/{quota.pk}/change/", {"user": alice.pk, "max_bytes": 10})
    assert changed.status_code == 302
    quota.refresh_from_db()
    assert quota.max_bytes == 10
    refused = admin_client.post(f"/admin/files/filequota/{quota.pk}/change/", {"user": alice.pk, "max_bytes": -1})
    assert refused.status_code == 200 and "cannot be negative" in refused.content.decode()
