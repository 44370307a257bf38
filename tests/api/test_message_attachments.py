"""Files attached to a message through the REST API: checked with the model
when the message is posted, linked to it, and listed on it when read;
a refusal writes nothing (docs/files.md, "Attaching files to a message")."""

from __future__ import annotations

import pytest

from chatforge.accounts.crypto import encrypt
from chatforge.conversations.models import Message, Run
from chatforge.files.models import StoredFile
from chatforge.llm.models import LanguageModel, Provider
from tests.support.api_clients import new_conversation
from tests.support.files import image_file, stored_file

pytestmark = pytest.mark.django_db


def post(client, conversation_id: str, **body):
    return client.post(f"/api/conversations/{conversation_id}/messages/", body, format="json")


def test_a_message_carries_its_files_and_lists_them_when_read(client):
    conversation_id = new_conversation(client)
    document = stored_file(client.user, name="notes.md", data=b"# Notes\n", content_type="text/markdown")
    picture = image_file(client.user)

    response = post(client, conversation_id, content="Look at these",
                    attachments=[str(document.pk), str(picture.pk)])

    assert response.status_code == 202, response.json()
    message = Message.objects.get(pk=response.json()["message_id"])
    assert message.content_json == [{"type": "text", "text": "Look at these"},
                                    {"type": "file", "file_id": str(document.pk)},
                                    {"type": "file", "file_id": str(picture.pk)}]
    assert Run.objects.get(pk=response.json()["run_id"]).options["attachments"] == [str(document.pk),
                                                                                     str(picture.pk)]
    for file in (document, picture):
        file.refresh_from_db()
        assert (str(file.message_id), str(file.conversation_id)) == (str(message.pk), conversation_id)

    listed = client.get(f"/api/conversations/{conversation_id}/messages/").json()["results"]
    user_message = next(m for m in listed if m["role"] == "user")
    assert [(a["id"], a["name"], a["kind"], a["content_url"]) for a in user_message["attachments"]] == [
        (str(document.pk), "notes.md", "document", f"/api/files/{document.pk}/content/"),
        (str(picture.pk), "pixel.png", "image", f"/api/files/{picture.pk}/content/"),
    ]
    assert all(m["attachments"] == [] for m in listed if m["role"] == "assistant")


def test_files_alone_make_a_message(client):
    conversation_id = new_conversation(client)
    document = stored_file(client.user)
    response = post(client, conversation_id, content="", attachments=[str(document.pk)])
    assert response.status_code == 202, response.json()
    assert client.get(f"/api/conversations/{conversation_id}/").json()["title"] == "(files)"


def _refused(client, conversation_id: str, code: str, fragment: str, **body) -> dict:
    response = post(client, conversation_id, **body)
    assert response.status_code == 400, response.json()
    error = response.json()["error"]
    assert error["code"] == code and fragment in error["message"], error
    assert not Run.objects.exists() and not Message.objects.exists()
    return error


def test_refused_attachments_write_nothing(client, make_user, settings):
    conversation_id = new_conversation(client)
    other_user, _ = make_user()
    theirs = stored_file(other_user)
    _refused(client, conversation_id, "invalid_request", f"No file with id {theirs.pk}",
             content="hi", attachments=[str(theirs.pk)])

    elsewhere = stored_file(client.user)
    StoredFile.objects.filter(pk=elsewhere.pk).update(conversation_id=new_conversation(client))
    _refused(client, conversation_id, "invalid_request", "belongs to another conversation",
             content="hi", attachments=[str(elsewhere.pk)])

    broken = stored_file(client.user, name="locked.pdf", text_status="failed",
                         text_error="The PDF is encrypted (password-protected).")
    error = _refused(client, conversation_id, "file_unreadable", "'locked.pdf' could not be read: The PDF is",
                     content="hi", attachments=[str(broken.pk)])
    assert error["details"]["file_id"] == str(broken.pk)

    settings.CHATFORGE_MAX_FILES_PER_MESSAGE = 2
    many = [str(stored_file(client.user).pk) for _ in range(3)]
    _refused(client, conversation_id, "invalid_request", "a message may carry at most 2",
             content="hi", attachments=many)
    _refused(client, conversation_id, "invalid_request", "or attach a file", content="")
    assert StoredFile.objects.filter(message__isnull=False).count() == 0


def test_a_file_is_attached_once(client):
    conversation_id = new_conversation(client)
    document = stored_file(client.user)
    first = post(client, conversation_id, content="one", attachments=[str(document.pk)])
    assert first.status_code == 202
    Run.objects.filter(pk=first.json()["run_id"]).update(status="completed")
    second = post(client, conversation_id, content="two", attachments=[str(document.pk)])
    assert second.status_code == 400
    assert "already attached to an earlier message" in second.json()["error"]["message"]
    assert Message.objects.filter(role="user").count() == 1


def test_an_edit_takes_over_the_files_of_the_message_it_replaces(client):
    conversation_id = new_conversation(client)
    document = stored_file(client.user)
    first = post(client, conversation_id, content="one", attachments=[str(document.pk)])
    Run.objects.filter(pk=first.json()["run_id"]).update(status="completed")
    edited = post(client, conversation_id, content="one, edited", attachments=[str(document.pk)],
                  replace_from=first.json()["message_id"])
    assert edited.status_code == 202, edited.json()
    document.refresh_from_db()
    assert str(document.message_id) == edited.json()["message_id"]


def test_images_go_only_to_models_that_take_them(client):
    provider = Provider.objects.create(name="local", kind="openai", base_url="http://127.0.0.1:9/v1",
                                       api_key_ciphertext=encrypt("test-key"))
    LanguageModel.objects.create(name="text-only", provider=provider, upstream_name="t", supports_vision=False)
    conversation_id = new_conversation(client)
    picture = image_file(client.user)
    response = post(client, conversation_id, content="What is this?", model="text-only",
                    attachments=[str(picture.pk)])
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "images_not_supported" and "The model 'text-only' is not set up to take images" in \
        error["message"]
    assert not Message.objects.exists()
    # The demo model takes them (and says what it was given).
    assert post(client, conversation_id, content="What is this?", attachments=[str(picture.pk)]).status_code == 202
