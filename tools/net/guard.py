"""The address guard: which URLs a tool may fetch, and at which addresses.

Tools fetch URLs the model chose, and the model reads untrusted text, so a URL
is attacker-controlled input (server-side request forgery). The guard refuses
any URL whose host is, or resolves to, an address that is not globally
routable: loopback, private networks, link-local (including the cloud metadata
service at 169.254.169.254), multicast, unspecified, reserved and shared
addresses, and IPv6 forms that embed one of those.

Every resolved address is checked, not only the first, and the checked
addresses are returned so the client connects to exactly them: resolving
again at connect time would let a DNS server answer differently the second
time (DNS rebinding).

The one exception is ``tools.net.policy.allowed_private_hosts()``, an explicit
list of ``host:port`` pairs used by tests.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from urllib.parse import SplitResult, urlsplit

from tools.errors import ToolArgumentError, ToolError, TransientToolError
from tools.net import policy

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
# (host, port) -> every address the host resolves to; injectable for tests.
Resolver = Callable[[str, int], list[str]]

_DEFAULT_PORTS = {"http": 80, "https": 443}

_METADATA_ADDRESS = ipaddress.IPv4Address("169.254.169.254")
_SHARED_NETWORK = ipaddress.IPv4Network("100.64.0.0/10")
_PRIVATE_NETWORKS = (
    ipaddress.IPv4Network("10.0.0.0/8"),
    ipaddress.IPv4Network("172.16.0.0/12"),
    ipaddress.IPv4Network("192.168.0.0/16"),
    ipaddress.IPv6Network("fc00::/7"),
)
# IPv6 prefixes whose last 32 bits, or bits 16-48, are an IPv4 address that a
# gateway will forward to: judge them by that IPv4 address.
_NAT64_NETWORK = ipaddress.IPv6Network("64:ff9b::/96")

_HEX_PART = re.compile(r"0[xX][0-9a-fA-F]*")
_OCTAL_PART = re.compile(r"0[0-7]+")
_DECIMAL_PART = re.compile(r"0|[1-9][0-9]*")


class BlockedDestination(ToolError):
    """The URL points somewhere tools may not go; retrying will not change that."""


class InvalidURL(ToolArgumentError):
    """The URL cannot be fetched as written (no host, bad port, ...); the caller can fix it."""


@dataclass(frozen=True)
class ResolvedTarget:
    """A URL that passed the guard, with the addresses the client must connect to."""

    url: str
    scheme: str
    host: str  # lower-case, without IPv6 brackets
    port: int
    addresses: tuple[str, ...]  # every checked address, in resolver order
    allowed_private: bool  # reached through the test-only allowance

    @property
    def origin(self) -> tuple[str, str, int]:
        """Scheme, host and port: what decides whether credentials may follow a redirect."""
        return (self.scheme, self.host, self.port)


def check_url(url: str, *, resolver: Resolver | None = None) -> ResolvedTarget:
    """Refuse ``url`` unless it is http(s) and every address of its host is public.

    Raises ``InvalidURL`` for a URL that cannot be fetched as written,
    ``BlockedDestination`` for one tools may not reach, and
    ``TransientToolError`` when DNS fails temporarily.
    """
    parts = _split(url)
    scheme = parts.scheme.lower()
    shown = display_url(url)
    if scheme not in _DEFAULT_PORTS:
        raise BlockedDestination(
            f"refusing to fetch {shown}: only http and https URLs may be fetched, "
            f"not {scheme or 'scheme-less'} URLs"
        )
    host = parts.hostname
    if not host:
        raise InvalidURL(f"the URL {shown} has no host")
    port = _port(parts, scheme, shown)
    allowed = _is_allowed_private(host, port)

    literal = parse_ip_literal(host)
    if literal is not None:
        addresses = [literal]
    else:
        addresses = [_parse_resolved(a) for a in (resolver or _resolve)(host, port)]
    if not allowed:
        for address in addresses:
            _refuse_if_forbidden(shown, host, address, resolved=literal is None)
    return ResolvedTarget(
        url=url,
        scheme=scheme,
        host=host,
        port=port,
        addresses=tuple(str(a) for a in addresses),
        allowed_private=allowed,
    )


def check_domain(target: ResolvedTarget, allowed_domains: Sequence[str]) -> None:
    """Refuse ``target`` unless its host equals or is a subdomain of one of ``allowed_domains``.

    An empty list allows every (public) host.
    """
    if not allowed_domains:
        return
    host = target.host.rstrip(".")
    for domain in allowed_domains:
        domain = domain.lower().strip(".")
        if host == domain or host.endswith("." + domain):
            return
    raise BlockedDestination(
        f"refusing to fetch {display_url(target.url)}: {target.host} is not one of this tool's "
        f"allowed domains ({', '.join(allowed_domains)})"
    )


def display_url(url: str) -> str:
    """``url`` without user info, query or fragment, for messages.

    Those parts can carry credentials (``?api_key=...``), and messages reach
    the model and the logs.
    """
    try:
        parts = urlsplit(url)
        netloc = parts.netloc.rpartition("@")[2]
        return SplitResult(parts.scheme, netloc, parts.path or "/", "", "").geturl()
    except ValueError:
        return "(an invalid URL)"


def parse_ip_literal(host: str) -> IPAddress | None:
    """The address ``host`` spells, in standard or legacy numeric form, or None for a name.

    Legacy forms (``2130706433``, ``0x7f000001``, ``0177.0.0.1``, ``127.1``)
    are what ``inet_aton`` accepts; resolving them would normalise them too,
    but parsing them here lets the refusal name the real address.
    """
    try:
        return ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return _parse_legacy_ipv4(host)


def forbidden_reason(address: IPAddress) -> str | None:
    """Why tools may not reach ``address`` (e.g. "a loopback address"), or None if it is public."""
    if isinstance(address, ipaddress.IPv6Address):
        embedded = _embedded_ipv4(address)
        if embedded is not None:
            reason = forbidden_reason(embedded)
            return f"{reason} ({embedded}) in IPv6 form" if reason else None
    return _plain_reason(address)


def _plain_reason(address: IPAddress) -> str | None:
    """The reason for an address judged as itself (no embedded IPv4)."""
    if address.is_unspecified:
        return "an unspecified address"
    if address.is_loopback:
        return "a loopback address"
    if address == _METADATA_ADDRESS:
        return "the cloud metadata address"
    if address.is_link_local:
        return "a link-local address"
    if isinstance(address, ipaddress.IPv4Address) and address in _SHARED_NETWORK:
        return "a shared (carrier-grade NAT) address"
    if address.is_multicast:
        return "a multicast address"
    if any(address in network for network in _PRIVATE_NETWORKS):
        return "a private address"
    if address.is_reserved:
        return "a reserved address"
    if not address.is_global:
        return "an address that is not publicly routable"
    return None


def _embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address stands for (mapped, 6to4, NAT64), if any.

    Teredo (2001::/32) needs no case here: it is not globally routable as a
    whole and is refused as such.
    """
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address in _NAT64_NETWORK:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def _refuse_if_forbidden(shown: str, host: str, address: IPAddress, *, resolved: bool) -> None:
    reason = forbidden_reason(address)
    if reason is None:
        return
    if resolved:
        what = f"{host} resolves to {address}, {reason}"
    elif _is_standard_literal(host):
        what = f"{host} is {reason}"
    else:
        what = f"{host} means {address}, {reason}"
    raise BlockedDestination(f"refusing to fetch {shown}: {what}, which tools may not reach.")


