"""The ``web_fetch`` tool: read a public web page as plain text.

The URL comes from the model, so every request goes through
``tools.net.client.guarded_request`` (no private addresses, every redirect
checked, bounded size and time). HTML is reduced to readable text because
markup, scripts and navigation cost the model tokens and carry nothing it
can use.
"""

from __future__ import annotations

from typing import Any

from bs4 import BeautifulSoup

from tools.base import Tool, ToolContext, ToolPolicy
from tools.errors import ToolError, TransientToolError
from tools.net.client import GuardedResponse, RetryAfter, guarded_request, parse_retry_after

MAX_BYTES = 2_000_000
DEFAULT_MAX_CHARS = 10_000  # fits the executor's default output limit with room for the envelope
# Shorter than the policy's timeout, so our own clearer timeout message wins
# and the worker thread is not left running after the executor gives up.
REQUEST_TIMEOUT_S = 15.0

HTML_TYPES = ("text/html", "application/xhtml+xml")
READABLE_TYPES = (
    *HTML_TYPES,
    "text/plain",
    "text/markdown",
    "application/json",
    "application/xml",
    "text/xml",
)

_USER_AGENT = "ChatForge-web_fetch/1.0 (+tool call on behalf of a chat user)"
# Elements whose text is not content: code, styling, menus, embedded media.
_NOISE_TAGS = ("script", "style", "noscript", "template", "nav", "svg", "iframe", "object", "embed", "head")
# Elements that start a new line, so paragraphs do not run together.
_BLOCK_TAGS = (
    "p", "div", "section", "article", "main", "aside", "header", "footer", "li", "ul", "ol",
    "h1", "h2", "h3", "h4", "h5", "h6", "br", "hr", "tr", "table", "pre", "blockquote",
    "dd", "dt", "dl", "figcaption", "form", "label",
)  # fmt: skip
# Marks block boundaries while the text is assembled; no page contains it
# as text that matters (it is Unicode's paragraph separator).
_BLOCK_BREAK = "\u2029"


def web_fetch(arguments: dict[str, Any], context: ToolContext) -> dict[str, Any]:
    """Fetch ``url`` and return its readable text, title and where it ended up."""
    url: str = arguments["url"]
    max_chars: int = arguments.get("max_chars", DEFAULT_MAX_CHARS)
    response = guarded_request(
        "GET",
        url,
        headers={"User-Agent": _USER_AGENT, "Accept": ", ".join(READABLE_TYPES)},
        timeout_s=REQUEST_TIMEOUT_S,
        max_bytes=MAX_BYTES,
        allowed_content_types=READABLE_TYPES,
    )
    _raise_for_status(response)
    title, text = _readable(response)
    return {
        "url": url,
        "final_url": response.url,
        "status": response.status_code,
        "content_type": response.content_type,
        "title": title,
        "text": text[:max_chars],
        "truncated": response.truncated or len(text) > max_chars,
    }


def _raise_for_status(response: GuardedResponse) -> None:
    """4xx is final; 429 and 5xx may pass, so they are retried."""
    status = response.status_code
    if status < 400:
        return
    message = f"the page answered {status} {response.reason_phrase}".rstrip()
    if status == 429 or status >= 500:
        retry_after = parse_retry_after(response.headers.get("retry-after"))
        if retry_after is not None:
            raise RetryAfter(message, retry_after_s=retry_after)
        raise TransientToolError(message)
    raise ToolError(message)


def _readable(response: GuardedResponse) -> tuple[str | None, str]:
    """The title (HTML only) and the text of the page."""
    if response.content_type in HTML_TYPES:
        return html_to_text(response.content, encoding=response.encoding)
    return None, response.text.strip()


def html_to_text(html: bytes | str, *, encoding: str | None = None) -> tuple[str | None, str]:
    """The title and readable text of an HTML document.

    Noise elements are removed. Line breaks in the source mean nothing in
    HTML, so all whitespace is collapsed and only block elements (paragraphs,
    headings, list items, ...) start new lines; blank lines are dropped.
    """
    soup = BeautifulSoup(html, "html.parser", from_encoding=encoding if isinstance(html, bytes) else None)
    title = _collapse(soup.title.get_text()) if soup.title is not None else None
    for element in soup.find_all(_NOISE_TAGS):
        element.decompose()
    for element in soup.find_all(_BLOCK_TAGS):
        element.insert_before(_BLOCK_BREAK)
        element.insert_after(_BLOCK_BREAK)
    lines = (_collapse(line) for line in soup.get_text().split(_BLOCK_BREAK))
    return title or None, "\n".join(line for line in lines if line)


def _collapse(text: str) -> str:
    return " ".join(text.split())


WEB_FETCH = Tool(
    name="web_fetch",
    description=(
        "Fetch a public web page (http or https) and return its title and readable text. "
        "Reads HTML, plain text, Markdown, JSON and XML; private and local addresses are refused."
    ),
    parameters={
        "type": "object",
        "properties": {
            "url": {"type": "string", "format": "uri", "description": "The absolute http(s) URL to fetch."},
            "max_chars": {
                "type": "integer",
                "minimum": 1000,
                "maximum": 100_000,
                "description": f"Most characters of text to return (default {DEFAULT_MAX_CHARS}).",
            },
        },
        "required": ["url"],
        "additionalProperties": False,
    },
    handler=web_fetch,
    # Waits on the network and stops at its own request timeout: the I/O pool.
    policy=ToolPolicy(timeout_s=20.0, max_attempts=2, side_effects="read_only", pool="io"),
)
