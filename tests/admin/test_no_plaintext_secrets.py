"""No admin page and no API response shows a secret or token in plaintext.

Secrets, provider keys and API tokens with known values are created both
through the admin's forms and through the services; then every admin page
(built from ``admin.site._registry``, so new models are covered without
editing this file), every custom admin page and every API GET endpoint is
fetched, and no body may contain a plaintext, a stored ciphertext, any
ciphertext's decrypted value, or a token's hash.

To cover new pages (``test_every_route_is_crawled_or_explained`` fails
until a new route is either fetched or explained):
- pages a signed-in user sees (the web app): add them to ``user_page_urls``;
  they are fetched as the user who owns the planted secrets and tokens;
- API endpoints: add a GET URL to ``api_get_urls``;
- routes with nothing to GET (POST-only actions, streams): add them to
  ``UNCRAWLED_ROUTES`` with the reason.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, resolve

from chatforge.accounts.crypto import decrypt, encrypt
from chatforge.accounts.models import ApiToken, UserSecret
from chatforge.accounts.secrets import user_secret_set
from chatforge.accounts.tokens import api_token_create
from chatforge.conversations.selectors import messages_of
from chatforge.conversations.shares import share_create, share_path
from chatforge.files.models import FileQuota
from chatforge.llm.models import LanguageModel, Provider
from tests.support.files import image_file

from .crawl import admin_page_urls
from .factories import make_traced_run, make_user

pytestmark = pytest.mark.django_db

# Routes (as ``resolve(path).route`` spells them) not fetched, and why.
UNCRAWLED_ROUTES: dict[str, str] = {
    "admin/": "the admin is crawled from admin.site._registry (admin_page_urls)",
    "api/tools/test/": "POST only (runs a model test)",
    "metrics": "Prometheus counters: label values are route patterns, model, tool and kind names, no user data",
    "api/runs/(?P<pk>[^/.]+)/tool-calls/(?P<tool_call_id>[^/]+)/decision/$":
        "POST only (decides a call awaiting approval); answers the call's approval state",
    "api/tools/(?P<name>[a-zA-Z0-9_-]{1,64})/invoke/$": "POST only (staff); the executor scrubs secrets from results",
    "api/runs/(?P<pk>[^/.]+)/cancel/$": "POST only",
    "api/runs/<str:run_id>/events/": "an event stream; events carry tool outputs, which the executor scrubs of secrets",
    "api/secrets/<str:name>/": "PUT and DELETE only",
    "v1/chat/completions": "POST only",
    "settings/secrets/": "POST only (the settings page's form)",
    "settings/secrets/<str:name>/delete/": "POST only",
    "settings/tokens/": "POST only; the new token is shown in that POST's response only",
    "settings/tokens/<int:token_id>/rotate/": "POST only; as above",
    "settings/tokens/<int:token_id>/revoke/": "POST only",
    "accounts/login/": "the login form, for signed-out visitors",
    "accounts/logout/": "POST only",
    "favicon.ico": "a redirect to the static icon",
    "api/conversations/(?P<pk>[^/.]+)/branch/$": "POST only; answers the branch as GET …/messages/ does",
    "api/messages/(?P<pk>[^/.]+)/regenerate/$": "POST only; answers the new run's ids",
    "api/messages/(?P<pk>[^/.]+)/$": "DELETE only",
    "api/conversations/(?P<pk>[^/.]+)/shares/(?P<share_id>[^/]+)/$": "DELETE only (revokes a share)",
}

TOKEN = re.compile(r"cf_[A-Za-z0-9_-]{40,}")


@dataclass
class Planted:
    owner: Any
    api_token: str  # the owner's, to call the API with
    ids: dict[str, str]
    forbidden: set[str] = field(default_factory=set)


def _unique(label: str) -> str:
    return f"{label}-{secrets.token_hex(12)}"


@pytest.fixture
def planted(admin_client, admin_user) -> Planted:
    owner = make_user("owner")
    plaintexts: set[str] = set()

    # Secrets: through the service and through the admin's form, for the owner and the admin.
    for user, name in ((owner, "weather_key"), (admin_user, "weather_key")):
        value = _unique("service-secret")
        user_secret_set(user=user, name=name, value=value)
        plaintexts.add(value)
    value = _unique("admin-form-secret")
    assert admin_client.post("/admin/accounts/usersecret/add/",
                             {"user": owner.pk, "name": "tavily_api_key", "value": value}).status_code == 302
    plaintexts.add(value)

    # Provider keys: through the admin's form and stored directly.
    value = _unique("sk-admin-form")
    assert admin_client.post("/admin/llm/provider/add/", {"name": "from-form", "kind": "openai", "base_url": "",
                                                          "default_model": "", "enabled": "on",
                                                          "api_key": value}).status_code == 302
    plaintexts.add(value)
    value = _unique("sk-service")
    provider = Provider.objects.create(name="stored", kind="anthropic", api_key_ciphertext=encrypt(value))
    LanguageModel.objects.create(name="stored-model", provider=provider)
    plaintexts.add(value)

    # Tokens: the service, the admin's add form, and the admin's rotation (old and new).
    api_token = api_token_create(user=owner, name="api").plaintext
    plaintexts.add(api_token)
    rotated = api_token_create(user=owner, name="to-rotate")
    plaintexts.add(rotated.plaintext)
    created = admin_client.post("/admin/accounts/apitoken/add/", {"user": owner.pk, "name": "from-form"})
    rotation = admin_client.post(f"/admin/accounts/apitoken/{rotated.token.pk}/rotate/")
    shown = TOKEN.findall(created.content.decode()) + TOKEN.findall(rotation.content.decode())
    assert len(shown) == 2  # each shown once, on its own response
    plaintexts.update(shown)

    run = make_traced_run(owner)
    file = image_file(owner, conversation=run.conversation)
    FileQuota.objects.create(user=owner, max_bytes=10 * 1024 * 1024)
    forbidden = set(plaintexts)
    for ciphertext in [*UserSecret.objects.values_list("ciphertext", flat=True),
                       *Provider.objects.exclude(api_key_ciphertext="").values_list("api_key_ciphertext", flat=True)]:
        forbidden |= {ciphertext, decrypt(ciphertext)}
    forbidden |= set(ApiToken.objects.values_list("key_hash", flat=True))
    share = share_create(conversation=run.conversation, messages=messages_of(run.conversation), attachments={})
    return Planted(owner=owner, api_token=api_token, forbidden=forbidden, ids={
        "conversation": str(run.conversation_id), "run": str(run.pk), "model": "stored-model", "file": str(file.pk),
        "share_path": share_path(share),
    })


def user_page_urls(ids: dict[str, str]) -> list[str]:
    """Pages for signed-in users outside the admin and the API (the web app)."""
    return ["/", f"/c/{ids['conversation']}/", "/tools/testing/", "/settings/", ids["share_path"]]


def api_get_urls(ids: dict[str, str]) -> list[str]:
    """Every API GET endpoint, with the planted rows' ids filled in."""
    return [
        "/healthz", "/readyz",
        "/api/", "/api/schema/", "/api/docs/",
        "/api/conversations/", f"/api/conversations/{ids['conversation']}/",
        f"/api/conversations/{ids['conversation']}/messages/",
        f"/api/runs/{ids['run']}/",
        "/api/tools/", "/api/models/",
        "/api/secrets/",
        "/api/files/", f"/api/files/{ids['file']}/", f"/api/files/{ids['file']}/content/",
        f"/api/conversations/{ids['conversation']}/files/",
        f"/api/conversations/{ids['conversation']}/export/?format=markdown",
        f"/api/conversations/{ids['conversation']}/export/?format=json",
        f"/api/conversations/{ids['conversation']}/shares/",
        "/v1/models", f"/v1/models/{ids['model']}",
    ]


