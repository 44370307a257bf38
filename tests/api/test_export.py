"""Exporting a conversation (GET /api/conversations/{id}/export/): the
current branch as a Markdown or JSON download, with tool rounds and links to
the files, for its owner only."""

from __future__ import annotations

import json

import pytest

from chatforge.conversations.models import Conversation, Message
from chatforge.files.message_parts import file_parts
from tests.support.api_clients import api_client
from tests.support.files import stored_file

pytestmark = pytest.mark.django_db

ROUNDS = [{
    "iteration": 0,
    "assistant_response": "Let me work that out.",
    "tool_calls": [{"id": "call_1", "name": "calculator", "arguments": "{\"expression\": \"17*23\"}",
                    "metadata": {"provider": "opaque"}}],
    "results": [{"tool_call_id": "call_1", "name": "calculator", "output": "{\"result\": 391}",
                 "status": "success", "execution_time_ms": 3}],
}]


@pytest.fixture
def conversation(client) -> Conversation:
    conversation = Conversation.objects.create(user=client.user, title="Maths: 17×23 / trip")
    notes = stored_file(client.user, name="notes [draft].txt", data=b"numbers", conversation=conversation)
    question = Message.objects.create(
        conversation=conversation, role="user", content="What is 17*23? See my notes.",
        content_json=[{"type": "text", "text": "What is 17*23? See my notes."}, *file_parts([notes.pk])])
    Message.objects.create(conversation=conversation, role="assistant", parent=question, model="gpt-test",
                           content="It is **391**.", tool_rounds=ROUNDS)
    conversation.notes = notes
    return conversation


def export(client, conversation, **params):
    return client.get(f"/api/conversations/{conversation.id}/export/", params)


def test_markdown_is_the_default_and_a_download(client, conversation):
    answer = export(client, conversation)
    assert answer.status_code == 200, answer.content
    assert answer["Content-Type"] == "text/markdown; charset=utf-8"
    assert answer["Content-Disposition"] == (
        "attachment; filename=\"Maths-17-23-trip.md\"; filename*=UTF-8''Maths-17-23-trip.md")
    text = answer.content.decode()
    assert text.startswith("# Maths: 17×23 / trip\n")
    assert "### User · " in text and "### Assistant · `gpt-test` · " in text
    assert "What is 17*23? See my notes." in text and "It is **391**." in text
    # The tool round: the text before the call, the call's name, arguments, result and status.
    assert "Let me work that out." in text
    assert "**Tool call `calculator`** · success" in text
    assert '```json\n{\n  "expression": "17*23"\n}\n```' in text
    assert '```json\n{\n  "result": 391\n}\n```' in text
    assert "opaque" not in text
    # The file, linked by an absolute URL to its bytes (the owner's login opens it).
    url = f"http://testserver/api/files/{conversation.notes.pk}/content/"
    assert f"- [notes \\[draft\\].txt]({url}) (text/plain, 7 bytes)" in text
    assert text.index("### User") < text.index("### Assistant") < text.index("It is **391**.")
    assert export(client, conversation, format="markdown").content.decode().split("\n", 3)[0] == text.split(
        "\n", 3)[0]


def test_json_is_the_documented_object(client, conversation):
    answer = export(client, conversation, format="json")
    assert answer.status_code == 200, answer.content
    assert answer["Content-Type"] == "application/json; charset=utf-8"
    assert answer["Content-Disposition"].startswith('attachment; filename="Maths-17-23-trip.json"')
    data = json.loads(answer.content)
    assert data["format_version"] == 1 and data["exported_at"]
    assert data["conversation"]["id"] == str(conversation.id)
    assert data["conversation"]["title"] == "Maths: 17×23 / trip"
    question, reply = data["messages"]
    assert (question["role"], question["content"], question["tool_rounds"]) == (
        "user", "What is 17*23? See my notes.", [])
    assert question["attachments"] == [{
        "id": str(conversation.notes.pk), "name": "notes [draft].txt", "content_type": "text/plain", "size": 7,
        "url": f"http://testserver/api/files/{conversation.notes.pk}/content/"}]
    assert (reply["role"], reply["model"], reply["content"], reply["attachments"]) == (
        "assistant", "gpt-test", "It is **391**.", [])
    assert reply["created_at"].endswith("Z")
    (round_,) = reply["tool_rounds"]
    assert round_["assistant_response"] == "Let me work that out."
    assert round_["tool_calls"] == [{"id": "call_1", "name": "calculator", "arguments": "{\"expression\": \"17*23\"}"}]
    assert round_["results"][0]["output"] == "{\"result\": 391}" and round_["results"][0]["status"] == "success"


def test_an_untitled_conversation_is_named_by_its_id(client):
    conversation = Conversation.objects.create(user=client.user, title="")
    answer = export(client, conversation)
    assert answer.status_code == 200
    assert f'filename="conversation-{conversation.id}.md"' in answer["Content-Disposition"]
    assert answer.content.decode().startswith("# Untitled conversation\n")


def test_only_the_owner_and_a_known_format(client, conversation, make_user):
    answer = export(client, conversation, format="pdf")
    assert answer.status_code == 400
    assert "markdown, json" in answer.json()["error"]["message"]
    stranger = api_client(*make_user())
    for kind in ("markdown", "json"):
        answer = export(stranger, conversation, format=kind)
        assert answer.status_code == 404 and answer.json()["error"]["code"] == "not_found"
    assert client.get("/api/conversations/not-a-uuid/export/").status_code == 404
