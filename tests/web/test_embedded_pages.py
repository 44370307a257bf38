"""The web pages of an embedded-mode server (``make run``: DEBUG on by
default): a deleted or unknown conversation's address is the app's own "not
found" page, not Django's debug page, and /favicon.ico leads to the icon."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator

import httpx
import pytest

from tests.support.stack import embedded_server

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def embedded() -> Iterator[tuple[str, str]]:
    """An embedded server with the demo user (demo / demo); its URL and an API token."""
    with embedded_server(prefix="chatforge-embedded-pages-") as server:
        yield server.url, server.token


def signed_in(base_url: str) -> httpx.Client:
    browser = httpx.Client(base_url=base_url, headers={"Accept": "text/html"})
    form = browser.get("/accounts/login/").text
    csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form).group(1)
    answer = browser.post("/accounts/login/", data={"username": "demo", "password": "demo",
                                                    "csrfmiddlewaretoken": csrf})
    assert answer.status_code == 302 and answer.headers["location"] == "/"
    return browser


def test_a_deleted_or_unknown_conversation_is_the_apps_not_found_page(embedded):
    base_url, token = embedded
    api = httpx.Client(base_url=base_url, headers={"Authorization": f"Bearer {token}"})
    gone = api.post("/api/conversations/", json={"title": "soon gone"}).json()["id"]
    assert api.delete(f"/api/conversations/{gone}/").status_code == 204

    browser = signed_in(base_url)
    try:
        assert "Using the URLconf" in browser.get("/no/such/page/").text  # DEBUG is on in this mode
        for path in (f"/c/{gone}/", f"/c/{uuid.uuid4()}/"):
            page = browser.get(path)
            assert page.status_code == 404 and page.headers["content-type"].startswith("text/html")
            assert "<h1>Not found</h1>" in page.text and '<a href="/">Back to the chat</a>' in page.text
            assert "URLconf" not in page.text and "soon gone" not in page.text
    finally:
        browser.close()


def test_favicon_ico_leads_to_the_icon(embedded):
    base_url, _ = embedded
    icon = httpx.get(f"{base_url}/favicon.ico")
    assert icon.status_code == 301
    followed = httpx.get(f"{base_url}/favicon.ico", follow_redirects=True)
    assert followed.status_code == 200 and followed.headers["content-type"].startswith("image/svg+xml")
    assert followed.text.startswith("<svg")
