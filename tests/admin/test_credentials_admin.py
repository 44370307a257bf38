"""API tokens, users' secrets and provider keys in the admin: generated or
written, never shown back."""

from __future__ import annotations

import re

import pytest

from chatforge.accounts.crypto import decrypt
from chatforge.accounts.models import ApiToken, UserSecret
from chatforge.accounts.tokens import api_token_create, user_for_token
from chatforge.llm.models import Provider

from .factories import make_user

pytestmark = pytest.mark.django_db

TOKEN = re.compile(r"cf_[A-Za-z0-9_-]{40,}")


def tokens_in(response) -> list[str]:
    return TOKEN.findall(response.content.decode())


def test_creating_a_token_generates_it_and_shows_it_once(admin_client):
    owner = make_user("alice")
    form = admin_client.get("/admin/accounts/apitoken/add/")
    assert set(form.context["adminform"].form.fields) == {"user", "name"}  # nobody types a token

    created = admin_client.post("/admin/accounts/apitoken/add/", {"user": owner.pk, "name": "laptop"})

    assert created.status_code == 200
    assert "no-store" in created["Cache-Control"]
    [plaintext] = tokens_in(created)
    token = ApiToken.objects.get(user=owner)
    assert user_for_token(plaintext) == owner  # the shown token works...
    assert token.prefix == plaintext[:10] and plaintext not in token.key_hash  # ...and only its hash is stored
    for later in ("/admin/accounts/apitoken/", f"/admin/accounts/apitoken/{token.pk}/change/",
                  f"/admin/accounts/apitoken/{token.pk}/history/"):
        page = admin_client.get(later).content.decode()
        assert plaintext not in page and token.key_hash not in page, later
    assert f"{token.prefix}…" in admin_client.get("/admin/accounts/apitoken/").content.decode()


def test_the_key_hash_is_not_a_field_anywhere(admin_client):
    token = api_token_create(user=make_user("alice"), name="cli").token
    change = admin_client.get(f"/admin/accounts/apitoken/{token.pk}/change/")
    assert "key_hash" not in change.content.decode() and token.key_hash not in change.content.decode()
    # Only the name can be edited; nothing posted can set the hash or the owner.
    other = make_user("mallory")
    admin_client.post(f"/admin/accounts/apitoken/{token.pk}/change/",
                      {"name": "renamed", "key_hash": "0" * 64, "user": other.pk})
    token.refresh_from_db()
    assert token.name == "renamed" and token.key_hash != "0" * 64 and token.user.username == "alice"


def test_rotating_revokes_and_shows_the_new_token_once(admin_client):
    owner = make_user("alice")
    old = api_token_create(user=owner, name="ci")
    url = f"/admin/accounts/apitoken/{old.token.pk}/rotate/"

    confirm = admin_client.get(url)
    assert confirm.status_code == 200 and "Yes, rotate it" in confirm.content.decode()
    assert user_for_token(old.plaintext) == owner  # nothing happens on GET

    rotated = admin_client.post(url)

    [new_plaintext] = tokens_in(rotated)
    assert new_plaintext != old.plaintext
    assert user_for_token(old.plaintext) is None and user_for_token(new_plaintext) == owner
    new = ApiToken.objects.get(revoked_at__isnull=True)
    assert new.name == "ci" and new.user == owner
    assert new_plaintext not in admin_client.get(f"/admin/accounts/apitoken/{new.pk}/change/").content.decode()
    # A revoked token cannot be rotated again.
    again = admin_client.post(url, follow=True)
    assert "already revoked" in again.content.decode() and not tokens_in(again)


def test_revoking(admin_client):
    owner = make_user("alice")
    issued = api_token_create(user=owner, name="ci")
    url = f"/admin/accounts/apitoken/{issued.token.pk}/revoke/"
    change = admin_client.get(f"/admin/accounts/apitoken/{issued.token.pk}/change/").content.decode()
    assert url in change and url.replace("revoke", "rotate") in change

    assert admin_client.get(url).status_code == 200 and user_for_token(issued.plaintext) == owner
    done = admin_client.post(url, follow=True)

    assert "was revoked" in done.content.decode()
    assert user_for_token(issued.plaintext) is None
    assert url not in done.content.decode()  # no more revoke/rotate buttons


