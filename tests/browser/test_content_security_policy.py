"""Every page a person uses works under the strict Content-Security-Policy:
the ``page`` fixture fails a test on any violation Chromium reports, so this
walks the pages the other browser tests do not (the admin's, the API docs)."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_the_pages_need_nothing_the_policy_forbids(page: Page, stack, log_in, browser_user) -> None:
    browser_user("csp-admin", staff=True)
    log_in(page, "csp-admin")
    expect(page.locator("#message-input")).to_be_visible()

    header = page.request.get(f"{stack.http_url}/").headers["content-security-policy"]
    assert "script-src 'self'" in header and "frame-ancestors 'none'" in header

    for path, ready in [
        ("/tools/testing/", "#test-form"),
        ("/settings/", "#secret-form"),
        ("/admin/", "#content"),
        ("/admin/catalog/tooldefinition/", "#content"),
        ("/admin/catalog/tooldefinition/code-tools/", "#content"),
        ("/admin/conversations/run/", "#content"),
        ("/api/docs/", ".swagger-ui .info"),
    ]:
        page.goto(f"{stack.http_url}{path}")
        expect(page.locator(ready).first).to_be_visible()
        page.wait_for_load_state("networkidle")
