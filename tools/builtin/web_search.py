"""The ``web_search`` tool: search the web through Tavily's search API.

The API key is the calling user's own (their secret ``tavily_api_key``) when
they stored one, else the operator's default. Tools never read settings or the
environment: the engine calls ``configure_web_search`` once at start-up, as it
configures ``tools.net.policy``.

Tavily's failures are mapped to the same texts the model has always seen, and
classified by whose fault they are: a 400 is about the arguments, 401/403 is
the key's (operator's or user's) configuration, 429 and 5xx are transient and
retried by the executor within this tool's policy.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import httpx

from tools import messages
from tools.base import Tool, ToolContext, ToolPolicy
from tools.errors import ToolArgumentError, ToolError, TransientToolError

DEFAULT_BASE_URL = "https://api.tavily.com"
USER_KEY_SECRET = "tavily_api_key"
DEFAULT_MAX_RESULTS = 5
DEFAULT_SEARCH_DEPTH = "basic"
# Below the policy's 20 s so a slow Tavily ends as our clear error, not as the
# executor abandoning the attempt.
REQUEST_TIMEOUT = httpx.Timeout(15.0, connect=5.0)
# A snippet or an error body longer than this wastes the model's context.
MAX_SNIPPET_CHARS = 1_000
MAX_API_MESSAGE_CHARS = 300

NOT_CONFIGURED = (
    "web search is not configured: add a Tavily API key in your settings (tavily_api_key) "
    "or ask the operator to set TAVILY_API_KEY."
)


@dataclass(frozen=True)
class WebSearchConfig:
    base_url: str = DEFAULT_BASE_URL
    default_api_key: str | None = None


_config = WebSearchConfig()


def configure_web_search(*, base_url: str, default_api_key: str | None) -> None:
    """Set where Tavily is and the key for users without their own (None or "" for none)."""
    global _config
    _config = WebSearchConfig(base_url=base_url.rstrip("/"), default_api_key=default_api_key or None)


def web_search_config() -> WebSearchConfig:
    return _config


def web_search(arguments: dict[str, Any], context: ToolContext) -> str:
    """Search with Tavily and return the answer (if asked for) and numbered results."""
    config = _config
    query = arguments["query"].strip()
    if not query:
        raise ToolArgumentError('web_search requires a non-empty "query"')
    # Either key is recorded on the context, so the executor scrubs it from
    # anything Tavily echoes back ("invalid key: Bearer tvly-…").
    api_key = context.secret(USER_KEY_SECRET) or (
        context.uses_secret(config.default_api_key) if config.default_api_key else None
    )
    if not api_key:
        raise ToolError(NOT_CONFIGURED)
    request = {
        "query": query,
        "max_results": arguments.get("max_results", DEFAULT_MAX_RESULTS),
        "search_depth": arguments.get("search_depth", DEFAULT_SEARCH_DEPTH),
        "include_answer": arguments.get("include_answer", False),
    }
    try:
        # The key goes in the Authorization header, never in the body or URL,
        # so it cannot surface in request logs or error messages.
        response = httpx.post(
            f"{config.base_url}/search",
            json=request,
            headers={"Authorization": f"Bearer {api_key}"},
            timeout=REQUEST_TIMEOUT,
        )
    except httpx.TimeoutException:
        raise TransientToolError(
            f"Tavily did not answer within {REQUEST_TIMEOUT.read:g} seconds (Please try again later)"
        ) from None
    except httpx.HTTPError as exc:
        raise TransientToolError(
            f"Could not reach Tavily ({type(exc).__name__}) (Please try again later)"
        ) from None
    if response.status_code >= 400:
        raise _error_for(response)
    try:
        body = response.json()
    except ValueError:
        raise TransientToolError(
            "Tavily returned a response that is not JSON (Please try again later)"
        ) from None
    if not isinstance(body, dict):
        raise TransientToolError("Tavily returned an unexpected response (Please try again later)")
    return format_results(query, body)


def format_results(query: str, body: dict[str, Any]) -> str:
    """The text the model reads: the answer first, then numbered results."""
    parts: list[str] = []
    answer = body.get("answer")
    if isinstance(answer, str) and answer.strip():
        parts.append(f"Answer: {answer.strip()}")
    results = [r for r in body.get("results") or [] if isinstance(r, dict)]
    if results:
        lines = ["Search Results:"]
        for number, result in enumerate(results, start=1):
            lines.append(f"{number}. {_text(result.get('title')) or '(untitled)'}")
            lines.append(f"   URL: {_text(result.get('url'))}")
            snippet = _text(result.get("content"))
            if snippet:
                lines.append(f"   {messages.clip(snippet, MAX_SNIPPET_CHARS)}")
        parts.append("\n".join(lines))
    elif not parts:
        parts.append(f'No results found for "{query}".')
    return "\n\n".join(parts)


def _error_for(response: httpx.Response) -> ToolError:
    """One error text per Tavily status (docs/tools.md, "Built-in tools"), with
    the exception class saying whose fault it is."""
    status = response.status_code
    message = _api_message(response)
    if status == 400:
        return ToolError(
            f"Invalid request parameters: {message}. Please adjust the tool call parameters and try again."
        )
    if status in (401, 403):
        return ToolError(f"Tavily API authentication failed: {message} (Check TAVILY_API_KEY configuration)")
    if status == 429:
        return TransientToolError(f"Tavily API rate limit exceeded: {message} (API quota exhausted)")
    if status >= 500:
        return TransientToolError(f"Tavily service error ({status}): {message} (Please try again later)")
    return ToolError(f"Tavily API error ({status}): {message}")


def _api_message(response: httpx.Response) -> str:
    """Tavily's own explanation: ``error``, ``message`` or ``detail`` of a JSON body, else the text."""
    text = response.text.strip()
    try:
        body = json.loads(text)
    except ValueError:
        body = None
    if isinstance(body, dict):
        for key in ("error", "message", "detail"):
            value = body.get(key)
            if isinstance(value, dict):  # Tavily nests it: {"detail": {"error": "..."}}
                value = value.get("error") or value.get("message")
            if isinstance(value, str) and value.strip():
                text = value.strip()
                break
    return messages.clip(text, MAX_API_MESSAGE_CHARS) if text else "Unknown error"


def _text(value: object) -> str:
    return " ".join(value.split()) if isinstance(value, str) else ""


WEB_SEARCH = Tool(
    name="web_search",
    description=(
        "Search the web for current information. Returns numbered results with title, URL and a "
        "snippet, preceded by a short answer when include_answer is true."
    ),
    parameters={
        "type": "object",
        "properties": {
            "query": {"type": "string", "minLength": 1, "description": "The search query."},
            "max_results": {
                "type": "integer",
                "minimum": 1,
                "maximum": 10,
                "default": DEFAULT_MAX_RESULTS,
                "description": "How many results to return (1-10).",
            },
            "search_depth": {
                "type": "string",
                "enum": ["basic", "advanced"],
                "default": DEFAULT_SEARCH_DEPTH,
                "description": "'advanced' searches deeper: slower, better for hard questions.",
            },
            "include_answer": {
                "type": "boolean",
                "default": False,
                "description": "Also return a short answer written from the results.",
            },
        },
        "required": ["query"],
        "additionalProperties": False,
    },
    handler=web_search,
    # Waits on the network and stops at its own request timeout: the I/O pool.
    policy=ToolPolicy(timeout_s=20.0, max_attempts=2, side_effects="read_only", pool="io"),
)
