"""The web pages through Django's test client: who may see what, what the
pages hand their JavaScript, and the settings forms' answers."""

from __future__ import annotations

import json
import uuid

import pytest
from django.test import Client, override_settings

from chatforge.accounts.models import ApiToken, UserSecret
from chatforge.accounts.secrets import user_secret_get
from chatforge.accounts.tokens import api_token_create, user_for_token
from chatforge.conversations.models import Conversation, Message, Run, ToolInvocation

pytestmark = pytest.mark.django_db


@pytest.fixture
def user(django_user_model):
    return django_user_model.objects.create_user(username="web", password="pw")


@pytest.fixture
def client_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def page_data(response) -> dict:
    html = response.content.decode()
    start = html.index('<script id="page-data" type="application/json">') + len('<script id="page-data" type="application/json">')
    return json.loads(html[start:html.index("</script>", start)])


@pytest.mark.parametrize("path", ["/", "/tools/testing/", "/settings/"])
def test_pages_need_a_login(path):
    response = Client().get(path)
    assert response.status_code == 302
    assert response["Location"] == f"/accounts/login/?next={path}"


def test_login_page_logs_in_and_goes_to_the_chat(user):
    client = Client()
    assert "Log in" in client.get("/accounts/login/").content.decode()
    bad = client.post("/accounts/login/", {"username": "web", "password": "nope"})
    assert bad.status_code == 200 and "correct username and password" in bad.content.decode()
    good = client.post("/accounts/login/", {"username": "web", "password": "pw"})
    assert good.status_code == 302 and good["Location"] == "/"


def test_chat_page_hands_over_history_active_runs_and_pickers(client_in, user):
    conversation = Conversation.objects.create(user=user, title="Sums")
    first = Message.objects.create(conversation=conversation, role="user", content="6*7?")
    done = Run.objects.create(conversation=conversation, user=user, user_message=first, model="demo", status="failed",
                              error="The model provider failed: 500")
    failed = Message.objects.create(conversation=conversation, run=done, role="assistant", content="",
                                    status="error", tool_rounds=[], parent=first)
    second = Message.objects.create(conversation=conversation, role="user", content="and 2+2?", parent=failed)
    live = Run.objects.create(conversation=conversation, user=user, user_message=second, model="demo", status="running")

    response = client_in.get(f"/c/{conversation.id}/")
    assert response.status_code == 200
    data = page_data(response)
    assert [m["content"] for m in data["messages"]] == ["6*7?", "", "and 2+2?"]
    assert data["messages"][1]["run_error"] == "The model provider failed: 500"
    assert data["active_runs"] == [{"id": str(live.id), "user_message_id": str(second.id), "status": "running"}]
    assert data["conversations"][0]["title"] == "Sums"
    assert data["models"]["models"][0]["id"] == "demo"
    assert {"calculator", "get_time"} <= {t["name"] for t in data["tools"]}


def test_chat_page_hands_over_the_decisions_on_approved_and_denied_calls(client_in, user):
    """A stored round holds a denied call as an error result: the page data
    says it was a denial (and by whom), so the page shows *denied*."""
    conversation = Conversation.objects.create(user=user, title="Notes")
    question = Message.objects.create(conversation=conversation, role="user", content="Tell the team")
    run = Run.objects.create(conversation=conversation, user=user, user_message=question, model="demo",
                             status="completed")
    call = {"id": "call_1", "name": "send_note", "arguments": "{}"}
    ToolInvocation.objects.create(run=run, tool_call_id="call_1", iteration=0, name="send_note", status="error",
                                  approval_decision="deny", approval_reason="Not now", approval_decided_by=user)
    ToolInvocation.objects.create(run=run, tool_call_id="call_2", iteration=0, name="send_note", status="error",
                                  approval_decision="deny", approval_reason="No decision within 600 seconds.")
    ToolInvocation.objects.create(run=run, tool_call_id="call_3", iteration=0, name="echo", status="success")
    Message.objects.create(conversation=conversation, run=run, role="assistant", content="Not sent.", parent=question,
                           tool_rounds=[
        {"iteration": 0, "assistant_response": "", "tool_calls": [call, {**call, "id": "call_2"},
                                                                   {**call, "id": "call_3", "name": "echo"}],
         "results": []}])

    data = page_data(client_in.get(f"/c/{conversation.id}/"))
    assert data["messages"][1]["approvals"] == {
        "call_1": {"decision": "deny", "reason": "Not now", "by": "web", "expired": False},
        "call_2": {"decision": "deny", "reason": "No decision within 600 seconds.", "by": None, "expired": True},
    }


def test_another_users_conversation_is_not_found(client_in, django_user_model):
    other = django_user_model.objects.create_user(username="other", password="pw")
    conversation = Conversation.objects.create(user=other, title="private")
    response = client_in.get(f"/c/{conversation.id}/", HTTP_ACCEPT="text/html")
    assert response.status_code == 404
    assert "private" not in response.content.decode()
    assert "not yours to see" in response.content.decode()


@override_settings(DEBUG=True)  # embedded mode's default
@pytest.mark.parametrize("accept", ["text/html", "*/*"])
def test_a_deleted_or_unknown_conversation_is_the_apps_not_found_page_even_with_debug_on(client_in, user, accept):
    """Not Django's debug page (which lists every URL pattern): the app's own,
    with the way back to the chat."""
    gone = Conversation.objects.create(user=user, title="gone")
    assert client_in.delete(f"/api/conversations/{gone.id}/").status_code == 204
    for path in (f"/c/{gone.id}/", f"/c/{uuid.uuid4()}/"):
        response = client_in.get(path, HTTP_ACCEPT=accept)
        assert response.status_code == 404 and response["Content-Type"].startswith("text/html")
        html = response.content.decode()
        assert "<h1>Not found</h1>" in html and '<a href="/">Back to the chat</a>' in html
        assert "URLconf" not in html and "DEBUG = True" not in html
        assert 'rel="icon"' in html


