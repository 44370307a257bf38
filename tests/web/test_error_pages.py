"""Errors by path: API paths answer JSON (OpenAI's shape on /v1), the web
pages Django's page, for a failed CSRF check and a foreign Host header; a
secret name no secret can have is a message on the settings page, not a 500."""

from __future__ import annotations

import pytest
from django.http import HttpRequest, HttpResponse
from django.test import Client, override_settings
from django.urls import path

from chatforge.accounts.secrets import user_secret_names, user_secret_set

pytestmark = pytest.mark.django_db


def _changes_something(request: HttpRequest) -> HttpResponse:
    return HttpResponse("changed")


# Every real API view is csrf-exempt (token-authenticated): these plain views
# are not, so the CSRF middleware and CSRF_FAILURE_VIEW answer as they would
# for any view that ever forgets.
urlpatterns = [
    path("api/plain/", _changes_something),
    path("v1/plain", _changes_something),
    path("plain/", _changes_something),
]


@pytest.fixture
def browser(django_user_model) -> Client:
    """A signed-in browser that sends no CSRF token."""
    client = Client(enforce_csrf_checks=True)
    client.force_login(django_user_model.objects.create_user(username="browser", password="pw"))
    return client


@override_settings(ROOT_URLCONF=__name__)
def test_a_failed_csrf_check_is_json_on_api_paths_and_the_page_elsewhere(browser):
    api = browser.post("/api/plain/", HTTP_ACCEPT="text/html")
    assert api.status_code == 403 and api["Content-Type"] == "application/json"
    error = api.json()["error"]
    assert error["code"] == "csrf_failed" and "Authorization: Bearer" in error["message"]

    openai = browser.post("/v1/plain")
    assert openai.status_code == 403
    assert openai.json()["error"]["type"] == "invalid_request_error"
    assert openai.json()["error"]["code"] == "csrf_failed"

    page = browser.post("/plain/")  # whatever the client accepts: a page path gets the page
    assert page.status_code == 403 and page["Content-Type"].startswith("text/html")
    assert "CSRF verification failed" in page.content.decode()


def test_a_failed_csrf_check_on_a_real_page_is_djangos_page(browser):
    response = browser.post("/settings/secrets/", {"name": "k", "value": "v"})
    assert response.status_code == 403 and response["Content-Type"].startswith("text/html")


@override_settings(ALLOWED_HOSTS=["chatforge.example"], DEBUG=False)
def test_a_foreign_host_header_on_a_page_is_a_plain_400_page():
    response = Client(raise_request_exception=False).get("/settings/", HTTP_HOST="evil.example")
    assert response.status_code == 400
    assert response["Content-Type"].startswith("text/html")


# (A NUL, "%00", is refused for any URL before a view runs: chatforge/api/nul_guard.py.)
@pytest.mark.parametrize("name", ["%ED%A0%80", "Bad-Name", "a" * 65])
def test_deleting_a_secret_with_an_impossible_name_says_so_on_the_settings_page(django_user_model, name):
    user = django_user_model.objects.create_user(username="keeper", password="pw")
    user_secret_set(user=user, name="kept_key", value="v")
    client = Client(raise_request_exception=False)
    client.force_login(user)
    response = client.post(f"/settings/secrets/{name}/delete/", follow=True)
    assert response.status_code == 200
    assert response.redirect_chain[-1][0].endswith("/settings/")
    assert "Invalid secret name" in response.content.decode()
    assert user_secret_names(user=user) == ["kept_key"]


def test_deleting_a_secret_by_its_name_still_works(django_user_model):
    user = django_user_model.objects.create_user(username="keeper", password="pw")
    user_secret_set(user=user, name="old_key", value="v")
    client = Client()
    client.force_login(user)
    response = client.post("/settings/secrets/old_key/delete/", follow=True)
    assert "Deleted secret old_key." in response.content.decode()
    assert user_secret_names(user=user) == []
