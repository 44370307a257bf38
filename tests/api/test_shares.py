"""Share links (POST/GET /api/conversations/{id}/shares/, DELETE
…/shares/{share_id}/) and the public page they open (/share/<token>/): a
snapshot of the current branch, nothing else of the owner's, until revoked."""

from __future__ import annotations

import json
import re

import pytest
from django.core import signing
from django.test import Client

from chatforge.conversations.models import Conversation, ConversationShare, Message
from chatforge.files.message_parts import file_parts
from tests.support.api_clients import api_client
from tests.support.files import stored_file

pytestmark = pytest.mark.django_db

SYSTEM_PROMPT = "You are the secret-keeping assistant 7f3a"


@pytest.fixture
def owner(make_user):
    return api_client(*make_user("ana-the-owner"))


@pytest.fixture
def conversation(owner) -> Conversation:
    conversation = Conversation.objects.create(user=owner.user, title="Trip to Porto")
    Conversation.objects.create(user=owner.user, title="My other private chat")
    system = Message.objects.create(conversation=conversation, role="system", content=SYSTEM_PROMPT)
    ticket = stored_file(owner.user, name="ticket.pdf", data=b"%PDF-1.4 private bytes", kind="document",
                         content_type="application/pdf", conversation=conversation)
    question = Message.objects.create(
        conversation=conversation, role="user", content="Weather in Porto?", parent=system,
        content_json=[{"type": "text", "text": "Weather in Porto?"}, *file_parts([ticket.pk])])
    Message.objects.create(
        conversation=conversation, role="assistant", parent=question, model="gpt-test", content="Sunny, 24 °C.",
        usage={"total_tokens": 4242},
        tool_rounds=[{"iteration": 0, "assistant_response": "Checking.",
                      "tool_calls": [{"id": "c1", "name": "weather", "arguments": "{\"city\": \"Porto\"}",
                                      "metadata": {"signature": "provider-secret"}}],
                      "results": [{"tool_call_id": "c1", "name": "weather", "output": "sunny 24",
                                   "status": "success", "execution_time_ms": 12}]}])
    return conversation


def shares_url(conversation) -> str:
    return f"/api/conversations/{conversation.id}/shares/"


def make_share(owner, conversation) -> dict:
    answer = owner.post(shares_url(conversation))
    assert answer.status_code == 201, answer.content
    return answer.json()


def test_a_share_is_a_signed_link_to_a_snapshot(owner, conversation):
    share = make_share(owner, conversation)
    assert set(share) >= {"id", "url", "created_at"} and share["revoked_at"] is None
    token = signing.Signer(salt="chatforge.share").sign(share["id"])
    assert share["url"] == f"http://testserver/share/{token}/"

    stored = ConversationShare.objects.get(pk=share["id"])
    assert stored.snapshot["title"] == "Trip to Porto"
    question, reply = stored.snapshot["messages"]
    assert question == {"role": "user", "content": "Weather in Porto?", "status": "final", "model": "",
                        "created_at": question["created_at"], "tool_rounds": [],
                        "attachments": [{"name": "ticket.pdf"}]}
    assert reply["content"] == "Sunny, 24 °C." and reply["model"] == "gpt-test"
    assert reply["tool_rounds"] == [{
        "assistant_response": "Checking.",
        "tool_calls": [{"id": "c1", "name": "weather", "arguments": "{\"city\": \"Porto\"}"}],
        "results": [{"tool_call_id": "c1", "name": "weather", "output": "sunny 24", "status": "success"}]}]
    assert "usage" not in reply


def test_the_public_page_shows_the_snapshot_and_nothing_else(owner, conversation):
    share = make_share(owner, conversation)
    page = Client().get(share["url"].removeprefix("http://testserver"))  # nobody signed in
    assert page.status_code == 200
    assert page["X-Robots-Tag"] == "noindex, nofollow"
    assert page["Referrer-Policy"] == "no-referrer"
    assert "Content-Security-Policy" in page
    html = page.content.decode()
    assert '<meta name="robots" content="noindex, nofollow">' in html
    data = json.loads(re.search(r'<script id="share-data" type="application/json">(.*?)</script>', html,
                                re.S).group(1))
    assert [m["content"] for m in data["messages"]] == ["Weather in Porto?", "Sunny, 24 °C."]
    assert "not shared" in html
    for secret in ("ana-the-owner", SYSTEM_PROMPT, "My other private chat", "provider-secret", "4242",
                   "private bytes", "/api/files/", "/c/", "Log out", "Settings"):
        assert secret not in html, secret
    # No link into the app but its name.
    assert re.findall(r'<a [^>]*href="([^"]*)"', html) == ["/"]


