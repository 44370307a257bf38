"""The models a user can pick, with capabilities, validation status and
whether that user can use them now, as the API (`GET /api/models/`) and the
web pages show them."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser

from .models import LanguageModel, ProviderKind
from .resolution import DEMO_MODEL
from .routing import USER_KEY_SECRETS, missing_key_message, resolve_model
from .validation import all_validation_statuses

# The built-in demo model: always there, needs no provider.
_DEMO_CAPABILITIES = {"tools": True, "streaming": True, "reasoning": False, "verbosity": False, "vision": False}


def _untested(name: str) -> dict[str, Any]:
    return {"model": name, "tests": 0, "successes": 0, "success_rate": 0.0, "validated": False}


def unavailable_reason(model: str, *, user: AbstractBaseUser | None) -> str | None:
    """Why ``user`` cannot use ``model`` now, as a sentence saying what to
    do, or None when they can. The check is the one a run's start makes
    (``missing_key_message``): a model served by a vendor's public endpoint
    with no key for it anywhere — the provider's, the server's environment,
    the user's own. A listed model is therefore one a run accepts. Without
    ``user``, only the server's keys count."""
    if model == DEMO_MODEL:
        return None
    user_id = user.pk if user is not None and user.is_authenticated else None
    if missing_key_message(model, user_id=user_id) is None:
        return None
    route = resolve_model(model, user_id=user_id)
    kind = ProviderKind(route.kind)
    secret = USER_KEY_SECRETS[kind]
    where = route.source if route.source != "environment" else f"the server's {kind.label} endpoint"
    return (f"No API key for {where}: add your own key as '{secret}' on the Settings page "
            "(Your API keys and secrets), or ask an admin to set the provider's key.")


def model_list(*, user: AbstractBaseUser | None = None) -> dict[str, Any]:
    """``{"default", "default_available", "default_unavailable_reason",
    "unavailable_providers", "models": [...]}``: the demo model, then every
    enabled model of an enabled provider, by provider then name, each
    ``available`` to ``user`` or not with the ``unavailable_reason``.
    Models of disabled providers, and disabled models, are left out.

    Three queries for the rows and statuses; the key check costs none where
    the server's environment has the vendors' keys, otherwise a few per
    model (the admin's model list is short)."""
    statuses = all_validation_statuses()
    rows = (LanguageModel.objects.select_related("provider")
            .filter(enabled=True, provider__enabled=True)
            .order_by("provider__name", "name"))
    models = [{
        "id": DEMO_MODEL,
        "provider": "built-in",
        "kind": "demo",
        "capabilities": dict(_DEMO_CAPABILITIES),
        "validation": statuses[DEMO_MODEL].as_dict() if DEMO_MODEL in statuses else _untested(DEMO_MODEL),
        "available": True,
        "unavailable_reason": None,
    }]
    for row in rows:
        reason = unavailable_reason(row.name, user=user)
        models.append({
            "id": row.name,
            "provider": row.provider.name,
            "kind": row.provider.kind,
            "capabilities": {
                "tools": row.supports_tools,
                "streaming": row.supports_streaming,
                "reasoning": row.supports_reasoning,
                "verbosity": row.supports_verbosity,
                "vision": row.supports_vision,
            },
            "validation": statuses[row.name].as_dict() if row.name in statuses else _untested(row.name),
            "available": reason is None,
            "unavailable_reason": reason,
        })
    default = settings.CHATFORGE_DEFAULT_MODEL
    listed = next((m for m in models if m["id"] == default), None)
    default_reason = listed["unavailable_reason"] if listed else unavailable_reason(default, user=user)
    return {
        "default": default,
        "default_available": default_reason is None,
        "default_unavailable_reason": default_reason,
        "unavailable_providers": sorted({m["provider"] for m in models if not m["available"]}),
        "models": models,
    }