def assert_shows_nothing_secret(url: str, response, forbidden: set[str]) -> None:
    body = b"".join(response) if response.streaming else response.content  # a file download streams asynchronously
    text = body.decode("utf-8", errors="replace")
    leaked = sorted(value for value in forbidden if value in text)
    assert not leaked, f"{url} shows {len(leaked)} secret value(s)"


def test_no_admin_page_shows_a_secret(admin_client, admin_user, planted):
    urls = admin_page_urls(admin_user)
    assert len(urls) > 40  # the crawl reached the planted rows' pages
    for url in urls:
        response = admin_client.get(url)
        assert response.status_code == 200, url
        assert_shows_nothing_secret(url, response, planted.forbidden)


def test_no_api_response_shows_a_secret(planted):
    api = Client(headers={"Authorization": f"Bearer {planted.api_token}"})
    for url in api_get_urls(planted.ids):
        response = api.get(url)
        assert response.status_code == 200, (url, response.status_code)
        assert_shows_nothing_secret(url, response, planted.forbidden)


def test_no_user_page_shows_a_secret(client, planted):
    client.force_login(planted.owner)
    for url in user_page_urls(planted.ids):
        response = client.get(url)
        assert response.status_code == 200, url
        assert_shows_nothing_secret(url, response, planted.forbidden)


def test_every_route_is_crawled_or_explained(planted):
    urls = [*api_get_urls(planted.ids), *user_page_urls(planted.ids)]
    fetched = {resolve(url.split("?")[0]).route for url in urls}
    missing = [
        route for route in _routes(get_resolver())
        if route not in fetched and not _explained(route) and not _format_suffix(route)
    ]
    assert not missing, f"fetch these routes (api_get_urls, user_page_urls) or explain them: {missing}"


def _routes(resolver: URLResolver, prefix: str = "") -> list[str]:
    routes = []
    for entry in resolver.url_patterns:
        route = URLResolver._join_route(prefix, str(entry.pattern)) if prefix else str(entry.pattern)
        if isinstance(entry, URLPattern):
            routes.append(route)
        elif route in UNCRAWLED_ROUTES:
            routes.append(route)  # a whole include explained at once (the admin)
        else:
            routes += _routes(entry, route)
    return routes


def _explained(route: str) -> bool:
    return route in UNCRAWLED_ROUTES


def _format_suffix(route: str) -> bool:
    # DRF's ".json" variants of routes above: the same view and data.
    return "(?P<format>" in route or "<drf_format_suffix:format>" in route
