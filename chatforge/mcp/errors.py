"""What went wrong talking to an MCP server, as the executor's error types.

Every failure becomes a tool result the model reads (``Error executing tool
'docs__search': …``), and its class says what the executor may do:

* ``TransientToolError`` - the server is unreachable, slow, overloaded or
  answered 429/5xx: another attempt may work, within the tool's policy;
* ``ToolArgumentError`` - the server refused the arguments (JSON-RPC
  ``invalid params``) or the tool reported an error (``isError``), which
  MCP defines as feedback the model can act on;
* ``ToolError`` - final: refused credentials, a wrong URL, an answer that is
  not MCP. The texts say whose fault it is.

The SDK raises from inside anyio task groups, so the cause arrives wrapped in
(nested) exception groups; ``failure_of`` finds it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import httpx2
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, INVALID_PARAMS, METHOD_NOT_FOUND, REQUEST_TIMEOUT
from pydantic import ValidationError

from tools.errors import ToolArgumentError, ToolError, TransientToolError

_MAX_DETAIL_CHARS = 500


@dataclass
class HttpStatuses:
    """The error statuses the server answered during one session.

    The streamable HTTP transport turns a 401 or a 503 into the same generic
    JSON-RPC error, so the client's response hook records the status here for
    the message to name it.
    """

    seen: list[int] = field(default_factory=list)

    async def record(self, response: httpx2.Response) -> None:
        if response.status_code >= 400:
            self.seen.append(response.status_code)

    @property
    def last(self) -> int | None:
        return self.seen[-1] if self.seen else None


def failure_of(
    error: BaseException, *, server: str, statuses: HttpStatuses | None = None, timeout_s: float | None = None
) -> ToolError:
    """The tool error that explains ``error``, raised while talking to MCP server ``server``."""
    cause = _main_cause(error)
    status = statuses.last if statuses is not None else None
    if isinstance(cause, ToolError):
        return cause
    if isinstance(cause, MCPError):
        return _protocol_error(cause, server=server, status=status, timeout_s=timeout_s)
    if isinstance(cause, httpx2.HTTPStatusError):
        return _http_error(cause.response.status_code, server=server)
    if isinstance(cause, httpx2.TimeoutException | TimeoutError):
        return _timed_out(server, timeout_s)
    if isinstance(cause, httpx2.TransportError | OSError):
        reason = str(cause) or type(cause).__name__
        return TransientToolError(
            f"could not reach the MCP server '{server}' ({_clip(reason)}); it may be down"
        )
    if isinstance(cause, ValidationError):
        return ToolError(f"the MCP server '{server}' sent an answer that is not valid MCP")
    detail = f"{type(cause).__name__}: {cause}" if str(cause) else type(cause).__name__
    return ToolError(f"talking to the MCP server '{server}' failed ({_clip(detail)})")


def tool_reported_error(server: str, text: str) -> ToolArgumentError:
    """An ``isError`` result: the tool ran and says what went wrong, for the model to act on."""
    detail = _clip(" ".join(text.split())) or "(no details)"
    return ToolArgumentError(f"the MCP server '{server}' reported that the tool failed: {detail}")


def _protocol_error(error: MCPError, *, server: str, status: int | None, timeout_s: float | None) -> ToolError:
    message = _clip(error.message)
    if error.code == INVALID_PARAMS:
        return ToolArgumentError(f"the MCP server '{server}' refused the arguments: {message}")
    if error.code == REQUEST_TIMEOUT:
        return _timed_out(server, timeout_s)
    if error.code == CONNECTION_CLOSED:
        return TransientToolError(f"the connection to the MCP server '{server}' closed before it answered")
    if status is not None:
        # The transport's stand-in for an HTTP error status: name the status.
        return _http_error(status, server=server)
    if error.code == METHOD_NOT_FOUND:
        return ToolError(
            f"the MCP server '{server}' does not know this request ({message}); "
            "the operator should check the server's URL and transport"
        )
    return ToolError(f"the MCP server '{server}' answered with error {error.code}: {message}")


def _http_error(status: int, *, server: str) -> ToolError:
    if status in (401, 403):
        return ToolError(
            f"the MCP server '{server}' refused the request (HTTP {status}): its credentials are missing or "
            "wrong; the user may need to update the secret the server's headers use, or the operator the "
            "server's configuration"
        )
    if status == 429 or status >= 500:
        return TransientToolError(
            f"the MCP server '{server}' answered HTTP {status}; it may be overloaded or down"
        )
    return ToolError(
        f"the MCP server '{server}' answered HTTP {status}; the operator should check the server's URL "
        "and transport"
    )


def _timed_out(server: str, timeout_s: float | None) -> TransientToolError:
    within = f" within {timeout_s:g} seconds" if timeout_s is not None else " in time"
    return TransientToolError(f"the MCP server '{server}' did not answer{within}")


def _main_cause(error: BaseException) -> BaseException:
    """The exception that explains ``error``: inside groups, our own tool errors
    first, then the SDK's protocol errors, then any other ``Exception`` (never
    the cancellations, ``BaseException``s, that a failure causes in sibling tasks)."""
    leaves = list(_leaves(error)) or [error]
    for kind in (ToolError, MCPError, httpx2.HTTPError, Exception):
        for leaf in leaves:
            if isinstance(leaf, kind):
                return leaf
    return leaves[0]


def _leaves(error: BaseException) -> Iterator[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            yield from _leaves(inner)
    else:
        yield error


def _clip(text: str) -> str:
    return text if len(text) <= _MAX_DETAIL_CHARS else text[:_MAX_DETAIL_CHARS] + "..."
