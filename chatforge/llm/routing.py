"""From the model name a client sends to the provider that serves it.

In order: a ``LanguageModel`` row (admin); ``<provider row name>/<model>``;
``<kind>/<model>`` with the environment's defaults (``anthropic/claude-…``,
``gemini/…``, ``ollama/…``, ``responses/…``, ``openai/…``); otherwise the
default OpenAI-compatible endpoint. The calling user's own key (a secret such
as ``anthropic_api_key``) overrides the configured one for their runs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from django.conf import settings

from chatforge.accounts.crypto import InvalidToken, decrypt
from chatforge.accounts.secrets import user_secret_get

from .models import LanguageModel, Provider, ProviderKind


@dataclass(frozen=True)
class Capabilities:
    tools: bool = True
    streaming: bool = True
    reasoning: bool = False
    verbosity: bool = False
    vision: bool = False


@dataclass(frozen=True)
class ModelRoute:
    kind: str
    base_url: str
    api_key: str
    upstream_model: str
    capabilities: Capabilities
    source: str  # "model row", "provider row", "environment": for messages and logs


_PREFIXES = {
    "openai": ProviderKind.OPENAI,
    "responses": ProviderKind.OPENAI_RESPONSES,
    "anthropic": ProviderKind.ANTHROPIC,
    "gemini": ProviderKind.GEMINI,
    "ollama": ProviderKind.OLLAMA,
}
USER_KEY_SECRETS = {
    ProviderKind.OPENAI: "openai_api_key",
    ProviderKind.OPENAI_RESPONSES: "openai_api_key",
    ProviderKind.ANTHROPIC: "anthropic_api_key",
    ProviderKind.GEMINI: "gemini_api_key",
    ProviderKind.OLLAMA: "ollama_api_key",
}
# Reasoning controls only where the model family takes them; the API
# rejects reasoning_effort elsewhere. Rows say so explicitly instead.
_REASONING_FAMILIES = re.compile(r"^(o\d|gpt-5|claude-(opus|sonnet)-4|gemini-2\.5|gemini-3|qwen3|deepseek-r1|gpt-oss)")


def _default_base_url(kind: str) -> str:
    return {
        ProviderKind.OPENAI: settings.OPENAI_BASE_URL,
        ProviderKind.OPENAI_RESPONSES: settings.OPENAI_BASE_URL,
        ProviderKind.ANTHROPIC: settings.ANTHROPIC_BASE_URL,
        ProviderKind.GEMINI: settings.GEMINI_BASE_URL,
        ProviderKind.OLLAMA: settings.OLLAMA_BASE_URL,
    }[kind]


def _environment_key(kind: str) -> str:
    return {
        ProviderKind.OPENAI: settings.OPENAI_API_KEY,
        ProviderKind.OPENAI_RESPONSES: settings.OPENAI_API_KEY,
        ProviderKind.ANTHROPIC: settings.ANTHROPIC_API_KEY,
        ProviderKind.GEMINI: settings.GEMINI_API_KEY,
        ProviderKind.OLLAMA: "",
    }[kind]


# Vendors' public endpoints, which answer nothing without a key.
_KEYED_HOSTS = frozenset({"api.openai.com", "api.anthropic.com", "generativelanguage.googleapis.com"})
_KEY_SETTINGS = {
    ProviderKind.OPENAI: "OPENAI_API_KEY",
    ProviderKind.OPENAI_RESPONSES: "OPENAI_API_KEY",
    ProviderKind.ANTHROPIC: "ANTHROPIC_API_KEY",
    ProviderKind.GEMINI: "GEMINI_API_KEY",
}


def _needs_key(kind: str, base_url: str) -> bool:
    return kind in _KEY_SETTINGS and urlsplit(base_url).hostname in _KEYED_HOSTS


def missing_key_message(model: str, *, user_id: int | None) -> str | None:
    """Why ``model`` cannot be called — a vendor's public endpoint and no key
    for it anywhere (the model's provider, the user's own keys, the
    environment) — or None. A run would otherwise make its attempts against
    the endpoint and fail on a 401. Costs no query when the environment has
    the key, as it does wherever that vendor is used."""
    prefix, _, rest = model.partition("/")
    kind = _PREFIXES[prefix] if rest and prefix in _PREFIXES else ProviderKind.OPENAI
    if _environment_key(kind) or not _needs_key(kind, _default_base_url(kind)):
        return None
    route = resolve_model(model, user_id=user_id)
    if route.api_key or not _needs_key(route.kind, route.base_url):
        return None
    setting = _KEY_SETTINGS[ProviderKind(route.kind)]
    return (
        f"The model '{model}' would be called at {route.base_url} ({route.source}), and no API key is set "
        f"for it: set {setting} on the server, add your own key as '{USER_KEY_SECRETS[ProviderKind(route.kind)]}' "
        "in your settings, or have an admin configure the model (with its provider's key)."
    )


def provider_key(provider: Provider) -> str:
    if not provider.api_key_ciphertext:
        return ""
    try:
        return decrypt(provider.api_key_ciphertext)
    except InvalidToken:
        return ""  # rotated away: fall back to the environment's key


def _guess_capabilities(kind: str, upstream: str) -> Capabilities:
    reasoning = bool(_REASONING_FAMILIES.match(upstream))
    return Capabilities(reasoning=reasoning, verbosity=kind in (ProviderKind.OPENAI, ProviderKind.OPENAI_RESPONSES)
                        and upstream.startswith("gpt-5"))


def _with_user_key(route: ModelRoute, user_id: int | None, ciphertexts: Mapping[str, str] | None) -> ModelRoute:
    if user_id is None:
        return route
    own = user_secret_get(user_id=user_id, name=USER_KEY_SECRETS[ProviderKind(route.kind)], ciphertexts=ciphertexts)
    if not own:
        return route
    return ModelRoute(route.kind, route.base_url, own, route.upstream_model, route.capabilities, route.source + " + user key")


@dataclass(frozen=True)
class RouteRows:
    """The admin rows a model name can resolve to: its enabled
    ``LanguageModel`` (with an enabled provider), and the enabled provider
    named by its ``<provider>/`` prefix. Read by ``route_rows`` or, by the
    engine, in the same statement that claims a model turn
    (docs/decisions/0013-configuration-read-with-each-step.md)."""

    model_row: LanguageModel | None
    prefix_provider: Provider | None


def route_rows(model: str) -> RouteRows:
    row = (
        LanguageModel.objects.select_related("provider")
        .filter(name=model, enabled=True, provider__enabled=True)
        .first()
    )
    prefix, _, rest = model.partition("/")
    provider = Provider.objects.filter(name=prefix, enabled=True).first() if row is None and rest else None
    return RouteRows(model_row=row, prefix_provider=provider)


def resolve_model(
    model: str,
    *,
    user_id: int | None = None,
    user_ciphertexts: Mapping[str, str] | None = None,
    rows: RouteRows | None = None,
) -> ModelRoute:
    """The route for ``model``. ``user_ciphertexts`` (the user's secrets) and
    ``rows`` (``route_rows(model)``): what the caller has read already;
    whatever is not given is queried here."""
    if rows is None:
        rows = route_rows(model)
    row = rows.model_row
    if row is not None:
        provider = row.provider
        route = ModelRoute(
            kind=provider.kind,
            base_url=provider.base_url or _default_base_url(provider.kind),
            api_key=provider_key(provider) or _environment_key(provider.kind),
            upstream_model=row.upstream_name or row.name,
            capabilities=Capabilities(
                tools=row.supports_tools,
                streaming=row.supports_streaming,
                reasoning=row.supports_reasoning,
                verbosity=row.supports_verbosity,
                vision=row.supports_vision,
            ),
            source=f"model '{row.name}' of provider '{provider.name}'",
        )
        return _with_user_key(route, user_id, user_ciphertexts)
    prefix, _, rest = model.partition("/")
    if rest:
        provider = rows.prefix_provider
        if provider is not None:
            route = ModelRoute(
                kind=provider.kind,
                base_url=provider.base_url or _default_base_url(provider.kind),
                api_key=provider_key(provider) or _environment_key(provider.kind),
                upstream_model=rest,
                capabilities=_guess_capabilities(provider.kind, rest),
                source=f"provider '{provider.name}'",
            )
            return _with_user_key(route, user_id, user_ciphertexts)
        if prefix in _PREFIXES:
            kind = _PREFIXES[prefix]
            route = ModelRoute(kind, _default_base_url(kind), _environment_key(kind), rest,
                               _guess_capabilities(kind, rest), "environment")
            return _with_user_key(route, user_id, user_ciphertexts)
    kind = ProviderKind.OPENAI
    route = ModelRoute(kind, _default_base_url(kind), _environment_key(kind), model,
                       _guess_capabilities(kind, model), "environment")
    return _with_user_key(route, user_id, user_ciphertexts)
