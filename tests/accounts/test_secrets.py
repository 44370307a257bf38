"""Users' stored secrets: encrypted at rest, rotatable, readable only by tools,
never returned by the API, never shown by the admin, never logged."""

from __future__ import annotations

import logging
import subprocess
import sys

import pytest
from cryptography.fernet import Fernet, InvalidToken
from django.contrib import admin
from django.core.exceptions import ImproperlyConfigured
from django.core.management import CommandError, call_command
from django.db import IntegrityError, transaction
from django.test import Client
from django.urls import include, path
from rest_framework.test import APIClient

from chatforge.accounts import crypto
from chatforge.accounts.models import UserSecret
from chatforge.accounts.secrets import (
    secret_lookup_for,
    user_secret_delete,
    user_secret_get,
    user_secret_names,
    user_secret_set,
    user_secrets_rotate,
)
from chatforge.errors import InvalidRequest
from tests.support.stack import ROOT, base_env
from tests.tools.factories import registry_of
from tools.base import ToolContext
from tools.builtin.web_search import WEB_SEARCH, configure_web_search, web_search_config
from tools.executor import execute_tool

# The routes as chatforge/api/urls.py and chatforge/urls.py mount them.
urlpatterns = [
    path("api/", include("chatforge.api.urls")),
    path("admin/", admin.site.urls),
]

pytestmark = [pytest.mark.django_db, pytest.mark.urls(__name__)]

KEY_A = Fernet.generate_key().decode()
KEY_B = Fernet.generate_key().decode()
VALUE = "tvly-very-secret-value-1b7e4c"
OTHER_VALUE = "tvly-second-secret-value-99d2"


@pytest.fixture(autouse=True)
def keys(settings):
    settings.CHATFORGE_SECRET_KEYS = [KEY_A]
    return settings


@pytest.fixture
def user(django_user_model):
    return django_user_model.objects.create_user(username="alice", password="pw")


@pytest.fixture
def api(make_user):
    user, token = make_user()
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    client.user = user
    return client


@pytest.fixture
def admin_client_(django_user_model) -> Client:
    superuser = django_user_model.objects.create_superuser(username="root", password="pw", email="r@e.test")
    client = Client()
    client.force_login(superuser)
    return client


# --- Encryption at rest --------------------------------------------------------


def test_the_database_holds_ciphertext_only_the_keys_open(user) -> None:
    user_secret_set(user=user, name="tavily_api_key", value=VALUE)

    stored = UserSecret.objects.get(user=user, name="tavily_api_key").ciphertext
    assert VALUE not in stored
    assert Fernet(KEY_A).decrypt(stored.encode()).decode() == VALUE
    with pytest.raises(InvalidToken):
        Fernet(KEY_B).decrypt(stored.encode())
    assert user_secret_get(user_id=user.id, name="tavily_api_key") == VALUE


def test_set_replaces_and_names_list_without_values(user, django_user_model) -> None:
    other = django_user_model.objects.create_user(username="bob", password="pw")
    user_secret_set(user=user, name="tavily_api_key", value=VALUE)
    user_secret_set(user=user, name="tavily_api_key", value=OTHER_VALUE)
    user_secret_set(user=user, name="another_key", value=VALUE)
    user_secret_set(user=other, name="bobs_key", value=VALUE)

    assert UserSecret.objects.filter(user=user).count() == 2
    assert user_secret_get(user_id=user.id, name="tavily_api_key") == OTHER_VALUE
    assert user_secret_names(user=user) == ["another_key", "tavily_api_key"]
    assert user_secret_get(user_id=user.id, name="bobs_key") is None
    assert user_secret_delete(user=user, name="another_key") is True
    assert user_secret_delete(user=user, name="another_key") is False
    assert user_secret_names(user=user) == ["tavily_api_key"]


@pytest.mark.parametrize("name", ["", "Upper", "has-dash", "spa ce", "x" * 65, "ünï", "a/b"])
def test_invalid_names_are_refused(user, name: str) -> None:
    with pytest.raises(InvalidRequest):
        user_secret_set(user=user, name=name, value=VALUE)
    assert not UserSecret.objects.exists()


