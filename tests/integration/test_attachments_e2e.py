"""Attachments on real processes: a message's document and image reach the
model's request (the fake OpenAI server records it) as the run's LLM worker
read them from the shared files storage; a run whose document is still
being read waits for its text, and one whose document turns out unreadable
fails with the reason (docs/files.md, "What the model gets")."""

from __future__ import annotations

import base64

import pytest

from chatforge.accounts.crypto import encrypt
from chatforge.files.models import StoredFile
from chatforge.llm.models import LanguageModel, Provider
from tests.fakes.openai_server import Reply
from tests.support.client import ApiClient, follow_run
from tests.support.files import PNG_BYTES, image_file, stored_file

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def vision_model(fake_llm, name: str) -> None:
    provider = Provider.objects.create(name=f"p-{name}", kind="openai", base_url=fake_llm.base_url,
                                       api_key_ciphertext=encrypt("test-key"))
    LanguageModel.objects.create(name=name, provider=provider, supports_vision=True)


def test_a_document_and_an_image_reach_the_model(stack, fake_llm, make_user):
    fake_llm.add_script("attach-vision", lambda body: Reply(text="Seen."))
    vision_model(fake_llm, "attach-vision")
    user, token = make_user()
    api = ApiClient(stack.http_url, token)
    conversation = api.new_conversation()
    document = stored_file(user, name="facts.txt", data=b"Water boils at 100 C.")
    picture = image_file(user)

    accepted = api.post_message(conversation, "Read these", model="attach-vision",
                                attachments=[str(document.pk), str(picture.pk)])
    events = follow_run(stack.ws_url, accepted["run_id"], token)

    assert events[-1]["type"] == "run.completed", events[-1]
    sent = fake_llm.requests_for("attach-vision")[-1]["messages"][-1]
    assert sent == {"role": "user", "content": [
        {"type": "text", "text": f'Read these\n\n<file name="facts.txt" id="{document.pk}" type="text/plain">\n'
                                 "Water boils at 100 C.\n</file>"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64," + base64.b64encode(PNG_BYTES).decode()}},
    ]}


def _waiting_run(stack, api: ApiClient, token: str, document: StoredFile) -> tuple[str, list[dict]]:
    """Post a message with a document still being read, and follow its run
    until its first turn has started (and so waits for the text)."""
    accepted = api.post_message(api.new_conversation(), "Summarise it", attachments=[str(document.pk)])
    started = follow_run(stack.ws_url, accepted["run_id"], token, limit=2)
    assert [e["type"] for e in started] == ["run.started", "llm.started"], started
    return accepted["run_id"], started


def test_the_first_turn_waits_for_the_documents_text(stack, make_user):
    user, token = make_user()
    api = ApiClient(stack.http_url, token)
    document = stored_file(user, name="later.txt", data=b"Read at last.", text_status="pending", text="")
    run_id, _ = _waiting_run(stack, api, token, document)

    StoredFile.objects.filter(pk=document.pk).update(text_status="ready", text="Read at last, every word.")
    events = follow_run(stack.ws_url, run_id, token, after=2)

    assert events[-1]["type"] == "run.completed", events[-1]
    answer = "".join(e["data"]["text"] for e in events if e["type"] == "content.delta")
    # The demo model reports the document it was given: the text read while it waited.
    assert "You attached later.txt (text/plain, 5 words of text), which begins: \"Read at last, every word.\"" in answer


def test_a_document_found_unreadable_while_waiting_fails_the_run_with_the_reason(stack, make_user):
    user, token = make_user()
    api = ApiClient(stack.http_url, token)
    document = stored_file(user, name="locked.pdf", data=b"%PDF-1.7", content_type="application/pdf",
                           text_status="pending", text="")
    run_id, _ = _waiting_run(stack, api, token, document)

    StoredFile.objects.filter(pk=document.pk).update(
        text_status="failed", text_error="The PDF is encrypted (password-protected): remove the password.")
    events = follow_run(stack.ws_url, run_id, token, after=2)

    assert events[-1]["type"] == "run.failed", events[-1]
    assert "The file 'locked.pdf' could not be read: The PDF is encrypted" in events[-1]["data"]["error"]