def _is_standard_literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    return True


def _split(url: str) -> SplitResult:
    if not isinstance(url, str) or not url.strip():
        raise InvalidURL("the URL is empty")
    try:
        return urlsplit(url.strip())
    except ValueError as exc:
        raise InvalidURL(f"the URL {display_url(url)} is not valid ({exc})") from None


def _port(parts: SplitResult, scheme: str, shown: str) -> int:
    try:
        port = parts.port
    except ValueError:
        raise InvalidURL(f"the URL {shown} has an invalid port") from None
    return _DEFAULT_PORTS[scheme] if port is None else port


def _is_allowed_private(host: str, port: int) -> bool:
    allowed = policy.allowed_private_hosts()
    return f"{host}:{port}" in allowed or f"[{host}]:{port}" in allowed


def _parse_legacy_ipv4(host: str) -> ipaddress.IPv4Address | None:
    """Parse the ``inet_aton`` spellings: 1-4 parts, each decimal, 0x-hex or 0-octal.

    The last part fills all remaining bytes, so ``127.1`` is 127.0.0.1 and
    ``2130706433`` is 127.0.0.1 too.
    """
    parts = host.split(".")
    if len(parts) > 1 and parts[-1] == "":
        parts.pop()  # a trailing dot, as in "127.0.0.1."
    if not 1 <= len(parts) <= 4:
        return None
    numbers = [_parse_legacy_part(p) for p in parts]
    if any(n is None for n in numbers):
        return None
    *leading, last = [n for n in numbers if n is not None]
    if any(n > 0xFF for n in leading) or last >= 256 ** (4 - len(leading)):
        return None
    value = last
    for index, number in enumerate(leading):
        value += number << (8 * (3 - index))
    return ipaddress.IPv4Address(value)


def _parse_legacy_part(part: str) -> int | None:
    if _HEX_PART.fullmatch(part):
        return int(part[2:] or "0", 16)
    if _OCTAL_PART.fullmatch(part):
        return int(part, 8)
    if _DECIMAL_PART.fullmatch(part):
        return int(part)
    return None


def _parse_resolved(address: str) -> IPAddress:
    # getaddrinfo returns IPv6 link-local addresses with a "%scope" suffix.
    return ipaddress.ip_address(address.split("%", 1)[0])


def _resolve(host: str, port: int) -> list[str]:
    """Every address ``host`` resolves to, deduplicated, in resolver order."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        if exc.errno == socket.EAI_AGAIN:
            raise TransientToolError(f"could not resolve {host} right now (temporary DNS failure)") from None
        raise ToolError(f"could not resolve {host}: no such host") from None
    except UnicodeError:
        raise InvalidURL(f"{host} is not a valid host name") from None
    addresses: list[str] = []
    for _family, _type, _proto, _canonname, sockaddr in infos:
        address = str(sockaddr[0])
        if address not in addresses:
            addresses.append(address)
    if not addresses:
        raise ToolError(f"could not resolve {host}: no addresses")
    return addresses