def test_not_found_is_html_for_pages_and_json_for_the_api(client_in):
    page = client_in.get("/no/such/page/", HTTP_ACCEPT="text/html")
    assert page.status_code == 404 and page["Content-Type"].startswith("text/html")
    api = client_in.get("/api/no-such-thing/", HTTP_ACCEPT="text/html")
    assert api.status_code == 404 and api.json()["error"]["code"] == "not_found"


def test_tool_testing_page_lists_tools_and_models(client_in):
    data = page_data(client_in.get("/tools/testing/"))
    calculator = next(t for t in data["tools"] if t["name"] == "calculator")
    assert calculator["kind"] == "code" and calculator["parameters"]["type"] == "object"
    assert data["models"]["models"][0]["validation"]["validated"] is False


def test_secret_is_saved_encrypted_and_never_shown(client_in, user):
    response = client_in.post("/settings/secrets/", {"name": "tavily_api_key", "value": "tvly-secret-123"})
    assert response.status_code == 302
    assert user_secret_get(user_id=user.id, name="tavily_api_key") == "tvly-secret-123"
    assert "tvly-secret-123" not in UserSecret.objects.get(user=user).ciphertext
    page = client_in.get("/settings/").content.decode()
    assert "tavily_api_key" in page and "tvly-secret-123" not in page


def test_bad_secret_name_gets_a_clear_error_and_keeps_the_name(client_in):
    response = client_in.post("/settings/secrets/", {"name": "Bad Name!", "value": "v"})
    assert response.status_code == 400
    body = response.content.decode()
    assert "Use 1-64 characters from a-z, 0-9 and &#x27;_&#x27;" in body
    assert 'value="Bad Name!"' in body  # what the user typed is not lost (the value field never echoes)


def test_secret_delete(client_in, user):
    client_in.post("/settings/secrets/", {"name": "k", "value": "v"})
    assert client_in.post("/settings/secrets/k/delete/").status_code == 302
    assert not UserSecret.objects.filter(user=user).exists()
    response = client_in.post("/settings/secrets/k/delete/", follow=True)
    assert "You have no secret named k." in response.content.decode()


def test_token_is_shown_once_stored_hashed_rotated_and_revoked(client_in, user):
    response = client_in.post("/settings/tokens/", {"name": "laptop"})
    assert response.status_code == 200 and "no-store" in response["Cache-Control"]
    html = response.content.decode()
    start = html.index('id="issued-token-value"')
    plaintext = html[html.index('value="', start) + 7:html.index('"', html.index('value="', start) + 7)]
    token = ApiToken.objects.get(user=user, name="laptop")
    assert user_for_token(plaintext) == user and plaintext not in token.key_hash
    assert plaintext not in client_in.get("/settings/").content.decode()

    rotated = client_in.post(f"/settings/tokens/{token.id}/rotate/")
    assert rotated.status_code == 200
    assert user_for_token(plaintext) is None
    new = ApiToken.objects.get(user=user, name="laptop", revoked_at__isnull=True)
    assert new.id != token.id

    assert client_in.post(f"/settings/tokens/{new.id}/revoke/").status_code == 302
    assert not ApiToken.objects.filter(user=user, revoked_at__isnull=True).exists()
    # A revoked token can be neither rotated nor revoked again.
    assert client_in.post(f"/settings/tokens/{new.id}/rotate/").status_code == 404


def test_someone_elses_token_cannot_be_touched(client_in, django_user_model):
    other = django_user_model.objects.create_user(username="other", password="pw")
    issued = api_token_create(user=other, name="theirs")
    assert client_in.post(f"/settings/tokens/{issued.token.id}/revoke/").status_code == 404
    assert client_in.post(f"/settings/tokens/{issued.token.id}/rotate/").status_code == 404
    assert user_for_token(issued.plaintext) == other


def test_token_without_a_name_is_refused(client_in):
    response = client_in.post("/settings/tokens/", {"name": ""})
    assert response.status_code == 400 and "This field is required." in response.content.decode()
    assert not ApiToken.objects.exists()


def test_settings_forms_need_post(client_in):
    assert client_in.get("/settings/tokens/").status_code == 405


def test_pages_have_the_favicon_and_the_admin_says_chatforge(client_in, django_user_model):
    for path in ("/", "/tools/testing/", "/settings/"):
        assert '<link rel="icon" type="image/svg+xml" href="/static/web/favicon.svg">' in client_in.get(
            path).content.decode(), path
    login = Client().get("/accounts/login/").content.decode()
    assert '<link rel="icon" type="image/svg+xml" href="/static/web/favicon.svg">' in login
    icon = Client().get("/static/web/favicon.svg")
    assert icon.status_code == 200 and icon["Content-Type"].startswith("image/svg+xml")
    staff = django_user_model.objects.create_user(username="boss", password="pw", is_staff=True, is_superuser=True)
    admin = Client()
    admin.force_login(staff)
    page = admin.get("/admin/").content.decode()
    assert "ChatForge administration" in page and "<title>" in page and "ChatForge admin" in page
    assert "ChatForge administration" in Client().get("/admin/login/").content.decode()


def test_favicon_ico_is_the_pages_icon():
    """Browsers ask for /favicon.ico on pages that link no icon (the admin's,
    a JSON answer): it leads to the SVG the pages link, without a login."""
    response = Client().get("/favicon.ico")
    assert response.status_code == 301 and response["Location"] == "/static/web/favicon.svg"
    icon = Client().get(response["Location"])
    assert icon.status_code == 200 and icon["Content-Type"].startswith("image/svg+xml")
