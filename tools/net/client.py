"""A small HTTP client for tools that applies the address guard to every hop.

``guarded_request`` exists because an ordinary HTTP client is unsafe for URLs
the model chose:

* it follows redirects on its own, so a public page could send it to
  ``http://169.254.169.254/``; here every redirect target is checked again;
* it resolves the host again when it connects, so DNS could answer with a
  private address after the check passed; here the request goes to the very
  address the guard checked, with the original ``Host`` header and TLS server
  name (httpcore's ``sni_hostname`` extension), so certificates are still
  verified against the host name;
* it reads whole bodies and applies timeouts per read; here the body is
  streamed up to ``max_bytes`` and one deadline covers the whole exchange.

Environment proxies are ignored (``trust_env=False``): a proxy would connect
on our behalf to whatever the URL names, bypassing the pinned address.
"""

from __future__ import annotations

import email.utils
import json as jsonlib
import ssl
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx

from tools.errors import ToolError, TransientToolError
from tools.net.guard import InvalidURL, ResolvedTarget, check_domain, check_url, display_url

_REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
RETRY_AFTER_CAP_S = 60.0


class UnsupportedContentType(ToolError):
    """The response is of a type the caller does not read."""


class RetryAfter(TransientToolError):
    """A transient failure whose server said how long to wait (HTTP 429/503 ``Retry-After``).

    The executor waits at least ``retry_after_s`` before the next attempt,
    even when its own backoff would be shorter.
    """

    def __init__(self, message: str, *, retry_after_s: float) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


@dataclass(frozen=True)
class GuardedResponse:
    """The final response after redirects, with a body of at most ``max_bytes``."""

    status_code: int
    reason_phrase: str
    headers: httpx.Headers
    url: str  # the final URL, after redirects
    content: bytes
    truncated: bool  # the body was longer than max_bytes and was cut
    encoding: str | None = None  # the charset the server declared, if any

    @property
    def content_type(self) -> str:
        """The media type without parameters, lower-case ("" when absent)."""
        return media_type(self.headers)

    @property
    def text(self) -> str:
        """The body decoded with the declared charset (UTF-8 otherwise), never failing."""
        try:
            return self.content.decode(self.encoding or "utf-8", errors="replace")
        except LookupError:  # a charset Python does not know
            return self.content.decode("utf-8", errors="replace")

    def json(self) -> Any:
        """The body parsed as JSON; raises ``ValueError`` if it is not."""
        return jsonlib.loads(self.text)


@dataclass(frozen=True)
class _Hop:
    """One request of the redirect chain."""

    method: str
    url: httpx.URL
    headers: Mapping[str, str]
    json: Any
    content: bytes | str | None


def guarded_request(
    method: str,
    url: str,
    *,
    headers: Mapping[str, str] | None = None,
    params: Mapping[str, Any] | None = None,
    json: Any = None,
    content: bytes | str | None = None,
    timeout_s: float,
    max_bytes: int,
    max_redirects: int = 5,
    allowed_content_types: Sequence[str] | None = None,
    allowed_domains: Sequence[str] = (),
) -> GuardedResponse:
    """Send one request through the guard, following up to ``max_redirects`` redirects.

    ``allowed_content_types`` (media types such as ``text/html``) is checked
    on a successful (2xx) final response before its body is read. Caller
    headers go only to the original origin: a redirect elsewhere drops them,
    as they may carry credentials. Raises ``BlockedDestination``,
    ``InvalidURL``, ``UnsupportedContentType``, ``ToolError`` (too many
    redirects, TLS failure) or ``TransientToolError`` (connection failures,
    timeouts).
    """
    deadline = time.monotonic() + timeout_s
    target = check_url(url)
    hop = _Hop(
        method=method.upper(),
        url=_parse(url).copy_merge_params(params or {}),
        headers=dict(headers or {}),
        json=json,
        content=content,
    )
    for redirects in range(max_redirects + 1):
        check_domain(target, allowed_domains)
        client, response = _send(hop, target, deadline=deadline, timeout_s=timeout_s)
        try:
            location = response.headers.get("location")
            if response.status_code not in _REDIRECT_STATUSES or not location:
                return _finish(response, hop, target, deadline, timeout_s, max_bytes, allowed_content_types)
        finally:
            response.close()
            client.close()
        if redirects == max_redirects:
            raise ToolError(f"{display_url(url)} redirected more than {max_redirects} times")
        hop = _follow(hop, target, response.status_code, location)
        target = check_url(str(hop.url))
    raise AssertionError("unreachable")  # the loop always returns or raises


