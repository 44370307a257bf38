"""A file's bytes go with its row, once the deletion commits: deleted
through the API, by deleting its conversation (which cascades), or by
deleting its user (docs/files.md). Real commits here, so that what runs on
commit runs."""

from __future__ import annotations

import pytest
from django.db import transaction

from chatforge.files.models import StoredFile
from chatforge.files.storage import file_storage

from . import samples
from .conftest import uploaded

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("own_files_dir")]


def has_bytes(file_id: str, storage_names: dict[str, str]) -> bool:
    return file_storage().exists(storage_names[file_id])


def storage_names_of(*bodies: dict) -> dict[str, str]:
    rows = StoredFile.objects.filter(pk__in=[body["id"] for body in bodies]).values_list("id", "storage_name")
    return {str(file_id): storage_name for file_id, storage_name in rows}


def test_deleting_a_file_deletes_its_bytes(client):
    file = uploaded(client, "pixel.png", samples.PNG)
    kept = uploaded(client, "other.png", samples.PNG)
    names = storage_names_of(file, kept)
    assert has_bytes(file["id"], names)
    response = client.delete(f"/api/files/{file['id']}/")
    assert response.status_code == 204
    assert not StoredFile.objects.filter(pk=file["id"]).exists()
    assert not has_bytes(file["id"], names)
    assert has_bytes(kept["id"], names)
    assert client.get(f"/api/files/{file['id']}/content/").status_code == 404


def test_a_deletion_rolled_back_keeps_the_bytes(client):
    file = uploaded(client, "pixel.png", samples.PNG)
    names = storage_names_of(file)
    with pytest.raises(RuntimeError), transaction.atomic():
        StoredFile.objects.get(pk=file["id"]).delete()
        raise RuntimeError("changed my mind")
    assert StoredFile.objects.filter(pk=file["id"]).exists() and has_bytes(file["id"], names)


def test_deleting_a_conversation_deletes_its_files_bytes(client):
    conversation = client.post("/api/conversations/", {}, format="json").json()["id"]
    inside = [uploaded(client, "a.png", samples.PNG, conversation_id=conversation),
              uploaded(client, "b.txt", b"text\n", conversation_id=conversation)]
    outside = uploaded(client, "c.png", samples.PNG)
    names = storage_names_of(*inside, outside)
    assert client.delete(f"/api/conversations/{conversation}/").status_code == 204
    assert not StoredFile.objects.filter(pk__in=[f["id"] for f in inside]).exists()
    assert not any(has_bytes(f["id"], names) for f in inside)
    assert has_bytes(outside["id"], names)


def test_deleting_a_user_deletes_their_files_bytes(client, other):
    conversation = client.post("/api/conversations/", {}, format="json").json()["id"]
    theirs = [uploaded(client, "a.png", samples.PNG, conversation_id=conversation),
              uploaded(client, "b.png", samples.PNG)]
    someone_elses = uploaded(other, "c.png", samples.PNG)
    names = storage_names_of(*theirs, someone_elses)
    client.user.delete()
    assert not StoredFile.objects.filter(pk__in=[f["id"] for f in theirs]).exists()
    assert not any(has_bytes(f["id"], names) for f in theirs)
    assert has_bytes(someone_elses["id"], names)
