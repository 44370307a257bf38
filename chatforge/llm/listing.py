"""The models a user can pick, with capabilities and validation status, as
the API (`GET /api/models/`) and the web pages show them."""

from __future__ import annotations

from typing import Any

from django.conf import settings

from .models import LanguageModel
from .validation import all_validation_statuses

# The built-in demo model: always there, needs no provider.
_DEMO_CAPABILITIES = {"tools": True, "streaming": True, "reasoning": False, "verbosity": False, "vision": False}


def _untested(name: str) -> dict[str, Any]:
    return {"model": name, "tests": 0, "successes": 0, "success_rate": 0.0, "validated": False}


def model_list() -> dict[str, Any]:
    """``{"default": name, "models": [...]}``: the demo model, then every
    enabled model of an enabled provider (three queries in all)."""
    statuses = all_validation_statuses()
    rows = LanguageModel.objects.select_related("provider").filter(enabled=True, provider__enabled=True)
    models = [{
        "id": "demo",
        "provider": "built-in",
        "kind": "demo",
        "capabilities": dict(_DEMO_CAPABILITIES),
        "validation": statuses["demo"].as_dict() if "demo" in statuses else _untested("demo"),
    }]
    for row in rows:
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
        })
    return {"default": settings.CHATFORGE_DEFAULT_MODEL, "models": models}
