"""Choosing the provider adapter for a model name.

``demo`` is the built-in scripted model. Every other name goes to the
OpenAI-compatible endpoint configured by OPENAI_BASE_URL / OPENAI_API_KEY.
Admin-managed providers and the other vendors extend this in a later step.
"""

from __future__ import annotations

from functools import lru_cache

from django.conf import settings

from .base import ChatProvider, ProviderError

DEMO_MODEL = "demo"


def get_provider(model: str) -> ChatProvider:
    if model == DEMO_MODEL:
        from .demo import DemoProvider

        return DemoProvider(token_delay_s=settings.CHATFORGE_DEMO_TOKEN_DELAY_S)
    return _openai_compatible(settings.OPENAI_BASE_URL, settings.OPENAI_API_KEY)


@lru_cache(maxsize=8)
def _openai_compatible(base_url: str, api_key: str) -> ChatProvider:
    # Cached so HTTP connections are pooled across the turns a worker runs.
    from .openai_compat import OpenAICompatibleProvider

    return OpenAICompatibleProvider(
        base_url=base_url,
        api_key=api_key or "not-configured",
        timeout_s=settings.CHATFORGE_LLM_TIMEOUT_S,
        max_retries=settings.CHATFORGE_LLM_MAX_RETRIES,
    )


__all__ = ["DEMO_MODEL", "ChatProvider", "ProviderError", "get_provider"]
