"""The openai SDK client both OpenAI adapters (Chat Completions and
Responses) build: SDK retries as configured, a whole-turn timeout with an
idle (read) limit for streams, and never the operator's ``OPENAI_API_KEY``.
The HTTP connection pool underneath is the process's (``shared_http.py``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx2
import openai

from chatforge.llm.providers import sse
from chatforge.llm.providers.connection_reuse import drain_on_close
from chatforge.llm.providers.shared_http import shared_http_client

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
        http_client=shared_http_client("openai", _http_client),
    )
    return client, openai.Timeout(timeout_s, connect=connect_timeout_s)


def _http_client() -> openai.DefaultHttpxClient:
    """The SDK's default HTTP client, keeping its connection after a stream
    that stopped at ``[DONE]`` (connection_reuse.py)."""
    return openai.DefaultHttpxClient(event_hooks={"response": [drain_on_close(httpx2)]})


def as_built_body(params: dict[str, Any]) -> dict[str, Any]:
    """``create`` keyword arguments that send ``params`` as the JSON body
    unchanged, without the SDK's per-call transform of the typed parameters.

    ``params`` is already the wire shape (plain JSON values we built), and
    for a turn with a few tools and messages the SDK's recursive transform
    of it cost ~2.5 ms of CPU per call and returned an equal dict
    (docs/performance.md). The required arguments are given (``model``,
    an empty ``messages``/``input`` the body then replaces, ``stream``, which
    picks the SDK's response type) and everything else goes in
    ``extra_body``, which the SDK sends as given, merged over the rest."""
    required = {"model": params["model"], "stream": params.get("stream", False)}
    body = {key: value for key, value in params.items() if key not in required}
    return {**required, "extra_body": body}


class JsonEventStream(openai.Stream[Any]):
    """The SDK's stream with a leaner decoding of its events.

    The SDK builds it (``stream_cls``) and owns the response; this reads
    the response's bytes through ``sse.SseDecoder`` and parses each event
    with orjson, instead of the SDK's line-by-line decoder and its per-event
    type checks (about a quarter of a token's CPU in the LLM worker:
    docs/performance.md). What the SDK's stream does beyond decoding is
    kept: it stops at ``[DONE]``, an event carrying ``error`` raises
    ``openai.APIError`` with its message, transport failures become
    ``APITimeoutError`` / ``APIConnectionError``, and the response is closed
    however the iteration ends."""

    def __stream__(self) -> Iterator[Any]:
        response = self.response
        # Held in a local until the response is closed: a loop's own
        # iterator is closed at its ``break``, and closing it there would
        # mark the body as failed (connection_reuse.py) before the close
        # that drains it and keeps the connection.
        events = self._json_events()
        try:
            for _, data in events:
                if data.startswith(b"[DONE]"):
                    break
                value = sse.loads(data)
                if isinstance(value, dict) and value.get("error"):
                    raise openai.APIError(message=_error_message(value["error"]), request=response.request,
                                          body=value["error"])
                yield value
        finally:
            response.close()

    def _json_events(self) -> Iterator[sse.Event]:
        try:
            yield from sse.SseDecoder().events(self.response.iter_bytes())
        except httpx2.TimeoutException as err:
            raise openai.APITimeoutError(request=self.response.request) from err
        except httpx2.RequestError as err:
            raise openai.APIConnectionError(request=self.response.request) from err


def _error_message(error: Any) -> str:
    message = error.get("message") if isinstance(error, dict) else None
    return message if isinstance(message, str) and message else "An error occurred during streaming"


def stream_json_events(client: openai.OpenAI, path: str, body: dict[str, Any]) -> openai.Stream[Any]:
    """POST ``body`` as given and stream its events as plain JSON values.

    This is the SDK's own generic request method (``client.post``, its way
    to reach endpoints it has no typed method for), so the request, the
    authentication, the HTTP errors and the stream's end and failures are
    the SDK's as with ``chat.completions.create``; the events are not
    turned into its typed models (``cast_to=object``: building those cost
    about 5 ms of CPU per streamed turn of a few dozen chunks) and are
    decoded by ``JsonEventStream``."""
    return client.post(
        path,
        cast_to=object,
        body=body,
        options={"security": {"bearer_auth": True}},
        stream=True,
        stream_cls=JsonEventStream,
    )
