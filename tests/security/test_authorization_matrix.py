"""Who may do what, route by route: one table over every route of the URLconf.

Each HTTP route (by name) and each websocket route has its rows here: a
method, a path built from objects the *owner* holds, and the expected
answer for each role — the owner, another user, a staff user who is not an
admin of anything (``is_staff`` without permissions), and nobody. A route
added to the URLconf without a row fails ``test_every_route_has_a_rule``,
so nobody can forget to decide who may use it.

Other users and staff get 404 for the owner's objects (never 403: that would
tell them the object exists), and nothing of the owner's in any list. The
admin's routes are checked as a whole: anonymous and non-staff requests are
sent to the admin's sign-in page.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from rest_framework.test import APIClient

from chatforge.accounts.models import ApiToken, UserSecret
from chatforge.accounts.secrets import user_secret_set
from chatforge.conversations.models import Conversation, ConversationShare, Message, Run
from chatforge.files.models import StoredFile
from chatforge.realtime.routing import websocket_application, websocket_urlpatterns
from tests.support.files import image_file
from tests.realtime.communicator import WebsocketCommunicator

pytestmark = pytest.mark.django_db(transaction=True)

OWNER, OTHER, STAFF, ANONYMOUS = "owner", "other", "staff", "anonymous"
ROLES = (ANONYMOUS, OTHER, STAFF, OWNER)  # the owner last: some rows delete
LOGIN = "login"  # expectation: redirected to the sign-in page
ADMIN_LOGIN = "admin-login"


@dataclass(frozen=True)
class Row:
    method: str
    path: str  # formatted with the owner's objects: {conversation}, {run}, ...
    expect: dict[str, int | str]
    body: dict[str, Any] | None = None
    session: bool = False  # a web page: signed in with the session cookie, not a token
    must_not_show: tuple[str, ...] = field(default=("conversation", "run", "secret"))


def _all(status: int | str, *, anonymous: int | str = 401) -> dict[str, int | str]:
    return {OWNER: status, OTHER: status, STAFF: status, ANONYMOUS: anonymous}


def _owner_only(status: int | str, *, anonymous: int | str = 401) -> dict[str, int | str]:
    return {OWNER: status, OTHER: 404, STAFF: 404, ANONYMOUS: anonymous}


def _page(status: int = 200) -> dict[str, int | str]:
    return _all(status, anonymous=LOGIN)


BAD_COMPLETION = {"model": "demo"}  # no messages: a 400 once signed in

RULES: dict[str, list[Row]] = {
    "healthz": [Row("GET", "/healthz", _all(200, anonymous=200))],
    "readyz": [Row("GET", "/readyz", _all(200, anonymous=200))],
    "favicon": [Row("GET", "/favicon.ico", _all(301, anonymous=301))],
    # Prometheus' token (CHATFORGE_METRICS_TOKEN) or a staff session, never a user's API token.
    "metrics": [Row("GET", "/metrics", _all(403, anonymous=403))],
    "schema": [Row("GET", "/api/schema/", _all(200))],
    "docs": [Row("GET", "/api/docs/", _all(200))],
    "api-root": [Row("GET", "/api/", _all(200))],
    "models": [Row("GET", "/api/models/", _all(200))],
    # A body the view refuses: signed-in users get as far as validation.
    "tool-test": [Row("POST", "/api/tools/test/", _all(400), body={})],
    "tool-list": [Row("GET", "/api/tools/", _all(200))],
    # Running a tool directly is for admins with the permission to run data tools.
    "tool-invoke": [Row("POST", "/api/tools/calculator/invoke/", {OWNER: 403, OTHER: 403, STAFF: 403, ANONYMOUS: 401},
                        body={"arguments": {"expression": "1+1"}})],
    "conversation-list": [
        Row("GET", "/api/conversations/", _all(200)),
        Row("POST", "/api/conversations/", _all(201), body={}),
    ],
    "conversation-detail": [
        Row("GET", "/api/conversations/{conversation}/", _owner_only(200)),
        Row("DELETE", "/api/conversations/{spare_conversation}/", _owner_only(204)),
    ],
    "conversation-messages": [
        Row("GET", "/api/conversations/{conversation}/messages/", _owner_only(200)),
        Row("POST", "/api/conversations/{conversation}/messages/", _owner_only(400), body={"content": ""}),
    ],
    # Files: only ever the owner's; an upload without a multipart body is a 415 once signed in.
    "file-list": [
        Row("GET", "/api/files/", _all(200), must_not_show=("conversation", "run", "secret", "file")),
        Row("POST", "/api/files/", _all(415), body={}),
    ],
    "file-detail": [
        Row("GET", "/api/files/{file}/", _owner_only(200)),
        Row("DELETE", "/api/files/{spare_file}/", _owner_only(204)),
    ],
    "file-content": [Row("GET", "/api/files/{file}/content/", _owner_only(200))],
    "conversation-files": [Row("GET", "/api/conversations/{conversation}/files/", _owner_only(200),
                               must_not_show=("conversation", "run", "secret", "file"))],
    # Versions: the owner's empty body is a 400; the owner's run is still
    # queued (no worker here), so answering again is refused as a 409.
    "conversation-branch": [Row("POST", "/api/conversations/{conversation}/branch/", _owner_only(400), body={})],
    "message-regenerate": [Row("POST", "/api/messages/{message}/regenerate/", _owner_only(409), body={})],
    "message-detail": [Row("DELETE", "/api/messages/{spare_message}/", _owner_only(204))],
    "conversation-export": [Row("GET", "/api/conversations/{conversation}/export/", _owner_only(200))],
    "conversation-shares": [
        Row("GET", "/api/conversations/{conversation}/shares/", _owner_only(200)),
        Row("POST", "/api/conversations/{conversation}/shares/", _owner_only(201)),
    ],
    "conversation-share-detail": [
        Row("DELETE", "/api/conversations/{conversation}/shares/{spare_share}/", _owner_only(204)),
    ],
    "run-detail": [Row("GET", "/api/runs/{run}/", _owner_only(200))],
    "run-cancel": [Row("POST", "/api/runs/{run}/cancel/", _owner_only(202))],
    # The owner's empty body is a 400; anyone else's request, the run is not found.
    "run-decision": [Row("POST", "/api/runs/{run}/tool-calls/call_1/decision/", _owner_only(400), body={})],
    "run-events": [Row("GET", "/api/runs/{run}/events/?after=999999", _owner_only(200))],
    "secret-list": [Row("GET", "/api/secrets/", _all(200))],
    "secret-detail": [
        # Each user sets a secret of their own (names are per user).
        Row("PUT", "/api/secrets/matrix_put/", _all(204), body={"value": "theirs"}),
        Row("DELETE", "/api/secrets/{secret}/", _owner_only(204)),
    ],
    "openai-chat-completions": [Row("POST", "/v1/chat/completions", _all(400), body=BAD_COMPLETION)],
    "openai-models": [Row("GET", "/v1/models", _all(200))],
    "openai-model": [Row("GET", "/v1/models/demo", _all(200))],
    "chat": [Row("GET", "/", _page(), session=True)],
    "chat-conversation": [Row("GET", "/c/{conversation}/", _owner_only(200, anonymous=LOGIN), session=True)],
    # A share link is public: anyone with it reads the snapshot, signed in or not.
    "share": [Row("GET", "/share/{share_token}/", _all(200, anonymous=200), session=True)],
    "tool-testing": [Row("GET", "/tools/testing/", _page(), session=True)],
    "settings": [Row("GET", "/settings/", _page(), session=True)],
    "secret-save": [Row("POST", "/settings/secrets/", _page(302), body={"name": "x", "value": "y"}, session=True)],
    # The form answers with a redirect and a message either way; the owner's
    # secret must survive the others' attempts (checked below).
    "secret-delete": [Row("POST", "/settings/secrets/{secret}/delete/", _page(302), session=True)],
    "token-create": [Row("POST", "/settings/tokens/", _page(200), body={"name": "t"}, session=True)],
    "token-rotate": [Row("POST", "/settings/tokens/{token_id}/rotate/", _owner_only(200, anonymous=LOGIN), session=True)],
    "token-revoke": [Row("POST", "/settings/tokens/{token_id}/revoke/", _owner_only(302, anonymous=LOGIN), session=True)],
    "login": [Row("GET", "/accounts/login/", {OWNER: 302, OTHER: 302, STAFF: 302, ANONYMOUS: 200}, session=True)],
    "logout": [Row("POST", "/accounts/logout/", _all(302, anonymous=302), session=True)],
}

WEBSOCKET_RULES: dict[str, dict[str, str]] = {
    # accepted, or the close code that refuses the handshake
    "ws/runs/<str:run_id>/": {OWNER: "accept", OTHER: "4404", STAFF: "4404", ANONYMOUS: "4401"},
    "ws/conversations/<str:conversation_id>/": {OWNER: "accept", OTHER: "4404", STAFF: "4404", ANONYMOUS: "4401"},
}


def _routes(patterns, namespace: str | None = None) -> set[tuple[str | None, str]]:
    found: set[tuple[str | None, str]] = set()
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            found |= _routes(pattern.url_patterns, pattern.namespace or namespace)
        elif isinstance(pattern, URLPattern):
            found.add((namespace, pattern.name or str(pattern.pattern)))
    return found


def test_every_route_has_a_rule():
    routes = _routes(get_resolver().url_patterns)
    ours = {name for namespace, name in routes if namespace != "admin"}
    assert ours - set(RULES) == set(), "routes without an authorization rule: add rows to RULES"
    assert set(RULES) - ours == set(), "rules for routes that no longer exist"
    assert {str(p.pattern) for p in websocket_urlpatterns} == set(WEBSOCKET_RULES)


@pytest.fixture
def world(django_user_model, idle_broker) -> dict[str, Any]:
    from chatforge.accounts.tokens import api_token_create

    users = {
        OWNER: django_user_model.objects.create_user(username="owner", password="pw"),
        OTHER: django_user_model.objects.create_user(username="other", password="pw"),
        STAFF: django_user_model.objects.create_user(username="staff", password="pw", is_staff=True),
    }
    tokens = {role: api_token_create(user=user, name="matrix").plaintext for role, user in users.items()}
    owner_api = APIClient()
    owner_api.credentials(HTTP_AUTHORIZATION=f"Bearer {tokens[OWNER]}")
    conversation = owner_api.post("/api/conversations/", {}, format="json").json()["id"]
    spare = owner_api.post("/api/conversations/", {}, format="json").json()["id"]
    accepted = owner_api.post(f"/api/conversations/{conversation}/messages/", {"content": "hello"}, format="json")
    assert accepted.status_code == 202, accepted.content
    user_secret_set(user=users[OWNER], name="matrix_key", value="matrix-secret-value")
    owned = Conversation.objects.get(pk=conversation)
    share = owner_api.post(f"/api/conversations/{conversation}/shares/").json()
    spare_share = owner_api.post(f"/api/conversations/{conversation}/shares/").json()
    spare_message = Message.objects.create(conversation_id=spare, role=Message.Role.USER, content="spare")
    return {
        "users": users,
        "tokens": tokens,
        "objects": {
            "conversation": conversation,
            "spare_conversation": spare,
            "run": accepted.json()["run_id"],
            "secret": "matrix_key",
            "token_id": ApiToken.objects.filter(user=users[OWNER]).first().pk,
            "file": str(image_file(users[OWNER], conversation=owned).pk),
            "spare_file": str(image_file(users[OWNER]).pk),
            "share_token": share["url"].rstrip("/").rsplit("/", 1)[1],
            "spare_share": spare_share["id"],
            "message": accepted.json()["message_id"],
            "spare_message": str(spare_message.pk),
        },
    }


def _client(world: dict[str, Any], role: str, *, session: bool) -> Client:
    if session:
        client = Client()
        if role != ANONYMOUS:
            client.force_login(world["users"][role])
        return client
    client = APIClient()
    if role != ANONYMOUS:
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {world['tokens'][role]}")
    return client


def _check(response, expected: int | str, where: str) -> None:
    if expected == LOGIN:
        assert response.status_code == 302, where
        assert response["Location"].startswith(reverse("login")), where
    elif expected == ADMIN_LOGIN:
        assert response.status_code == 302, where
        assert response["Location"].startswith(reverse("admin:login")), where
    else:
        assert response.status_code == expected, f"{where}: {response.status_code} {response.content[:300]!r}"
    if response.status_code >= 400 and not response.get("Content-Type", "").startswith("text/html"):
        assert response["Content-Type"].startswith("application/json"), where


@pytest.mark.parametrize("route", sorted(RULES))
def test_route_answers_each_role_as_its_rule_says(world, route):
    objects = world["objects"]
    for row in RULES[route]:
        path = row.path.format(**objects)
        for role in ROLES:
            client = _client(world, role, session=row.session)
            kwargs = {"data": row.body, "format": "json"} if row.body is not None and not row.session else {}
            if row.session and row.body is not None:
                kwargs = {"data": row.body}
            response = getattr(client, row.method.lower())(path, **kwargs)
            where = f"{row.method} {row.path} as {role}"
            _check(response, row.expect[role], where)
            if role != OWNER and response.status_code == 200 and "json" in response.get("Content-Type", ""):
                text = response.content.decode()
                for name in row.must_not_show:
                    assert str(objects[name]) not in text, f"{where} shows the owner's {name}"
    # Nothing the others tried changed the owner's things.
    owner = world["users"][OWNER]
    if route not in {"secret-detail", "secret-delete"}:
        assert UserSecret.objects.filter(user=owner, name="matrix_key").exists()
    if route not in {"token-rotate", "token-revoke"}:
        assert ApiToken.objects.filter(pk=objects["token_id"], revoked_at__isnull=True).exists()
    if route != "conversation-detail":
        assert Conversation.objects.filter(pk=objects["spare_conversation"]).exists()
    if route != "file-detail":
        assert StoredFile.objects.filter(pk=objects["spare_file"]).exists()
    if route != "conversation-share-detail":
        assert ConversationShare.objects.filter(pk=objects["spare_share"], revoked_at__isnull=True).exists()
    if route not in {"message-detail", "conversation-detail"}:
        assert Message.objects.filter(pk=objects["spare_message"]).exists()


API_ROUTES = sorted(name for name, rows in RULES.items() if all(r.path.startswith("/api/") for r in rows))


@pytest.mark.parametrize("route", API_ROUTES)
def test_api_routes_answer_the_same_without_their_trailing_slash(world, route):
    """Both spellings of every /api route reach the same view: never a
    redirect (a redirected POST loses its body), never a 404."""
    objects = world["objects"]
    for row in RULES[route]:
        path, _, query = row.path.format(**objects).partition("?")
        assert path.endswith("/"), f"{row.path}: /api routes are declared with the slash"
        unslashed = path.rstrip("/") + (f"?{query}" if query else "")
        kwargs = {"data": row.body, "format": "json"} if row.body is not None else {}
        response = getattr(_client(world, OWNER, session=False), row.method.lower())(unslashed, **kwargs)
        _check(response, row.expect[OWNER], f"{row.method} {unslashed} as owner")


def test_others_cannot_delete_or_revoke_what_is_not_theirs(world):
    """The rows that change things, tried by everyone but the owner: the
    owner's secret, token and conversation are all still there."""
    objects = world["objects"]
    for role in (OTHER, STAFF):
        session = _client(world, role, session=True)
        session.post(f"/settings/secrets/{objects['secret']}/delete/")
        session.post(f"/settings/tokens/{objects['token_id']}/revoke/")
        api = _client(world, role, session=False)
        api.delete(f"/api/secrets/{objects['secret']}/")
        api.delete(f"/api/conversations/{objects['conversation']}/")
        api.post(f"/api/runs/{objects['run']}/cancel/")
    owner = world["users"][OWNER]
    assert UserSecret.objects.filter(user=owner, name="matrix_key").exists()
    assert ApiToken.objects.filter(pk=objects["token_id"], revoked_at__isnull=True).exists()
    assert Conversation.objects.filter(pk=objects["conversation"]).exists()
    assert Run.objects.get(pk=objects["run"]).status != "cancelled"


