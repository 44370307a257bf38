"""Choosing the provider adapter for a model.

``demo`` is the built-in scripted model. Every other name is resolved by
``chatforge.llm.routing.resolve_model`` (admin rows, ``kind/model``
prefixes, environment defaults, the user's own key) to a route, and the
route to an adapter of its kind. Adapters are cached per endpoint and key so
HTTP connections are pooled across the turns a worker runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache

from django.conf import settings

from chatforge.llm.providers.base import ChatProvider, ProviderError
from chatforge.llm.providers.demo import DemoProvider
from chatforge.llm.routing import RouteRows, resolve_model

DEMO_MODEL = "demo"


@dataclass(frozen=True)
class ResolvedModel:
    provider: ChatProvider
    kind: str
    upstream_model: str
    supports_tools: bool = True
    supports_streaming: bool = True
    supports_reasoning: bool = False
    supports_verbosity: bool = False


def resolve(
    model: str,
    *,
    user_id: int | None = None,
    user_ciphertexts: Mapping[str, str] | None = None,
    rows: RouteRows | None = None,
) -> ResolvedModel:
    """The adapter and capabilities for ``model``; ``user_ciphertexts`` and
    ``rows``: what the caller read already (see ``resolve_model``)."""
    if model == DEMO_MODEL:
        return ResolvedModel(DemoProvider(token_delay_s=settings.CHATFORGE_DEMO_TOKEN_DELAY_S), "demo", model)
    route = resolve_model(model, user_id=user_id, user_ciphertexts=user_ciphertexts, rows=rows)
    caps = route.capabilities
    return ResolvedModel(
        provider=_adapter(route.kind, route.base_url, route.api_key),
        kind=route.kind,
        upstream_model=route.upstream_model,
        supports_tools=caps.tools,
        supports_streaming=caps.streaming,
        supports_reasoning=caps.reasoning,
        supports_verbosity=caps.verbosity,
    )


@lru_cache(maxsize=64)
def _adapter(kind: str, base_url: str, api_key: str) -> ChatProvider:
    timeouts = {"timeout_s": settings.CHATFORGE_LLM_TIMEOUT_S, "idle_timeout_s": settings.CHATFORGE_LLM_IDLE_TIMEOUT_S}
    key = api_key or "not-configured"
    # Each adapter's module imports its SDK (the OpenAI SDK alone takes about
    # half a second): a web process imports only the kinds it uses, and an LLM
    # worker all of them when it starts (orchestration/worker_warmup.py).
    if kind == "openai":
        from chatforge.llm.providers.openai_compat import OpenAICompatibleProvider

        return OpenAICompatibleProvider(base_url=base_url, api_key=key, **timeouts)
    if kind == "openai_responses":
        from chatforge.llm.providers.openai_responses import OpenAIResponsesProvider

        return OpenAIResponsesProvider(base_url=base_url, api_key=key, **timeouts)
    if kind == "anthropic":
        from chatforge.llm.providers.anthropic_adapter import AnthropicProvider

        return AnthropicProvider(base_url=base_url, api_key=key, **timeouts)
    if kind == "gemini":
        from chatforge.llm.providers.gemini_adapter import GeminiProvider

        return GeminiProvider(base_url=base_url, api_key=key, **timeouts)
    if kind == "ollama":
        from chatforge.llm.providers.ollama_adapter import OllamaProvider

        return OllamaProvider(base_url=base_url, api_key=api_key, **timeouts)
    raise ValueError(f"Unknown provider kind {kind!r}")


__all__ = ["DEMO_MODEL", "ChatProvider", "ProviderError", "ResolvedModel", "resolve"]
