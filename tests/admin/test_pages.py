"""Every admin page loads for a superuser, empty and with data."""

from __future__ import annotations

import datetime

import pytest

from chatforge.accounts.secrets import user_secret_set
from chatforge.accounts.tokens import api_token_create
from chatforge.catalog.models import Assistant, ToolDefinition
from chatforge.llm.models import LanguageModel, ModelValidation, Provider
from chatforge.scheduling.models import ToolLimit, UsageCounter, UserLimits

from .crawl import admin_page_urls
from .factories import make_traced_run, make_user

pytestmark = pytest.mark.django_db


def _load_all(client, user) -> list[str]:
    urls = admin_page_urls(user)
    failures = [(url, response.status_code) for url in urls if (response := client.get(url)).status_code != 200]
    assert not failures, failures
    return urls


def test_every_page_loads_without_data(admin_client, admin_user):
    urls = _load_all(admin_client, admin_user)
    assert "/admin/conversations/run/" in urls and "/admin/catalog/tooldefinition/code-tools/" in urls


def test_every_page_loads_with_data(admin_client, admin_user):
    user = make_user("alice")
    run = make_traced_run(user)
    user_secret_set(user=user, name="weather_key", value="s3cret-value")
    api_token_create(user=user, name="laptop")
    provider = Provider.objects.create(name="local", kind="openai", base_url="http://127.0.0.1:1/v1")
    LanguageModel.objects.create(name="local-model", provider=provider)
    ModelValidation.objects.create(model="local-model", query="time?", success=True, tool_calls=1, run=run)
    ToolDefinition.objects.create(
        name="fake_weather", description="Weather, made up.", kind="mock",
        parameters={"type": "object", "properties": {"city": {"type": "string"}}}, mock_response={"temp_c": 12},
    )
    ToolDefinition.objects.create(
        name="city_weather", description="Weather.", kind="http", url="https://api.example.com/w",
        parameters={"type": "object", "properties": {}},
    )
    Assistant.objects.create(name="mathbot", tools=["calculator"], max_iterations=3, max_running_steps=4)
    limits = UserLimits.objects.create(user=user, max_running_steps=2, token_budget=10_000)
    ToolLimit.objects.create(tool_name="calculator", max_concurrency=3, daily_quota_per_user=100)
    UsageCounter.objects.create(user=user, kind="tool:calculator", day=datetime.date.today(), used=7)

    urls = _load_all(admin_client, admin_user)
    assert f"/admin/scheduling/userlimits/{limits.pk}/change/" in urls

    assert f"/admin/conversations/run/{run.pk}/change/" in urls
    assert f"/admin/conversations/conversation/{run.conversation_id}/change/" in urls
    assert "/admin/catalog/tooldefinition/run/fake_weather/" in urls


def test_the_index_links_the_code_tools_page(admin_client):
    page = admin_client.get("/admin/").content.decode()
    assert 'href="/admin/catalog/tooldefinition/code-tools/"' in page
    listing = admin_client.get("/admin/catalog/tooldefinition/").content.decode()
    assert 'href="/admin/catalog/tooldefinition/code-tools/"' in listing


def test_staff_without_permissions_cannot_open_the_custom_pages(client, django_user_model):
    staff = django_user_model.objects.create_user(username="staff", password="pw", is_staff=True)
    client.force_login(staff)
    for url in ("/admin/catalog/tooldefinition/code-tools/", "/admin/catalog/tooldefinition/run/echo/"):
        assert client.get(url).status_code == 403, url