def test_empty_and_oversized_values_are_refused(user) -> None:
    with pytest.raises(InvalidRequest, match="non-empty"):
        user_secret_set(user=user, name="k", value="")
    with pytest.raises(InvalidRequest, match="too long") as caught:
        user_secret_set(user=user, name="k", value="x" * 10_001)
    assert "xxxx" not in caught.value.message


def test_one_row_per_user_and_name(user) -> None:
    user_secret_set(user=user, name="k", value=VALUE)
    with pytest.raises(IntegrityError), transaction.atomic():
        UserSecret.objects.create(user=user, name="k", ciphertext="x")


def test_unknown_and_undecryptable_secrets_are_none(user, keys, caplog) -> None:
    assert user_secret_get(user_id=user.id, name="missing") is None
    user_secret_set(user=user, name="tavily_api_key", value=VALUE)
    UserSecret.objects.create(user=user, name="tampered", ciphertext="not-a-fernet-token-é")

    keys.CHATFORGE_SECRET_KEYS = [KEY_B]  # the key that wrote it is gone
    with caplog.at_level(logging.WARNING, logger="chatforge.accounts.secrets"):
        assert user_secret_get(user_id=user.id, name="tavily_api_key") is None
        assert user_secret_get(user_id=user.id, name="tampered") is None

    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2
    assert all(f"of user {user.id}" in w for w in warnings)
    assert "tavily_api_key" in warnings[0] and "tampered" in warnings[1]


def test_secret_lookup_reads_once_and_decrypts_on_demand(user, django_assert_num_queries) -> None:
    user_secret_set(user=user, name="tavily_api_key", value=VALUE)

    with django_assert_num_queries(1):
        lookup = secret_lookup_for(user.id)
        assert lookup("tavily_api_key") == VALUE
        assert lookup("tavily_api_key") == VALUE
        assert lookup("missing") is None
    assert ToolContext(user_id=user.id, secret_lookup=lookup).secret("tavily_api_key") == VALUE
    assert secret_lookup_for(None)("tavily_api_key") is None


# --- Keys and rotation -----------------------------------------------------------


def test_rotation_keeps_secrets_readable_after_the_old_key_is_removed(user, keys) -> None:
    user_secret_set(user=user, name="tavily_api_key", value=VALUE)
    user_secret_set(user=user, name="other", value=OTHER_VALUE)

    keys.CHATFORGE_SECRET_KEYS = [KEY_B, KEY_A]  # new key first: it encrypts, both decrypt
    assert user_secret_get(user_id=user.id, name="tavily_api_key") == VALUE
    call_command("rotate_secrets")
    keys.CHATFORGE_SECRET_KEYS = [KEY_B]  # old key removed

    assert user_secret_get(user_id=user.id, name="tavily_api_key") == VALUE
    assert user_secret_get(user_id=user.id, name="other") == OTHER_VALUE
    for row in UserSecret.objects.all():
        with pytest.raises(InvalidToken):
            Fernet(KEY_A).decrypt(row.ciphertext.encode())


def test_rotation_reports_and_keeps_rows_no_key_opens(user, keys) -> None:
    user_secret_set(user=user, name="good", value=VALUE)
    UserSecret.objects.create(user=user, name="lost", ciphertext=Fernet(KEY_B).encrypt(b"x").decode())
    lost_before = UserSecret.objects.get(name="lost").ciphertext

    with pytest.raises(CommandError, match=rf"user {user.id}: lost"):
        call_command("rotate_secrets")

    assert UserSecret.objects.get(name="lost").ciphertext == lost_before
    report = user_secrets_rotate()
    assert (report.rotated, report.undecryptable) == (1, [(user.id, "lost")])


def test_debug_mode_derives_a_stable_key_and_production_refuses(keys) -> None:
    keys.CHATFORGE_SECRET_KEYS = []
    keys.DEBUG = True
    token = crypto.encrypt(VALUE)
    assert crypto.secret_keys() == crypto.secret_keys()
    assert Fernet(crypto.secret_keys()[0]).decrypt(token.encode()).decode() == VALUE

    keys.DEBUG = False
    with pytest.raises(ImproperlyConfigured, match="Fernet.generate_key"):
        crypto.secret_keys()


