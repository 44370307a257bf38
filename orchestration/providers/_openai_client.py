"""The openai SDK client both OpenAI adapters (Chat Completions and
Responses) build: SDK retries as configured, a whole-turn timeout with an
idle (read) limit for streams, and never the operator's ``OPENAI_API_KEY``.
The HTTP connection pool underneath is the process's (``shared_http.py``).
"""

from __future__ import annotations

import openai

from .shared_http import shared_http_client

# The SDK refuses an empty key, and falling back to OPENAI_API_KEY would send
# the operator's real key to whatever base_url is configured. Local servers
# (Ollama, vLLM) ignore the key anyway.
PLACEHOLDER_API_KEY = "no-key-configured"


def openai_client(
    *,
    base_url: str,
    api_key: str,
    timeout_s: float,
    idle_timeout_s: float,
    connect_timeout_s: float,
    max_retries: int,
) -> tuple[openai.OpenAI, openai.Timeout]:
    """The client, and the timeout for a non-streaming call (no idle limit:
    it waits up to ``timeout_s`` for its one response)."""
    client = openai.OpenAI(
        base_url=base_url,
        api_key=api_key or PLACEHOLDER_API_KEY,
        timeout=openai.Timeout(timeout_s, connect=connect_timeout_s, read=idle_timeout_s),
        max_retries=max_retries,
        http_client=shared_http_client("openai", openai.DefaultHttpxClient),
    )
    return client, openai.Timeout(timeout_s, connect=connect_timeout_s)