def parse_retry_after(value: str | None, *, now: datetime | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or HTTP date), capped.

    None when absent or unreadable. Capped at ``RETRY_AFTER_CAP_S`` so a server
    cannot park a worker for hours.
    """
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        seconds = float(value)
    else:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - (now or datetime.now(UTC))).total_seconds()
    return min(max(seconds, 0.0), RETRY_AFTER_CAP_S)


def media_type(headers: httpx.Headers | Mapping[str, str]) -> str:
    """The media type of a Content-Type header, lower-case, without parameters."""
    return str(headers.get("content-type", "")).split(";", 1)[0].strip().lower()


def _parse(url: str) -> httpx.URL:
    try:
        return httpx.URL(url)
    except httpx.InvalidURL as exc:
        raise InvalidURL(f"the URL {display_url(url)} is not valid ({exc})") from None


def _send(
    hop: _Hop, target: ResolvedTarget, *, deadline: float, timeout_s: float
) -> tuple[httpx.Client, httpx.Response]:
    """Send ``hop`` to the first checked address that accepts a connection.

    A fresh client per hop: pooled connections are keyed by address, so a
    connection opened (and its certificate verified) for one host name must
    not be reused for another host on the same address.
    """
    _ensure_same_host(hop.url, target)
    last_error: httpx.ConnectError | None = None
    for address in target.addresses:
        timeout = httpx.Timeout(_remaining(deadline, target, timeout_s))
        client = httpx.Client(trust_env=False, follow_redirects=False, timeout=timeout)
        request = client.build_request(
            hop.method, hop.url, headers=hop.headers, json=hop.json, content=hop.content
        )
        # The Host header was computed from the real URL above; only the
        # connection target changes.
        request.url = request.url.copy_with(host=address)
        if target.scheme == "https":
            request.extensions["sni_hostname"] = hop.url.raw_host.decode("ascii")
        try:
            response = client.send(request, stream=True)
        except httpx.ConnectError as exc:
            client.close()
            if _is_tls_failure(exc):
                raise ToolError(f"the TLS connection to {target.host} failed: {exc}") from None
            last_error = exc
            continue
        except httpx.LocalProtocolError:
            client.close()
            raise ToolError(
                f"the request to {target.host} could not be sent (invalid header or URL)"
            ) from None
        except httpx.HTTPError as exc:
            client.close()
            raise _transient(exc, target, timeout_s) from None
        return client, response
    raise TransientToolError(
        f"could not connect to {target.host} port {target.port}"
        + (f" ({last_error})" if last_error and str(last_error) else "")
    )


def _finish(
    response: httpx.Response,
    hop: _Hop,
    target: ResolvedTarget,
    deadline: float,
    timeout_s: float,
    max_bytes: int,
    allowed_content_types: Sequence[str] | None,
) -> GuardedResponse:
    """Check the content type of a success, then read at most ``max_bytes`` of the body."""
    if allowed_content_types is not None and 200 <= response.status_code < 300:
        kind = media_type(response.headers)
        if kind not in allowed_content_types:
            raise UnsupportedContentType(
                f"{display_url(target.url)} is {kind or 'of no declared type'}, which this tool "
                f"does not read (it reads {', '.join(allowed_content_types)})"
            )
    content, truncated = _read_body(response, target, deadline, timeout_s, max_bytes)
    return GuardedResponse(
        status_code=response.status_code,
        reason_phrase=response.reason_phrase,
        headers=response.headers,
        url=str(hop.url),
        content=content,
        truncated=truncated,
        encoding=response.charset_encoding,
    )


def _read_body(
    response: httpx.Response, target: ResolvedTarget, deadline: float, timeout_s: float, max_bytes: int
) -> tuple[bytes, bool]:
    """Stream the (decompressed) body, stopping at ``max_bytes`` or the deadline.

    Limiting the decompressed size also defuses compression bombs.
    """
    chunks: list[bytes] = []
    size = 0
    try:
        for chunk in response.iter_bytes():
            if time.monotonic() > deadline:
                raise _timed_out(target, timeout_s)
            chunks.append(chunk)
            size += len(chunk)
            if size > max_bytes:
                return b"".join(chunks)[:max_bytes], True
    except httpx.HTTPError as exc:
        raise _transient(exc, target, timeout_s) from None
    return b"".join(chunks), False


def _follow(hop: _Hop, target: ResolvedTarget, status: int, location: str) -> _Hop:
    """The request a redirect asks for, as browsers make it.

    303 (and 301/302 after a POST) becomes a body-less GET; 307/308 repeat the
    request. Caller headers are dropped when the origin changes.
    """
    try:
        url = hop.url.join(location)
    except httpx.InvalidURL:
        raise ToolError(f"{display_url(target.url)} redirected to an invalid URL") from None
    method, body_json, body = hop.method, hop.json, hop.content
    if (status == 303 and method != "HEAD") or (status in (301, 302) and method == "POST"):
        method, body_json, body = "GET", None, None
    headers = hop.headers
    new_origin = (url.scheme, url.host, url.port or _default_port(url.scheme))
    if new_origin != target.origin:
        headers = {}
    return _Hop(method=method, url=url, headers=headers, json=body_json, content=body)


def _ensure_same_host(url: httpx.URL, target: ResolvedTarget) -> None:
    """Refuse if httpx reads the URL's host or port differently from the guard.

    The guard parses with ``urllib``; were the two parsers to disagree, the
    Host header would name a host that was never checked.
    """
    port = url.port or _default_port(url.scheme)
    if url.host != target.host or port != target.port or url.scheme != target.scheme:
        raise InvalidURL(f"the URL {display_url(target.url)} is ambiguous")


def _default_port(scheme: str) -> int:
    return 443 if scheme == "https" else 80


def _remaining(deadline: float, target: ResolvedTarget, timeout_s: float) -> float:
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise _timed_out(target, timeout_s)
    return remaining


def _is_tls_failure(exc: httpx.ConnectError) -> bool:
    """Certificate and handshake failures are final: retrying meets the same certificate."""
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, ssl.SSLError):
            return True
        cause = cause.__cause__ or cause.__context__
    return False


def _timed_out(target: ResolvedTarget, timeout_s: float) -> TransientToolError:
    return TransientToolError(f"{target.host} did not answer within {timeout_s:g} seconds")


def _transient(exc: httpx.HTTPError, target: ResolvedTarget, timeout_s: float) -> TransientToolError:
    """Map an httpx transport failure to a retryable error that names the host, not the URL."""
    if isinstance(exc, httpx.TimeoutException):
        return _timed_out(target, timeout_s)
    if isinstance(exc, httpx.RemoteProtocolError):
        return TransientToolError(f"{target.host} sent an invalid or incomplete HTTP response")
    return TransientToolError(f"the connection to {target.host} failed ({type(exc).__name__})")