def _load_settings(**environment: str) -> subprocess.CompletedProcess[str]:
    env = base_env(
        DATABASE_URL="postgres://postgres@127.0.0.1:5432/x", REDIS_URL="redis://127.0.0.1:6379/0",
        DJANGO_SECRET_KEY="settings-test-secret-key-0123456789-abcdefghijkl", **environment,
    )
    return subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"], cwd=ROOT, env=env,
        capture_output=True, text=True, timeout=60,
    )


def test_production_settings_refuse_to_start_without_keys() -> None:
    missing = _load_settings()
    assert missing.returncode != 0
    assert "CHATFORGE_SECRET_KEYS is not set" in missing.stderr
    assert "Fernet.generate_key().decode()" in missing.stderr

    bad = _load_settings(CHATFORGE_SECRET_KEYS=f"{KEY_A},CHANGE_ME")
    assert bad.returncode != 0
    assert "CHATFORGE_SECRET_KEYS entry 2 is not a Fernet key" in bad.stderr
    assert KEY_A not in bad.stderr

    assert _load_settings(CHATFORGE_SECRET_KEYS=f"{KEY_A},{KEY_B}").returncode == 0


# --- REST API ----------------------------------------------------------------------


def test_api_sets_lists_and_deletes_without_ever_returning_a_value(api) -> None:
    bodies: list[bytes] = []

    def call(method: str, url: str, data: dict | None = None, expected: int = 200):
        response = getattr(api, method)(url, data, format="json")
        bodies.append(response.content)
        assert response.status_code == expected, response.content
        return response

    assert call("get", "/api/secrets/").json() == {"names": []}
    assert call("put", "/api/secrets/tavily_api_key/", {"value": VALUE}, 204).content == b""
    call("put", "/api/secrets/tavily_api_key/", {"value": OTHER_VALUE}, 204)
    call("put", "/api/secrets/second/", {"value": VALUE}, 204)
    assert call("get", "/api/secrets/").json() == {"names": ["second", "tavily_api_key"]}
    assert user_secret_get(user_id=api.user.id, name="tavily_api_key") == OTHER_VALUE

    bad_name = call("put", "/api/secrets/Bad-Name/", {"value": VALUE}, 400).json()
    assert bad_name["error"]["code"] == "invalid_request"
    assert "Invalid secret name 'Bad-Name'" in bad_name["error"]["message"]
    assert call("put", "/api/secrets/k/", {"value": ""}, 400).json()["error"]["code"] == "invalid_request"
    assert "value" in call("put", "/api/secrets/k/", {}, 400).json()["error"]["message"]
    call("put", "/api/secrets/k/", {"value": VALUE + "x" * 10_000}, 400)

    assert call("delete", "/api/secrets/second/", expected=204).content == b""
    assert call("delete", "/api/secrets/second/", expected=404).json()["error"]["code"] == "not_found"
    assert call("get", "/api/secrets/").json() == {"names": ["tavily_api_key"]}

    for body in bodies:
        assert VALUE.encode() not in body and OTHER_VALUE.encode() not in body


def test_api_is_per_user_and_needs_authentication(api, make_user) -> None:
    other, _ = make_user()
    user_secret_set(user=other, name="bobs_key", value=VALUE)

    assert api.get("/api/secrets/").json() == {"names": []}
    assert api.delete("/api/secrets/bobs_key/").status_code == 404
    assert user_secret_get(user_id=other.id, name="bobs_key") == VALUE
    assert APIClient().get("/api/secrets/").status_code in (401, 403)
    assert APIClient().put("/api/secrets/k/", {"value": VALUE}, format="json").status_code in (401, 403)


# --- Admin ---------------------------------------------------------------------