def test_the_snapshot_does_not_follow_later_messages_or_renames(owner, conversation):
    share = make_share(owner, conversation)
    last = Message.objects.filter(conversation=conversation, role="assistant").get()
    Message.objects.create(conversation=conversation, role="user", parent=last, content="Written after sharing")
    owner.patch(f"/api/conversations/{conversation.id}/", {"title": "Renamed later"}, format="json")
    html = Client().get(share["url"].removeprefix("http://testserver")).content.decode()
    assert "Written after sharing" not in html and "Renamed later" not in html
    assert "Trip to Porto" in html
    # A new share takes the conversation as it is now.
    newer = make_share(owner, conversation)
    html = Client().get(newer["url"].removeprefix("http://testserver")).content.decode()
    assert "Written after sharing" in html and "Renamed later" in html


def test_list_and_revoke(owner, conversation):
    first = make_share(owner, conversation)
    second = make_share(owner, conversation)
    listed = owner.get(shares_url(conversation))
    assert listed.status_code == 200
    assert [s["id"] for s in listed.json()] == [second["id"], first["id"]]

    assert owner.delete(f"{shares_url(conversation)}{first['id']}/").status_code == 204
    revoked_at = ConversationShare.objects.get(pk=first["id"]).revoked_at
    assert revoked_at is not None
    assert owner.delete(f"{shares_url(conversation)}{first['id']}/").status_code == 204  # again: no change
    assert ConversationShare.objects.get(pk=first["id"]).revoked_at == revoked_at
    listed = {s["id"]: s["revoked_at"] for s in owner.get(shares_url(conversation)).json()}
    assert listed[first["id"]] is not None and listed[second["id"]] is None

    page = Client().get(first["url"].removeprefix("http://testserver"))
    assert page.status_code == 404
    assert "This link was revoked" in page.content.decode()
    assert "Sunny" not in page.content.decode()
    assert page["X-Robots-Tag"] == "noindex, nofollow"
    assert Client().get(second["url"].removeprefix("http://testserver")).status_code == 200


def test_a_tampered_or_made_up_token_is_not_found(owner, conversation):
    share = make_share(owner, conversation)
    path = share["url"].removeprefix("http://testserver")
    token = path.split("/")[2]
    share_id, signature = token.split(":")
    other = make_share(owner, conversation)["id"]
    for bad in (f"{share_id}:{signature[:-2]}xx", f"{other}:{signature}", share_id, "nothing", f"{token}x"):
        page = Client().get(f"/share/{bad}/", HTTP_ACCEPT="text/html")
        assert page.status_code == 404, bad
        assert "Sunny" not in page.content.decode() and "revoked" not in page.content.decode()
    # A well-signed id that names no share (deleted with its conversation).
    conversation.delete()
    assert Client().get(path).status_code == 404


def test_another_users_conversation_and_shares_are_not_found(owner, conversation, make_user):
    share = make_share(owner, conversation)
    stranger = api_client(*make_user())
    assert stranger.post(shares_url(conversation)).status_code == 404
    assert stranger.get(shares_url(conversation)).status_code == 404
    assert stranger.delete(f"{shares_url(conversation)}{share['id']}/").status_code == 404
    assert ConversationShare.objects.get(pk=share["id"]).revoked_at is None
    # A share id of another conversation, even the owner's, is not this one's.
    mine = Conversation.objects.create(user=owner.user, title="Another")
    answer = owner.delete(f"{shares_url(mine)}{share['id']}/")
    assert answer.status_code == 404 and answer.json()["error"]["message"]
    assert owner.delete(f"{shares_url(conversation)}not-an-id/").status_code == 404
