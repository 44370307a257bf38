"""web_fetch: readable text from a page, through the guarded client."""

from __future__ import annotations

from typing import Any

import pytest

from tests.tools.factories import registry_of
from tests.tools.net.local_server import LocalServer, Reply
from tools.base import ToolContext
from tools.builtin.web_fetch import WEB_FETCH, html_to_text, web_fetch
from tools.errors import ToolError, TransientToolError
from tools.executor import ToolResult, execute_tool
from tools.net.client import RetryAfter
from tools.net.guard import BlockedDestination




PAGE = """<!doctype html>
<html><head><title>  The   Example Page </title>
<style>body { color: red }</style>
<script>var secret = "do not show";</script></head>
<body>
<nav><a href="/">Home</a> | <a href="/about">About</a></nav>
<h1>Welcome</h1>
<p>First   paragraph with <b>bold</b>
   text.</p>
<p>Second paragraph.</p>
<script>document.write("also hidden")</script>
<noscript>Enable JavaScript</noscript>
</body></html>"""


def fetch(arguments: dict[str, Any]) -> ToolResult:
    return execute_tool(registry_of(WEB_FETCH), "web_fetch", arguments, sleep=lambda s: None)


def test_a_local_html_page_becomes_title_and_text(server: LocalServer) -> None:
    server.route("/page", Reply.html(PAGE))
    result = fetch({"url": server.url("/page")})
    assert result.status == "success"
    assert result.result == {
        "url": server.url("/page"),
        "final_url": server.url("/page"),
        "status": 200,
        "content_type": "text/html",
        "title": "The Example Page",
        "text": "Welcome\nFirst paragraph with bold text.\nSecond paragraph.",
        "truncated": False,
    }


def test_scripts_styles_and_navigation_are_removed() -> None:
    _, text = html_to_text(PAGE)
    for hidden in ("do not show", "also hidden", "color: red", "About", "Enable JavaScript"):
        assert hidden not in text


def test_the_final_url_follows_redirects(server: LocalServer) -> None:
    server.route("/old", Reply.redirect("/page", status=301))
    server.route("/page", Reply.html(PAGE))
    result = fetch({"url": server.url("/old")}).result
    assert (result["url"], result["final_url"]) == (server.url("/old"), server.url("/page"))


def test_long_text_is_truncated_to_max_chars(server: LocalServer) -> None:
    server.route("/long", Reply(200, "word " * 2000, {"Content-Type": "text/plain"}))
    result = fetch({"url": server.url("/long"), "max_chars": 1000}).result
    assert (len(result["text"]), result["truncated"], result["title"]) == (1000, True, None)


def test_json_and_markdown_are_returned_as_text(server: LocalServer) -> None:
    server.route("/data", Reply.json({"a": 1}))
    server.route("/readme", Reply(200, "# Title\n\nBody", {"Content-Type": "text/markdown"}))
    assert fetch({"url": server.url("/data")}).result["text"] == '{"a": 1}'
    assert fetch({"url": server.url("/readme")}).result["text"] == "# Title\n\nBody"


def test_a_non_text_content_type_is_refused(server: LocalServer) -> None:
    server.route("/file.zip", Reply(200, b"PK\x03\x04", {"Content-Type": "application/zip"}))
    result = fetch({"url": server.url("/file.zip")})
    assert result.status == "error" and result.attempts == 1
    assert "is application/zip, which this tool does not read" in result.error


def test_a_missing_page_is_a_final_error(server: LocalServer) -> None:
    server.route("/gone", Reply(404, "nope", {"Content-Type": "text/html"}))
    result = fetch({"url": server.url("/gone")})
    assert result.error == "Error executing tool 'web_fetch': the page answered 404 Not Found"
    assert result.attempts == 1


def test_server_errors_and_rate_limits_are_transient(server: LocalServer) -> None:
    server.route("/down", Reply(503, "down", {"Content-Type": "text/html"}))
    server.route("/limited", Reply(429, "later", {"Content-Type": "text/html", "Retry-After": "3"}))
    with pytest.raises(TransientToolError, match="503 Service Unavailable"):
        web_fetch({"url": server.url("/down")}, ToolContext())
    with pytest.raises(RetryAfter) as caught:
        web_fetch({"url": server.url("/limited")}, ToolContext())
    assert caught.value.retry_after_s == 3
    assert fetch({"url": server.url("/down")}).attempts == 2


def test_loopback_is_refused_without_the_allowance() -> None:
    with pytest.raises(BlockedDestination, match="127.0.0.1 is a loopback address"):
        web_fetch({"url": "http://127.0.0.1:9/"}, ToolContext())
    result = fetch({"url": "http://0x7f000001:9/"})
    assert "0x7f000001 means 127.0.0.1, a loopback address, which tools may not reach." in result.error


def test_the_arguments_are_checked_by_the_schema() -> None:
    assert fetch({"url": "https://example.com/", "max_chars": 10}).retryable_by_model
    assert fetch({"url": "https://example.com/", "extra": 1}).retryable_by_model
    assert isinstance(WEB_FETCH.policy.timeout_s, float) and WEB_FETCH.policy.max_attempts == 2


def test_a_final_error_is_a_tool_error() -> None:
    assert issubclass(BlockedDestination, ToolError)
