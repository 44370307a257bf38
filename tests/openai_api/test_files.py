"""``file`` content parts through ``/v1/chat/completions`` with the official
SDK against the live stack: the bytes become a file of the conversation,
read to text by the tools worker, and the model gets that text; a file
uploaded to ChatForge is named by ``file_id``; bad parts are a 400 that
says what to send (docs/openai-api.md, "Files")."""

from __future__ import annotations

import base64
from pathlib import Path

import openai
import pytest
from django.conf import settings

from chatforge.files.models import StoredFile
from tests.fakes.openai_server import Reply
from tests.support.files import stored_file

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def sdk(stack, token: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=stack.http_url + "/v1", api_key=token, max_retries=0, timeout=60)


def file_part(name: str, data: bytes, media_type: str = "text/plain") -> dict:
    return {"type": "file", "file": {"filename": name,
                                     "file_data": f"data:{media_type};base64,{base64.b64encode(data).decode()}"}}


def test_a_file_part_is_stored_read_and_given_to_the_model(stack, fake_llm, make_user):
    fake_llm.add_script("v1-files", lambda body: Reply(text="Read it."))
    user, token = make_user()
    # The media type a client claims is not trusted: the bytes are text.
    content = [{"type": "text", "text": "What does it say?"},
               file_part("memo.md", b"# Memo\nShip on Friday.\n", media_type="application/octet-stream")]

    reply = sdk(stack, token).chat.completions.create(
        model="v1-files", messages=[{"role": "user", "content": content}])

    assert reply.choices[0].message.content == "Read it."
    stored = StoredFile.objects.get(user=user)
    assert (stored.name, stored.content_type, stored.kind, stored.text_status) == (
        "memo.md", "text/markdown", "document", "ready")
    assert str(stored.conversation_id) == reply.model_extra["conversation_id"]
    sent = fake_llm.requests_for("v1-files")[-1]["messages"][-1]
    assert sent == {"role": "user", "content": f'What does it say?\n\n<file name="memo.md" id="{stored.pk}" '
                                               'type="text/markdown">\n# Memo\nShip on Friday.\n\n</file>'}


def test_a_file_uploaded_before_is_named_by_its_id(stack, fake_llm, make_user):
    fake_llm.add_script("v1-file-id", lambda body: Reply(text="Noted."))
    user, token = make_user()
    uploaded = stored_file(user, name="earlier.txt", data=b"Uploaded earlier.")

    sdk(stack, token).chat.completions.create(model="v1-file-id", messages=[
        {"role": "user", "content": [{"type": "text", "text": "And this?"},
                                     {"type": "file", "file": {"file_id": str(uploaded.pk)}}]}])

    assert "Uploaded earlier." in fake_llm.requests_for("v1-file-id")[-1]["messages"][-1]["content"]


GOOD = file_part("good.txt", b"A readable file.")


@pytest.mark.parametrize(("parts", "fragment"), [
    ([{"type": "file", "file": {"filename": "a.txt", "file_data": "data:text/plain;base64,@@@"}}], "not valid base64"),
    ([{"type": "file", "file": {"filename": "a.txt"}}], "a file must be"),
    ([{"type": "file", "file": {"file_id": "00000000-0000-0000-0000-000000000000"}}], "No file with id"),
    ([{"type": "file", "file": {"file_id": "file-abc123"}}], "No file with id file-abc123"),  # an OpenAI-style id
    ([file_part("blob.bin", b"\x00\x01\x02\x03" * 64, "application/octet-stream")], "unsupported"),
    # A good file stored before a later part is refused is removed again, bytes and all.
    ([GOOD, file_part("blob.bin", b"\x00\x01\x02\x03" * 64, "application/octet-stream")], "unsupported"),
    ([GOOD, {"type": "file", "file": {"file_id": "00000000-0000-0000-0000-000000000000"}}], "No file with id"),
])
def test_bad_file_parts_are_refused_and_store_nothing(stack, make_user, parts, fragment):
    user, token = make_user()
    before = _stored_bytes()
    with pytest.raises(openai.APIStatusError) as caught:
        sdk(stack, token).chat.completions.create(model="demo", messages=[{"role": "user", "content": parts}])
    assert caught.value.status_code in (400, 415)
    assert fragment.lower() in str(caught.value.body).lower()
    assert not StoredFile.objects.filter(user=user).exists()
    assert _stored_bytes() == before


def _stored_bytes() -> set[Path]:
    return {path for path in Path(settings.CHATFORGE_FILES_DIR).rglob("*") if path.is_file()}