def test_admin_list_and_change_page_never_show_the_value(admin_client_, user) -> None:
    secret = user_secret_set(user=user, name="tavily_api_key", value=VALUE)

    listing = admin_client_.get("/admin/accounts/usersecret/")
    searched = admin_client_.get("/admin/accounts/usersecret/", {"q": "alice"})
    change = admin_client_.get(f"/admin/accounts/usersecret/{secret.pk}/change/")
    add = admin_client_.get("/admin/accounts/usersecret/add/")

    for response in (listing, searched, change, add):
        assert response.status_code == 200
        html = response.content.decode()
        assert VALUE not in html
        assert secret.ciphertext not in html
    for response in (listing, searched):
        html = response.content.decode()
        assert "tavily_api_key" in html and "••••" in html and "alice" in html
    assert 'type="password"' in change.content.decode()


def test_admin_blank_value_keeps_the_secret_and_a_new_value_replaces_it(admin_client_, user) -> None:
    secret = user_secret_set(user=user, name="tavily_api_key", value=VALUE)
    url = f"/admin/accounts/usersecret/{secret.pk}/change/"

    kept = admin_client_.post(url, {"user": user.pk, "name": "tavily_api_key", "value": ""})
    assert kept.status_code == 302, kept.content.decode()
    assert user_secret_get(user_id=user.id, name="tavily_api_key") == VALUE

    replaced = admin_client_.post(url, {"user": user.pk, "name": "tavily_api_key", "value": OTHER_VALUE})
    assert replaced.status_code == 302
    assert user_secret_get(user_id=user.id, name="tavily_api_key") == OTHER_VALUE
    assert OTHER_VALUE not in UserSecret.objects.get(pk=secret.pk).ciphertext


def test_admin_add_needs_a_value_and_a_valid_name(admin_client_, user) -> None:
    url = "/admin/accounts/usersecret/add/"

    no_value = admin_client_.post(url, {"user": user.pk, "name": "k", "value": ""})
    bad_name = admin_client_.post(url, {"user": user.pk, "name": "Bad-Name", "value": VALUE})
    assert no_value.status_code == bad_name.status_code == 200  # the form again, with errors
    assert "A new secret needs a value." in no_value.content.decode()
    assert VALUE not in bad_name.content.decode()  # the password field is not re-rendered
    assert not UserSecret.objects.exists()

    added = admin_client_.post(url, {"user": user.pk, "name": "k", "value": VALUE})
    assert added.status_code == 302
    assert user_secret_get(user_id=user.id, name="k") == VALUE


# --- Logs ----------------------------------------------------------------------------


def test_no_value_is_ever_logged(api, keys, caplog) -> None:
    keys.DEBUG = True  # so Django also logs every SQL query with its parameters
    caplog.set_level(logging.DEBUG)
    caplog.set_level(logging.DEBUG, logger="django.db.backends")
    user = api.user

    api.put("/api/secrets/tavily_api_key/", {"value": VALUE}, format="json")
    api.get("/api/secrets/")
    user_secret_set(user=user, name="second", value=OTHER_VALUE)
    assert user_secret_get(user_id=user.id, name="tavily_api_key") == VALUE
    keys.CHATFORGE_SECRET_KEYS = [KEY_B, KEY_A]
    call_command("rotate_secrets")
    keys.CHATFORGE_SECRET_KEYS = [KEY_B]
    UserSecret.objects.create(user=user, name="lost", ciphertext=Fernet(KEY_A).encrypt(b"x").decode())
    assert secret_lookup_for(user.id)("lost") is None

    previous = web_search_config()
    configure_web_search(base_url="http://127.0.0.1:9", default_api_key=None)  # nothing listens
    try:
        context = ToolContext(user_id=user.id, secret_lookup=secret_lookup_for(user.id))
        result = execute_tool(registry_of(WEB_SEARCH), "web_search", {"query": "q"}, context=context,
                              sleep=lambda _: None)
    finally:
        configure_web_search(base_url=previous.base_url, default_api_key=previous.default_api_key)
    assert result.attempts == 2  # it did use the key: the request was tried and retried
    api.delete("/api/secrets/tavily_api_key/")

    assert any("django.db.backends" == r.name for r in caplog.records), "SQL logging was expected"
    assert VALUE not in caplog.text
    assert OTHER_VALUE not in caplog.text
