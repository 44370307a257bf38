"""Uploading through the REST API (``POST /api/files/``): the type is read
from the bytes (never the name or the client's Content-Type), the name is
made safe, the answer is the file's shape; another user's conversation is
not found, as a missing one is (docs/files.md, "The API")."""

from __future__ import annotations

import hashlib
import uuid

import pytest

from chatforge.files.models import StoredFile
from chatforge.files.storage import file_storage

from . import samples
from .conftest import raw_upload, upload, uploaded

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("own_files_dir")]

FILE_KEYS = {"id", "name", "content_type", "kind", "size", "sha256", "created_at", "conversation_id", "message_id",
             "source", "text_status", "text_error", "content_url"}


@pytest.mark.parametrize(("name", "data", "content_type", "kind"), [
    ("pixel.png", samples.PNG, "image/png", "image"),
    ("photo.jpg", samples.JPEG, "image/jpeg", "image"),
    ("anim.gif", samples.GIF, "image/gif", "image"),
    ("shot.webp", samples.WEBP, "image/webp", "image"),
    ("report.pdf", samples.PDF, "application/pdf", "document"),
    ("letter.docx", samples.DOCX, samples.DOCX_TYPE, "document"),
    ("sheet.xlsx", samples.XLSX, samples.XLSX_TYPE, "document"),
    ("slides.pptx", samples.PPTX, samples.PPTX_TYPE, "document"),
    ("notes.txt", samples.TEXT, "text/plain", "document"),
    ("README.md", b"# Title\n\nSome *text*.\n", "text/markdown", "document"),
    ("data.csv", b"a,b\n1,2\n", "text/csv", "document"),
    ("page.html", samples.HTML, "text/html", "document"),
    ("main.py", b"print('hi')\n", "text/x-python", "document"),
    ("config.json", b'{"a": 1}\n', "text/plain", "document"),
    ("Makefile", b"all:\n\techo hi\n", "text/plain", "document"),
    # SVG can carry script: never an image here, only text.
    ("drawing.svg", samples.SVG, "text/plain", "document"),
])
def test_each_type_taken_is_read_from_the_bytes(client, name, data, content_type, kind):
    body = uploaded(client, name, data)
    assert set(body) == FILE_KEYS
    assert (body["content_type"], body["kind"]) == (content_type, kind)
    assert body["name"] == name and body["size"] == len(data)
    assert body["sha256"] == hashlib.sha256(data).hexdigest()
    assert body["source"] == "upload" and body["conversation_id"] is None and body["message_id"] is None
    assert body["content_url"] == f"/api/files/{body['id']}/content/"
    # Documents are read to text by a task (text.schedule_text_reading); images have nothing to read.
    assert body["text_status"] == ("pending" if kind == "document" else "none")
    file = StoredFile.objects.get(pk=body["id"])
    assert file.user == client.user
    with file_storage().open(file.storage_name, "rb") as stored:
        assert stored.read() == data


@pytest.mark.parametrize(("name", "data", "declared", "content_type"), [
    ("report.pdf", samples.PNG, "application/pdf", "image/png"),
    ("photo.png", samples.PDF, "image/png", "application/pdf"),
    ("notes.txt", samples.DOCX, "text/plain", samples.DOCX_TYPE),
    ("picture.png", b"just some text\n", "image/png", "text/plain"),
    ("page.md", samples.HTML, "text/html", "text/markdown"),  # a text type only ever from text's extension
    ("evil.svg", samples.PNG, "image/svg+xml", "image/png"),
])
def test_neither_the_extension_nor_the_declared_type_changes_what_the_bytes_are(client, name, data, declared,
                                                                              content_type):
    assert uploaded(client, name, data, content_type=declared)["content_type"] == content_type


@pytest.mark.parametrize(("name", "data", "sniffed_as"), [
    ("movie.mp4", samples.MP4, "video/mp4"),
    ("tool.pdf", samples.ELF, "application/x-executable"),
    ("archive.zip", samples.PLAIN_ZIP, "a ZIP archive (not a Word, Excel or PowerPoint file)"),
    ("letter.docx", samples.DAMAGED_ZIP, "a damaged ZIP archive"),
    ("blob.png", samples.UNKNOWN_BINARY, "binary data of no known type"),
    ("latin1.txt", samples.LATIN1_TEXT, "binary data of no known type"),  # not UTF-8
    ("nul.txt", b"text with a \x00 NUL\n", "binary data of no known type"),
])
def test_other_types_are_refused_415_naming_what_they_are(client, name, data, sniffed_as):
    response = upload(client, name, data)
    assert response.status_code == 415, response.content
    error = response.json()["error"]
    assert error["code"] == "unsupported_file_type"
    assert error["details"]["sniffed_as"] == sniffed_as
    assert sniffed_as in error["message"] and "PDF" in error["message"]
    assert "image/png" in error["details"]["accepted"] and samples.DOCX_TYPE in error["details"]["accepted"]
    assert not StoredFile.objects.exists()


