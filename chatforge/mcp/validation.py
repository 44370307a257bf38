"""Checking a server row before it is saved, per field, in words an admin can act on.

A row that saves is a row whose every configured part can work: the URL is
http(s), headers are strings, the allow-list is a list of names, and every
policy value (the server's and each override) builds a ``ToolPolicy``.

The URL also goes through the tools' address guard (``tools.net.guard``): a
server on an address tools may not reach (loopback, private, link-local, the
cloud metadata address...) cannot be registered, unless
CHATFORGE_TOOLS_ALLOWED_PRIVATE_HOSTS lists its ``host:port``. Refusing it
here, not only when connecting, keeps the admin from showing as configured a
server no call could ever reach. Every connection is checked again (DNS can
answer differently later); a host that does not resolve now is saved, as
whether the URL is reachable and what the server lists is discovery's
business, reported on the row after the save.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from django.core.exceptions import ValidationError

from tools.base import ToolPolicy
from tools.errors import ToolError
from tools.net.guard import BlockedDestination, InvalidURL, check_url

from .policy import apply_override, override_problems, server_policy

if TYPE_CHECKING:  # the model calls these checks from its clean(): no import at run time
    from .models import McpServer

_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")


def check_server(server: McpServer) -> None:
    """Raise ``ValidationError`` (per field) unless the row makes a usable server."""
    errors: dict[str, list[str]] = {}
    if not re.match(r"^https?://[^/?#\s]+", server.url or "", re.IGNORECASE):
        errors["url"] = ["An MCP server needs an http:// or https:// URL, e.g. https://mcp.example.com/mcp."]
    elif "${" in server.url:
        errors["url"] = ["Placeholders go in headers, not in the URL: the URL names the server for everyone."]
    else:
        _check_destination(server.url, errors)
    _check_headers(server.headers, errors)
    if not isinstance(server.allowed_tools, list) or not all(
        isinstance(name, str) and name for name in server.allowed_tools
    ):
        errors["allowed_tools"] = ['Must be a JSON list of the server\'s tool names, e.g. ["search"], or [].']
    policy = _check_policy(server, errors)
    if policy is not None:
        _check_overrides(server.tool_overrides, policy, errors)
    if errors:
        raise ValidationError(errors)


def _check_destination(url: str, errors: dict[str, list[str]]) -> None:
    """Refuse a URL whose host is, or resolves to, an address tools may not reach."""
    try:
        check_url(url)
    except BlockedDestination as exc:
        errors["url"] = [(
            f"This server cannot be registered: {exc} A server on an internal network needs its host:port "
            "in CHATFORGE_TOOLS_ALLOWED_PRIVATE_HOSTS."
        )]
    except InvalidURL as exc:
        errors["url"] = [f"This URL cannot be used: {exc}."]
    except ToolError:
        # The host does not resolve (now): nothing to refuse yet. Discovery,
        # right after the save, reports it, and each connection is checked.
        pass


def _check_headers(headers: object, errors: dict[str, list[str]]) -> None:
    if not isinstance(headers, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in headers.items()
    ):
        errors["headers"] = [
            'Must be a JSON object of strings, e.g. {"Authorization": "Bearer ${EXAMPLE_TOKEN}"}.'
        ]
        return
    bad = [name for name in headers if not _HEADER_NAME.match(name)]
    if bad:
        errors["headers"] = [f"Not a valid header name: {', '.join(bad)}."]
    elif any("\r" in v or "\n" in v for v in headers.values()):
        errors["headers"] = ["Header values cannot contain line breaks."]


def _check_policy(server: McpServer, errors: dict[str, list[str]]) -> ToolPolicy | None:
    if server.timeout_s is not None and server.timeout_s <= 0:
        errors["timeout_s"] = ["Must be more than 0 seconds."]
    if server.max_attempts is not None and server.max_attempts < 1:
        errors["max_attempts"] = ["At least 1."]
    for backoff in ("backoff_initial_s", "backoff_max_s"):
        if getattr(server, backoff) is not None and getattr(server, backoff) < 0:
            errors[backoff] = ["Must not be negative."]
    if errors.keys() & {"timeout_s", "max_attempts", "backoff_initial_s", "backoff_max_s"}:
        return None
    try:
        return server_policy(server)
    except (TypeError, ValueError) as exc:
        errors.setdefault("__all__", []).append(f"The policy is invalid: {exc}")
        return None


def _check_overrides(overrides: object, policy: ToolPolicy, errors: dict[str, list[str]]) -> None:
    if not isinstance(overrides, dict):
        errors["tool_overrides"] = [
            'Must be a JSON object: tool name → policy fields, e.g. {"search": {"timeout_s": 60}}.'
        ]
        return
    problems: list[str] = []
    for tool_name, override in overrides.items():
        found = override_problems(override)
        if not found:
            try:
                apply_override(policy, override)
            except ValueError as exc:
                found = [str(exc)]
        problems.extend(f"{tool_name}: {problem}" for problem in found)
    if problems:
        errors["tool_overrides"] = problems
