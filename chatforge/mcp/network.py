"""The address guard of HTTP tools, applied to the SDK's HTTP client.

An MCP server's URL is checked by ``tools.net.guard.check_url`` exactly like a
URL a tool fetches: loopback, private, link-local and metadata addresses are
refused unless CHATFORGE_TOOLS_ALLOWED_PRIVATE_HOSTS lists the ``host:port``.
The SDK then talks through an ``httpx2`` client whose transport

* connects only to the addresses the guard checked (no second DNS lookup a
  rebinding DNS server could answer differently), keeping the ``Host`` header
  and the TLS server name of the URL, so certificates are still verified;
* refuses any request to another origin (scheme, host, port) than the one
  checked: the SDK follows same-origin redirects and the SSE transport's
  ``endpoint`` event, and neither may lead anywhere else;
* ignores proxy settings of the environment, which would connect on our
  behalf to whatever the URL names.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping

import httpx2

from tools.errors import ToolError
from tools.net.guard import InvalidURL, ResolvedTarget, check_url, display_url

_DEFAULT_PORTS = {"http": 80, "https": 443}


class LeftOrigin(ToolError):
    """The SDK was about to send a request to an origin the guard did not check."""


def guarded_target(url: str) -> ResolvedTarget:
    """The checked addresses of ``url``; ``ToolError`` if tools may not reach it.

    A URL that cannot be used at all is the operator's configuration, not the
    model's arguments, so ``InvalidURL`` is reported as a final ``ToolError``.
    """
    try:
        return check_url(url)
    except InvalidURL as exc:
        raise ToolError(f"the MCP server's URL cannot be used: {exc}") from None


class PinnedTransport(httpx2.AsyncBaseTransport):
    """Sends each request to one of ``target``'s checked addresses, and only for its origin."""

    def __init__(self, target: ResolvedTarget) -> None:
        self._target = target
        self._inner = httpx2.AsyncHTTPTransport(trust_env=False)

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        url = request.url
        origin = (url.scheme, url.host, url.port or _DEFAULT_PORTS.get(url.scheme, 0))
        if origin != self._target.origin:
            raise LeftOrigin(
                f"the MCP server sent the client to {display_url(str(url))}, another origin than "
                f"{display_url(self._target.url)}; it was not followed"
            )
        last_error: httpx2.ConnectError | None = None
        for address in self._target.addresses:
            # The Host header was set from the real URL when the request was
            # built; only the address connected to changes.
            request.url = url.copy_with(host=address)
            if url.scheme == "https":
                request.extensions["sni_hostname"] = url.host
            try:
                return await self._inner.handle_async_request(request)
            except httpx2.ConnectError as exc:
                last_error = exc
            finally:
                request.url = url
        assert last_error is not None  # the guard never returns a target without addresses
        raise last_error

    async def aclose(self) -> None:
        await self._inner.aclose()


def guarded_client(
    target: ResolvedTarget,
    *,
    headers: Mapping[str, str],
    timeout_s: float,
    on_response: Callable[[httpx2.Response], Awaitable[None]] | None = None,
) -> httpx2.AsyncClient:
    """An ``httpx2`` client for the SDK's transports, bound to ``target``;
    ``on_response`` sees every response (``errors.HttpStatuses``)."""
    return httpx2.AsyncClient(
        transport=PinnedTransport(target),
        headers=dict(headers),
        timeout=httpx2.Timeout(timeout_s),
        trust_env=False,
        follow_redirects=False,
        event_hooks={"response": [on_response]} if on_response is not None else None,
    )
