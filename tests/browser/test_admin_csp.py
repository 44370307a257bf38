"""The admin's tool and MCP pages and DRF's browsable API need nothing the
strict Content-Security-Policy forbids: no ``style=""`` attribute, inline
``<style>`` without the request's nonce, or inline script.

Chromium reports each blocked thing twice: a ``securitypolicyviolation``
event in the page (collected here, page by page, with what was blocked and
where) and a console error (which the ``page`` fixture fails any browser test
on). The browsable API is served only with DJANGO_DEBUG on, so it is read
from a second web process of the stack with DEBUG set.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.utils import timezone
from playwright.sync_api import Page, expect

from chatforge.conversations.models import Conversation
from chatforge.mcp.models import McpServer
from tests.browser.conftest import PASSWORD
from tests.support.stack import DistributedStack, Process, free_port, start_server

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

# Runs before any of the page's own scripts, in every document the page loads.
COLLECT_VIOLATIONS = """
window.__cspViolations = [];
document.addEventListener("securitypolicyviolation", (event) => {
  window.__cspViolations.push(
    `${event.effectiveDirective} blocked ${event.blockedURI || "inline"} at ` +
    `${event.sourceFile || location.pathname}:${event.lineNumber} ${event.sample || ""}`.trim());
}, true);
"""


@pytest.fixture(scope="module")
def debug_web(stack: DistributedStack) -> Iterator[str]:
    """A web process of the same stack (database, Redis, secret key) with
    DJANGO_DEBUG on: the one setting that turns DRF's browsable API on."""
    port = free_port()
    process: Process = start_server(port=port, env={**stack.env, "DJANGO_DEBUG": "true"}, log_dir=stack.log_dir,
                                    name="web-debug")
    yield f"http://127.0.0.1:{port}"
    process.stop()


def sign_in_to_the_admin(page: Page, base_url: str, username: str) -> None:
    page.goto(f"{base_url}/admin/login/?next=/admin/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    expect(page.locator("#site-name")).to_be_visible()
    expect(page.locator("#content-main")).to_be_visible()


def violations_on(page: Page) -> list[str]:
    """What the policy blocked on the page now shown, once it has finished loading."""
    page.wait_for_load_state("networkidle")
    return page.evaluate("window.__cspViolations || []")


def visit(page: Page, url: str, ready: str) -> list[str]:
    page.goto(url)
    expect(page.locator(ready).first).to_be_visible()
    return violations_on(page)


def test_admin_tool_and_mcp_pages_and_the_browsable_api_keep_to_the_policy(
    page: Page, stack, debug_web: str, browser_user
) -> None:
    admin = browser_user("csp-admin-pages", staff=True)
    conversation = Conversation.objects.create(user=admin, title="Policy check")
    McpServer.objects.create(
        name="docs", url="https://mcp.example.com/mcp", discovered_at=timezone.now(),
        discovered_tools=[{"name": "search", "title": None, "description": "Search the docs.", "annotations": None,
                           "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}}}],
    )
    server = McpServer.objects.get(name="docs")
    page.add_init_script(COLLECT_VIOLATIONS)
    sign_in_to_the_admin(page, stack.http_url, "csp-admin-pages")

    found: dict[str, list[str]] = {}
    for path, ready in [
        ("/admin/catalog/tooldefinition/add/", "#tooldefinition_form"),
        ("/admin/catalog/tooldefinition/run/calculator/", "#run-tool-form"),
        ("/admin/catalog/tooldefinition/code-tools/", "#code-tools"),
        ("/admin/catalog/assistant/add/", "#assistant_form"),
        ("/admin/mcp/mcpserver/add/", "#mcpserver_form"),
        ("/admin/mcp/mcpserver/", "#result_list"),
        (f"/admin/mcp/mcpserver/{server.pk}/change/", "#mcp-discovered-tools"),
    ]:
        found[path] = visit(page, f"{stack.http_url}{path}", ready)

    # The MCP server's page (shown last) still has the look its stylesheet gives.
    expect(page.locator("form.mcp-refresh")).to_have_css("display", "inline")

    # The run page after a run: the result, with the form filled in again.
    page.goto(f"{stack.http_url}/admin/catalog/tooldefinition/run/calculator/")
    page.fill("#id_arguments", '{"expression": "17 * 23"}')
    page.click("#run-tool-form input[type=submit]")
    expect(page.locator("#tool-result")).to_contain_text("391")
    found["/admin/catalog/tooldefinition/run/calculator/ (after a run)"] = violations_on(page)
    # JSON is edited in monospace, from a class in a stylesheet, not a style attribute.
    expect(page.locator("#id_arguments")).to_have_css("font-family", "monospace")
    expect(page.locator("#tool-result .cf-json").first).to_have_css("white-space", "pre-wrap")

    # DRF's browsable API, signed in by the same session cookie (cookies are
    # per host, not per port).
    for path, ready in [
        ("/api/conversations/", ".response-info"),
        # A detail route with extra actions: DRF's "Extra Actions" menu.
        (f"/api/conversations/{conversation.pk}/", "#extra-actions-menu"),
        ("/api/tools/", ".response-info"),
        ("/api/tools/test/", ".response-info"),
    ]:
        found[f"{path} (browsable API)"] = visit(page, f"{debug_web}{path}", ready)

    blocked = [f"{path}: {what}" for path, found_there in found.items() for what in found_there]
    assert not blocked, "The Content-Security-Policy blocked:\n" + "\n".join(blocked)
