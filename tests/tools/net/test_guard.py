"""The address guard: only public http(s) destinations, however they are spelled."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterator

import pytest

from tools.errors import ToolError
from tools.net import policy
from tools.net.guard import BlockedDestination, InvalidURL, check_domain, check_url, forbidden_reason


@pytest.fixture(autouse=True)
def nothing_allowed() -> Iterator[None]:
    policy.configure(allowed_private_hosts=[])
    yield
    policy.configure(allowed_private_hosts=[])


def resolves_to(*addresses: str):
    """A resolver answering ``addresses`` for any host, so no test depends on real DNS."""
    return lambda host, port: list(addresses)


@pytest.mark.parametrize(
    ("url", "named"),
    [
        ("http://127.0.0.1:8000/", "127.0.0.1 is a loopback address"),
        ("http://[::1]/", "::1 is a loopback address"),
        ("http://10.0.0.1/", "10.0.0.1 is a private address"),
        ("http://172.16.0.1/", "172.16.0.1 is a private address"),
        ("http://192.168.1.1/", "192.168.1.1 is a private address"),
        ("http://169.254.169.254/latest/meta-data/", "169.254.169.254 is the cloud metadata address"),
        ("http://169.254.1.1/", "169.254.1.1 is a link-local address"),
        ("http://0.0.0.0/", "0.0.0.0 is an unspecified address"),
        ("http://[::]/", ":: is an unspecified address"),
        ("http://100.64.0.1/", "100.64.0.1 is a shared (carrier-grade NAT) address"),
        ("http://224.0.0.1/", "224.0.0.1 is a multicast address"),
        ("http://240.0.0.1/", "240.0.0.1 is a reserved address"),
        ("http://[fc00::1]/", "fc00::1 is a private address"),
        ("http://[fe80::1]/", "fe80::1 is a link-local address"),
        ("http://2130706433/", "2130706433 means 127.0.0.1, a loopback address"),
        ("http://0x7f000001/", "0x7f000001 means 127.0.0.1, a loopback address"),
        ("http://0177.0.0.1/", "0177.0.0.1 means 127.0.0.1, a loopback address"),
        ("http://127.1/", "127.1 means 127.0.0.1, a loopback address"),
        ("http://0xa9.254.169.254/", "means 169.254.169.254, the cloud metadata address"),
        ("http://[::ffff:127.0.0.1]/", "a loopback address (127.0.0.1) in IPv6 form"),
        ("http://[::ffff:a9fe:a9fe]/", "the cloud metadata address (169.254.169.254) in IPv6 form"),
        ("http://[2002:c0a8:101::]/", "a private address (192.168.1.1) in IPv6 form"),
        ("http://[64:ff9b::7f00:1]/", "a loopback address (127.0.0.1) in IPv6 form"),
    ],
)
def test_non_public_addresses_are_refused_and_named(url: str, named: str) -> None:
    with pytest.raises(BlockedDestination) as caught:
        check_url(url)
    message = str(caught.value)
    assert message.startswith("refusing to fetch ")
    assert named in message
    assert message.endswith("which tools may not reach.")


def test_the_message_shows_the_url_without_credentials_or_query() -> None:
    with pytest.raises(BlockedDestination) as caught:
        check_url("http://user:hunter2@127.0.0.1:8000/path?api_key=s3cret")
    assert str(caught.value) == (
        "refusing to fetch http://127.0.0.1:8000/path: "
        "127.0.0.1 is a loopback address, which tools may not reach."
    )


def test_a_name_resolving_to_loopback_is_refused() -> None:
    with pytest.raises(BlockedDestination, match=r"localhost resolves to (127\.0\.0\.1|::1), a loopback"):
        check_url("http://localhost:8000/")


def test_one_private_address_among_public_ones_is_enough_to_refuse() -> None:
    with pytest.raises(BlockedDestination, match="evil.example resolves to 10.1.2.3, a private address"):
        check_url("https://evil.example/", resolver=resolves_to("93.184.216.34", "10.1.2.3"))


def test_a_public_name_passes_with_every_checked_address() -> None:
    target = check_url(
        "https://Example.COM/a?b=1", resolver=resolves_to("93.184.216.34", "2606:2800:220:1::1")
    )
    assert (target.scheme, target.host, target.port) == ("https", "example.com", 443)
    assert target.addresses == ("93.184.216.34", "2606:2800:220:1::1")
    assert not target.allowed_private


def test_public_literals_pass_without_dns() -> None:
    def no_dns(host: str, port: int) -> list[str]:
        raise AssertionError("a literal address must not be resolved")

    assert check_url("http://1.1.1.1:8080/", resolver=no_dns).addresses == ("1.1.1.1",)
    assert check_url("http://0x01010101/", resolver=no_dns).addresses == ("1.1.1.1",)


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://example.com/", "gopher://example.com:70/_x"])
def test_only_http_and_https_are_allowed(url: str) -> None:
    with pytest.raises(BlockedDestination, match="only http and https URLs may be fetched"):
        check_url(url)


@pytest.mark.parametrize("url", ["http:///path", "http://example.com:99999/", ""])
def test_unusable_urls_are_the_callers_to_fix(url: str) -> None:
    with pytest.raises(InvalidURL):
        check_url(url)


def test_an_unknown_host_is_a_final_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(*args: object, **kwargs: object) -> list[object]:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", fail)
    with pytest.raises(ToolError, match="could not resolve no-such-host.example"):
        check_url("http://no-such-host.example/")


def test_the_allowance_covers_exactly_one_host_and_port() -> None:
    policy.configure(allowed_private_hosts=["127.0.0.1:8000"])
    target = check_url("http://127.0.0.1:8000/")
    assert target.allowed_private and target.addresses == ("127.0.0.1",)
    with pytest.raises(BlockedDestination):
        check_url("http://127.0.0.1:8001/")
    with pytest.raises(BlockedDestination):
        check_url("http://2130706433:8000/")


def test_allowed_domains_accept_the_domain_and_its_subdomains_only() -> None:
    public = resolves_to("93.184.216.34")
    check_domain(check_url("https://api.example.com/", resolver=public), ["example.com"])
    check_domain(check_url("https://example.com/", resolver=public), ["example.com"])
    check_domain(check_url("https://anything.test/", resolver=public), [])
    for url in ("https://badexample.com/", "https://example.com.evil.test/"):
        with pytest.raises(BlockedDestination, match="is not one of this tool's allowed domains"):
            check_domain(check_url(url, resolver=public), ["example.com"])


def test_a_public_address_has_no_reason_to_be_refused() -> None:
    assert forbidden_reason(ipaddress.ip_address("8.8.8.8")) is None
    assert forbidden_reason(ipaddress.ip_address("2001:4860:4860::8888")) is None
