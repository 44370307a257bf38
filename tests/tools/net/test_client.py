"""The guarded client: every hop checked, the checked address used, size and time bounded."""

from __future__ import annotations

import gzip
import socket
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from tests.tools.net.local_server import LocalServer, Reply
from tools.errors import ToolError, TransientToolError
from tools.net import guard, policy
from tools.net.client import GuardedResponse, UnsupportedContentType, guarded_request, parse_retry_after
from tools.net.guard import BlockedDestination




@pytest.fixture(scope="module")
def other_server() -> Iterator[LocalServer]:
    """A second live loopback server that is NOT allowed: a request reaching it is a guard failure."""
    other = LocalServer()
    other.start()
    other.route("/", Reply(200, "internal secrets", {"Content-Type": "text/plain"}))
    yield other
    other.stop()


def get(url: str, *, timeout_s: float = 5, max_bytes: int = 100_000, **kwargs: Any) -> GuardedResponse:
    return guarded_request("GET", url, timeout_s=timeout_s, max_bytes=max_bytes, **kwargs)


def test_the_allowed_test_server_is_reachable(server: LocalServer) -> None:
    server.route("/hello", Reply(200, "hi", {"Content-Type": "text/plain; charset=utf-8"}))
    response = get(server.url("/hello"), params={"q": "a b"})
    assert (response.status_code, response.text, response.truncated) == (200, "hi", False)
    assert response.content_type == "text/plain"
    assert response.url == server.url("/hello?q=a+b")
    assert server.requests[0].path == "/hello?q=a+b"


def test_a_redirect_to_another_loopback_port_is_refused(
    server: LocalServer, other_server: LocalServer
) -> None:
    server.route("/go", Reply.redirect(other_server.url("/")))
    with pytest.raises(BlockedDestination, match=f"127.0.0.1:{other_server.port}/: 127.0.0.1 is a loopback"):
        get(server.url("/go"))
    assert other_server.requests == []


def test_a_redirect_to_the_metadata_address_is_refused(server: LocalServer) -> None:
    server.route("/go", Reply.redirect("http://169.254.169.254/latest/meta-data/", status=301))
    with pytest.raises(BlockedDestination, match="169.254.169.254 is the cloud metadata address"):
        get(server.url("/go"))


def test_relative_redirects_are_followed_and_rechecked(server: LocalServer) -> None:
    server.route("/a/start", Reply.redirect("../b/end"))
    server.route("/b/end", Reply(200, "arrived", {"Content-Type": "text/plain"}))
    response = get(server.url("/a/start"))
    assert (response.text, response.url) == ("arrived", server.url("/b/end"))


def test_a_redirect_chain_is_limited(server: LocalServer) -> None:
    server.route("/loop", Reply.redirect("/loop"))
    with pytest.raises(ToolError, match="redirected more than 2 times"):
        get(server.url("/loop"), max_redirects=2)
    assert len(server.requests) == 3


def test_303_turns_a_post_into_a_get_without_body(server: LocalServer) -> None:
    server.route("/form", Reply.redirect("/done", status=303))
    server.route("/done", Reply(200, "ok", {"Content-Type": "text/plain"}))
    guarded_request("POST", server.url("/form"), json={"a": 1}, timeout_s=5, max_bytes=1000)
    assert [(r.method, r.path, r.body) for r in server.requests] == [
        ("POST", "/form", b'{"a":1}'),
        ("GET", "/done", b""),
    ]


