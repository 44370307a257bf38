"""Every page carries a strict Content-Security-Policy; our own inline
styles carry the request's nonce. (The browser test
tests/browser/test_content_security_policy.py checks that no page breaks it.)"""

from __future__ import annotations

import re

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


def _directives(response) -> dict[str, list[str]]:
    header = response["Content-Security-Policy"]
    return {name: values for name, *values in (part.split() for part in header.split(";") if part.strip())}


@pytest.fixture
def staff_client(django_user_model) -> Client:
    client = Client()
    client.force_login(django_user_model.objects.create_superuser(username="root", password="pw"))
    return client


@pytest.mark.parametrize("path", ["/", "/tools/testing/", "/settings/", "/admin/", "/accounts/login/"])
def test_pages_forbid_inline_scripts_plugins_and_framing(staff_client, path):
    response = (Client() if path == "/accounts/login/" else staff_client).get(path)
    assert response.status_code == 200
    policy = _directives(response)
    assert policy["script-src"] == ["'self'"]
    assert policy["object-src"] == ["'none'"]
    assert policy["frame-ancestors"] == ["'none'"]
    assert policy["base-uri"] == ["'self'"]
    assert policy["form-action"] == ["'self'"]
    assert "'unsafe-inline'" not in response["Content-Security-Policy"]
    assert "'unsafe-eval'" not in response["Content-Security-Policy"]


@pytest.mark.parametrize("path", ["/admin/catalog/tooldefinition/code-tools/", "/admin/catalog/tooldefinition/add/",
                                  "/admin/mcp/mcpserver/add/"])
def test_our_admin_pages_have_no_inline_styles(staff_client, path):
    """Their styles are static files (catalog/admin.css, mcp/admin.css):
    nothing for the policy to allow inline."""
    response = staff_client.get(path)
    assert response.status_code == 200, response.status_code
    page = response.content.decode()
    assert re.findall(r"<style[\s>]", page) == [] and re.findall(r"\sstyle=", page) == []