@pytest.mark.parametrize(("sent", "kept"), [
    ("../../etc/passwd.txt", "passwd.txt"),
    ("/etc/hosts", "hosts"),
    ("..\\..\\boot.ini", "boot.ini"),
    ("C:\\Users\\me\\plan.txt", "plan.txt"),
    ("invoice\u202etxt.exe", "invoicetxt.exe"),
    ("x" * 300 + ".txt", "x" * 196 + ".txt"),
    ("résumé — 日本語.txt", "résumé — 日本語.txt"),
])
def test_names_are_made_safe(client, sent, kept):
    response = raw_upload(client, sent, b"plain text\n")
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["name"] == kept
    file = StoredFile.objects.get(pk=body["id"])
    # The storage key is ours, never the client's name.
    assert file.storage_name == f"u/{client.user.pk}/{file.pk}"


def test_an_upload_can_be_filed_under_the_users_conversation(client):
    conversation = client.post("/api/conversations/", {}, format="json").json()["id"]
    body = uploaded(client, "pixel.png", samples.PNG, conversation_id=conversation)
    assert body["conversation_id"] == conversation
    listed = client.get(f"/api/conversations/{conversation}/files/").json()
    assert [file["id"] for file in listed["results"]] == [body["id"]] and listed["count"] == 1


def test_another_users_conversation_is_not_found_as_a_missing_one_is(client, other):
    theirs = other.post("/api/conversations/", {}, format="json").json()["id"]
    refused = upload(client, "pixel.png", samples.PNG, conversation_id=theirs)
    missing = upload(client, "pixel.png", samples.PNG, conversation_id=str(uuid.uuid4()))
    malformed = upload(client, "pixel.png", samples.PNG, conversation_id="not-an-id")
    assert refused.status_code == missing.status_code == malformed.status_code == 404
    assert refused.json() == missing.json() == malformed.json()
    assert refused.json()["error"]["code"] == "not_found"
    assert not StoredFile.objects.exists()


def test_the_file_field_is_required_and_holds_one_file(client):
    missing = client.post("/api/files/", {"conversation_id": ""}, format="multipart")
    assert missing.status_code == 400, missing.content
    assert missing.json()["error"]["code"] == "invalid_request" and "'file'" in missing.json()["error"]["message"]
    from django.core.files.uploadedfile import SimpleUploadedFile

    two = client.post("/api/files/", {"file": [SimpleUploadedFile("a.txt", b"a"), SimpleUploadedFile("b.txt", b"b")]},
                      format="multipart")
    assert two.status_code == 400, two.content
    assert "got 2" in two.json()["error"]["message"]
    assert not StoredFile.objects.exists()


def test_an_upload_must_be_multipart(client):
    response = client.post("/api/files/", {"file": "aGVsbG8="}, format="json")
    assert response.status_code == 415, response.content
    assert response.json()["error"]["code"] == "unsupported_media_type"


def test_an_upload_needs_a_signed_in_user():
    from rest_framework.test import APIClient

    response = upload(APIClient(), "pixel.png", samples.PNG)
    assert response.status_code == 401
    assert not StoredFile.objects.exists()


def test_the_chat_pages_session_uploads_with_its_csrf_token(make_user):
    """The page signs in with the session cookie: an upload needs the CSRF
    token in its header (read while the multipart body is parsed by the
    upload handlers), as every other unsafe request does."""
    from django.core.files.uploadedfile import SimpleUploadedFile
    from django.test import Client

    user, _ = make_user()
    page = Client(enforce_csrf_checks=True)
    page.force_login(user)
    page.get("/")  # sets the CSRF cookie
    token = page.cookies["csrftoken"].value
    refused = page.post("/api/files/", {"file": SimpleUploadedFile("pixel.png", samples.PNG)})
    assert refused.status_code == 403 and "CSRF" in refused.json()["error"]["message"]
    assert not StoredFile.objects.filter(user=user).exists()
    accepted = page.post("/api/files/", {"file": SimpleUploadedFile("pixel.png", samples.PNG)},
                         headers={"X-CSRFToken": token})
    assert accepted.status_code == 201, accepted.content
    assert StoredFile.objects.filter(user=user).count() == 1
