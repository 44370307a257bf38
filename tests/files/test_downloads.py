"""Reading a file back (``GET /api/files/{id}/``, ``…/content/``): the
owner gets the bytes with headers that let a browser only show an image or
save a file; anyone else gets the 404 a missing file gets
(docs/files.md, "The API")."""

from __future__ import annotations

import uuid

import pytest

from chatforge.files.models import StoredFile

from . import samples
from .conftest import raw_upload, uploaded

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("own_files_dir")]

CSP = "sandbox; default-src 'none'"


def content(client, file_id: str, **headers):
    response = client.get(f"/api/files/{file_id}/content/", **headers)
    # The body is an asynchronous stream (what the ASGI server streams); the test client reads it whole.
    body = b"".join(response) if response.status_code == 200 else response.content
    return response, body


def test_metadata_is_the_files_shape(client):
    body = uploaded(client, "pixel.png", samples.PNG)
    assert client.get(f"/api/files/{body['id']}/").json() == body


@pytest.mark.parametrize(("name", "data", "content_type"), [
    ("pixel.png", samples.PNG, "image/png"),
    ("photo.jpg", samples.JPEG, "image/jpeg"),
    ("anim.gif", samples.GIF, "image/gif"),
    ("shot.webp", samples.WEBP, "image/webp"),
])
def test_images_are_served_inline_with_their_own_type(client, name, data, content_type):
    file = uploaded(client, name, data)
    response, body = content(client, file["id"])
    assert response.status_code == 200 and response.streaming
    assert body == data
    assert response["Content-Type"] == content_type
    assert response["Content-Length"] == str(len(data))
    assert response["Content-Disposition"] == f"inline; filename=\"{name}\"; filename*=UTF-8''{name}"
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Content-Security-Policy"] == CSP


@pytest.mark.parametrize(("name", "data", "content_type"), [
    ("report.pdf", samples.PDF, "application/pdf"),
    ("letter.docx", samples.DOCX, samples.DOCX_TYPE),
    # Text is never served as HTML (or SVG): whatever it holds, a browser shows it as text or saves it.
    ("page.html", samples.HTML, "text/plain; charset=utf-8"),
    ("drawing.svg", samples.SVG, "text/plain; charset=utf-8"),
    ("notes.md", b"# Notes\n", "text/plain; charset=utf-8"),
])
def test_everything_else_is_an_attachment(client, name, data, content_type):
    file = uploaded(client, name, data)
    response, body = content(client, file["id"])
    assert response.status_code == 200
    assert body == data
    assert response["Content-Type"] == content_type
    assert response["Content-Disposition"].startswith("attachment; ")
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Content-Security-Policy"] == CSP


def test_the_downloads_name_is_quoted_both_ways_and_cannot_inject_a_header(client):
    unicode_file = uploaded(client, "résumé 2026.txt", b"cv\n")
    response, _ = content(client, unicode_file["id"])
    assert response["Content-Disposition"] == (
        "attachment; filename=\"resume 2026.txt\"; filename*=UTF-8''r%C3%A9sum%C3%A9%202026.txt")
    tricky = raw_upload(client, 'a"; filename=evil.exe; x=".txt', b"text\n").json()
    response, _ = content(client, tricky["id"])
    # The quote and semicolons are neutralised in the plain form and encoded in the other.
    assert response["Content-Disposition"] == (
        "attachment; filename=\"a__ filename=evil.exe_ x=_.txt\"; "
        "filename*=UTF-8''a%22%3B%20filename%3Devil.exe%3B%20x%3D%22.txt")


def test_a_download_answers_whatever_the_client_accepts(client):
    file = uploaded(client, "report.pdf", samples.PDF)
    response, body = content(client, file["id"], HTTP_ACCEPT="application/pdf")
    assert response.status_code == 200 and body == samples.PDF


def test_another_users_file_is_not_found_as_a_missing_one_is(client, other):
    mine = uploaded(client, "pixel.png", samples.PNG)
    missing = str(uuid.uuid4())
    for path in ("/api/files/{}/", "/api/files/{}/content/"):
        theirs, absent, malformed = (other.get(path.format(i)) for i in (mine["id"], missing, "not-a-uuid"))
        assert theirs.status_code == absent.status_code == malformed.status_code == 404, path
        assert theirs.json() == absent.json() == malformed.json(), path
        assert theirs.json()["error"]["code"] == "not_found"
    assert other.delete(f"/api/files/{mine['id']}/").json() == other.delete(f"/api/files/{missing}/").json()
    assert StoredFile.objects.filter(pk=mine["id"]).exists()
    assert [f["id"] for f in other.get("/api/files/").json()["results"]] == []
    assert [f["id"] for f in client.get("/api/files/").json()["results"]] == [mine["id"]]


def test_a_conversations_files_are_listed_for_its_owner_only(client, other):
    conversation = client.post("/api/conversations/", {}, format="json").json()["id"]
    first = uploaded(client, "a.txt", b"a\n", conversation_id=conversation)
    second = uploaded(client, "pixel.png", samples.PNG, conversation_id=conversation)
    uploaded(client, "elsewhere.txt", b"not in it\n")
    listed = client.get(f"/api/conversations/{conversation}/files/").json()
    assert set(listed) == {"count", "next", "previous", "results"}
    assert [f["id"] for f in listed["results"]] == [first["id"], second["id"]]
    page = client.get(f"/api/conversations/{conversation}/files/?limit=1").json()
    assert page["count"] == 2 and len(page["results"]) == 1 and page["next"]
    theirs = other.get(f"/api/conversations/{conversation}/files/")
    absent = other.get(f"/api/conversations/{uuid.uuid4()}/files/")
    assert theirs.status_code == absent.status_code == 404
    assert theirs.json() == absent.json()