def test_the_connection_goes_to_the_checked_address_with_the_original_host(
    server: LocalServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A name is resolved once, by the guard; the client must not resolve it again."""
    monkeypatch.setattr(guard, "_resolve", lambda host, port: ["127.0.0.1"])

    real_getaddrinfo = socket.getaddrinfo

    def numeric_only(host: str, *args: object, **kwargs: object) -> object:
        # Connecting to a literal address still "resolves" it, without DNS.
        assert guard.parse_ip_literal(host) is not None, f"the client resolved {host} again"
        return real_getaddrinfo(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", numeric_only)
    policy.configure(allowed_private_hosts=[f"api.example.test:{server.port}"])
    server.route("/", Reply(200, "pinned", {"Content-Type": "text/plain"}))
    response = get(f"http://api.example.test:{server.port}/")
    assert response.text == "pinned"
    assert server.requests[0].headers["host"] == f"api.example.test:{server.port}"


def test_credentials_do_not_follow_a_redirect_to_another_origin(
    server: LocalServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(guard, "_resolve", lambda host, port: ["127.0.0.1"])
    policy.configure(allowed_private_hosts=[server.host_port, f"other.test:{server.port}"])
    server.route("/start", Reply.redirect(f"http://other.test:{server.port}/end"))
    server.route("/end", Reply(200, "ok", {"Content-Type": "text/plain"}))
    get(server.url("/start"), headers={"Authorization": "Bearer s3cret", "X-Api-Key": "k"})
    first, second = server.requests
    assert first.headers["authorization"] == "Bearer s3cret"
    assert "authorization" not in second.headers and "x-api-key" not in second.headers


def test_allowed_domains_apply_to_every_hop(server: LocalServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(guard, "_resolve", lambda host, port: ["127.0.0.1"])
    policy.configure(allowed_private_hosts=[f"api.example.test:{server.port}", f"evil.test:{server.port}"])
    server.route("/go", Reply.redirect(f"http://evil.test:{server.port}/"))
    with pytest.raises(BlockedDestination, match="evil.test is not one of this tool's allowed domains"):
        get(f"http://api.example.test:{server.port}/go", allowed_domains=["example.test"])
    assert [r.path for r in server.requests] == ["/go"]


def test_the_body_stops_at_max_bytes(server: LocalServer) -> None:
    server.route("/big", Reply(200, "x" * 50_000, {"Content-Type": "text/plain"}))
    response = get(server.url("/big"), max_bytes=1000)
    assert (len(response.content), response.truncated) == (1000, True)


def test_the_limit_applies_to_the_decompressed_body(server: LocalServer) -> None:
    bomb = gzip.compress(b"\0" * 5_000_000)
    server.route("/bomb", Reply(200, bomb, {"Content-Type": "text/plain", "Content-Encoding": "gzip"}))
    response = get(server.url("/bomb"), max_bytes=10_000)
    assert (len(response.content), response.truncated) == (10_000, True)


def test_content_types_are_checked_before_reading(server: LocalServer) -> None:
    server.route("/img", Reply(200, b"\x89PNG", {"Content-Type": "image/png"}))
    with pytest.raises(UnsupportedContentType, match="is image/png, which this tool does not read"):
        get(server.url("/img"), allowed_content_types=["text/html"])


def test_a_slow_server_is_a_transient_timeout(server: LocalServer) -> None:
    server.route("/slow", Reply(200, "late", {"Content-Type": "text/plain"}, delay_s=2))
    with pytest.raises(TransientToolError, match="did not answer within 0.3 seconds"):
        get(server.url("/slow"), timeout_s=0.3)


def test_a_refused_connection_is_transient() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    policy.configure(allowed_private_hosts=[f"127.0.0.1:{port}"])
    try:
        with pytest.raises(TransientToolError, match=f"could not connect to 127.0.0.1 port {port}"):
            get(f"http://127.0.0.1:{port}/")
    finally:
        policy.configure(allowed_private_hosts=[])


def test_retry_after_reads_seconds_and_dates_and_is_capped() -> None:
    now = datetime(2025, 1, 1, 12, 0, 0, tzinfo=UTC)
    assert parse_retry_after("2") == 2.0
    assert parse_retry_after("Wed, 01 Jan 2025 12:00:30 GMT", now=now) == 30.0
    assert parse_retry_after("Wed, 01 Jan 2025 11:00:00 GMT", now=now) == 0.0
    assert parse_retry_after("86400") == 60.0
    assert parse_retry_after("soon") is None and parse_retry_after(None) is None