def test_bulk_revoke_and_rotate_actions(admin_client):
    owner = make_user("alice")
    first, second, third = (api_token_create(user=owner, name=f"t{i}") for i in range(3))

    admin_client.post("/admin/accounts/apitoken/", {"action": "revoke_selected",
                                                    "_selected_action": [first.token.pk, second.token.pk]})
    assert user_for_token(first.plaintext) is None and user_for_token(second.plaintext) is None

    rotated = admin_client.post("/admin/accounts/apitoken/", {
        "action": "rotate_selected", "_selected_action": [first.token.pk, third.token.pk]})

    [new_plaintext] = tokens_in(rotated)  # only the active one was rotated
    assert user_for_token(third.plaintext) is None and user_for_token(new_plaintext) == owner


def test_token_list_filters_by_status(admin_client):
    owner = make_user("alice")
    active = api_token_create(user=owner, name="active-one")
    revoked = api_token_create(user=owner, name="revoked-one")
    admin_client.post(f"/admin/accounts/apitoken/{revoked.token.pk}/revoke/")
    for status, expected in (("active", active), ("revoked", revoked)):
        listed = admin_client.get(f"/admin/accounts/apitoken/?status={status}").context["cl"].result_list
        assert [token.pk for token in listed] == [expected.token.pk], status


def test_secrets_are_write_only(admin_client):
    owner = make_user("alice")
    response = admin_client.post("/admin/accounts/usersecret/add/",
                                 {"user": owner.pk, "name": "weather_key", "value": "plain-weather-key"})
    assert response.status_code == 302
    secret = UserSecret.objects.get(user=owner)
    assert decrypt(secret.ciphertext) == "plain-weather-key"
    for url in ("/admin/accounts/usersecret/", f"/admin/accounts/usersecret/{secret.pk}/change/"):
        page = admin_client.get(url).content.decode()
        assert "plain-weather-key" not in page and secret.ciphertext not in page

    # A blank value keeps the stored one; a new value replaces it.
    admin_client.post(f"/admin/accounts/usersecret/{secret.pk}/change/",
                      {"user": owner.pk, "name": "weather_key", "value": ""})
    secret.refresh_from_db()
    assert decrypt(secret.ciphertext) == "plain-weather-key"
    admin_client.post(f"/admin/accounts/usersecret/{secret.pk}/change/",
                      {"user": owner.pk, "name": "weather_key", "value": "rotated-key"})
    secret.refresh_from_db()
    assert decrypt(secret.ciphertext) == "rotated-key"


def test_provider_keys_are_write_only_and_encrypted(admin_client):
    form = {"name": "openai-prod", "kind": "openai", "base_url": "", "default_model": "", "enabled": "on"}
    created = admin_client.post("/admin/llm/provider/add/", {**form, "api_key": "sk-plain-provider-key"})
    assert created.status_code == 302
    provider = Provider.objects.get(name="openai-prod")
    assert decrypt(provider.api_key_ciphertext) == "sk-plain-provider-key"
    change_url = f"/admin/llm/provider/{provider.pk}/change/"
    for url in ("/admin/llm/provider/", change_url):
        page = admin_client.get(url).content.decode()
        assert "sk-plain-provider-key" not in page and provider.api_key_ciphertext not in page
        assert "••••" in page

    both = admin_client.post(change_url, {**form, "api_key": "sk-new", "clear_api_key": "on"})
    assert "not both" in str(both.context["adminform"].form.errors["clear_api_key"])
    admin_client.post(change_url, {**form, "api_key": ""})  # blank keeps the key
    provider.refresh_from_db()
    assert decrypt(provider.api_key_ciphertext) == "sk-plain-provider-key"
    admin_client.post(change_url, {**form, "clear_api_key": "on"})
    provider.refresh_from_db()
    assert provider.api_key_ciphertext == ""