def _websocket_outcome(path: str, token: str | None) -> str:
    async def connect() -> str:
        headers = [(b"authorization", f"Bearer {token}".encode())] if token else []
        communicator = WebsocketCommunicator(websocket_application, path, headers=headers)
        connected, code = await communicator.connect(timeout=5)
        if connected:
            await communicator.disconnect()
            return "accept"
        return str(code)

    return asyncio.run(connect())


@pytest.mark.parametrize("route", sorted(WEBSOCKET_RULES))
def test_websocket_route_answers_each_role_as_its_rule_says(world, route):
    objects = world["objects"]
    path = "/" + route.replace("<str:run_id>", objects["run"]).replace("<str:conversation_id>", objects["conversation"])
    for role in ROLES:
        token = world["tokens"].get(role)
        assert _websocket_outcome(path, token) == WEBSOCKET_RULES[route][role], f"{path} as {role}"


def _admin_paths() -> list[str]:
    """One concrete path per admin route (object ids filled with 1)."""
    paths = []
    for namespace, name in _routes(get_resolver().url_patterns):
        if namespace != "admin" or name.startswith("^") or "<" in name:
            continue
        for args in ((), ("1",), ("1", "1")):
            try:
                paths.append(reverse(f"admin:{name}", args=args))
                break
            except Exception:
                continue
    return sorted(set(paths) - {reverse("admin:login"), reverse("admin:logout")})


def test_every_admin_route_sends_non_staff_to_the_admin_sign_in(world):
    paths = _admin_paths()
    assert len(paths) > 20
    for role in (ANONYMOUS, OTHER):
        client = _client(world, role, session=True)
        for path in paths:
            _check(client.get(path), ADMIN_LOGIN, f"GET {path} as {role}")
